"""`deepresearch doctor` (issue 23): one row per check, what to set for each
failure, non-zero exit when a needed check fails; on a dead endpoint a few
lines naming it. Real CLI process, real dev server, scripted model servers
over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from testkit.llm_server import Reply
from testkit.local_model_server import LocalModelServer
from testkit.speech_server import ScriptedSpeech

BIN = Path(sys.executable).parent
CHECKS = (
    "Temporal",
    "model endpoint",
    "model ",
    "tool calling",
    "JSON output",
    "context window",
    "speech endpoint",
    "search engine",
    "sandbox",
)


def doctor(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "deepresearch"), "doctor"], env=env, capture_output=True, text=True, timeout=120)


def rows(out: str) -> dict[str, str]:
    """check name -> status, from the printed rows."""
    found = {}
    for line in out.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("ok", "FAIL", "warn", "skip"):
            found[rest.strip()[:24].strip()] = status
    return found


def cooperative(request: dict):
    """A model that calls a tool when given one and writes JSON when asked."""
    if request.get("tools"):
        return Reply(tool_calls=[("ping", {"word": "hello"})])
    if request.get("response_format"):
        return json.dumps({"ok": True})
    return "hello"


async def test_doctor_passes_on_a_working_local_server(worker_env):
    with LocalModelServer("llama.cpp", model="smollm2-135m", n_ctx=8192, handler=cooperative) as server:
        env = {k: v for k, v in worker_env.items() if k not in ("OPENAI_API_KEY", "DEEPRESEARCH_MODEL")}
        env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{server.port}/v1"
        done = await asyncio.to_thread(doctor, env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for check in CHECKS:
        assert any(line.split(maxsplit=1)[1].startswith(check) for line in out.splitlines() if " " in line), check
    status = rows(out)
    assert status["Temporal"] == status["model endpoint"] == "ok"
    assert status["model smollm2-135m"] == "ok"
    assert status["tool calling"] == status["JSON output"] == "ok"
    assert "8,192 tokens, from the server (/props n_ctx)" in out
    assert "Traceback" not in out + done.stderr


async def test_doctor_names_a_model_the_server_does_not_serve(worker_env):
    with LocalModelServer("ollama", model="llama3.2:1b", handler=cooperative) as server:
        env = {k: v for k, v in worker_env.items() if k != "OPENAI_API_KEY"}
        env |= {"OPENAI_BASE_URL": f"http://127.0.0.1:{server.port}/v1", "DEEPRESEARCH_MODEL": "gpt-4.1-mini"}
        done = await asyncio.to_thread(doctor, env)
    assert done.returncode == 1
    line = next(line for line in done.stdout.splitlines() if line.startswith("FAIL"))
    assert "gpt-4.1-mini" in line and "llama3.2:1b" in line and "DEEPRESEARCH_MODEL" in line


async def test_doctor_warns_when_the_model_ignores_tools(worker_env, llm):
    llm.handler = lambda request: "I would rather talk."
    done = await asyncio.to_thread(doctor, worker_env)
    assert done.returncode == 0  # the prose paths cope; it is not a needed check
    line = next(line for line in done.stdout.splitlines() if "tool calling" in line)
    assert line.startswith("warn") and "DEEPRESEARCH_TOOL_CALLING=json" in line


async def test_doctor_fails_in_a_few_lines_naming_a_dead_endpoint(worker_env):
    dead = "http://127.0.0.1:9/v1"
    done = await asyncio.to_thread(doctor, worker_env | {"OPENAI_BASE_URL": dead})
    assert done.returncode == 1
    lines = (done.stdout + done.stderr).splitlines()
    assert len(lines) <= 40
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 1 and dead in failed[0] and "OPENAI_BASE_URL" in failed[0]
    assert lines[-1] == "1 needed check(s) failed: model endpoint"
    assert "Traceback" not in done.stdout + done.stderr


async def test_doctor_without_a_key_or_local_server_says_what_to_set(worker_env):
    env = {k: v for k, v in worker_env.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["DEEPRESEARCH_LOCAL_MODEL_URLS"] = "http://127.0.0.1:9"
    done = await asyncio.to_thread(doctor, env)
    assert done.returncode == 1
    failed = next(line for line in done.stdout.splitlines() if line.startswith("FAIL"))
    assert "OPENAI_API_KEY is not set and no local model server answers (127.0.0.1:9)" in failed


async def test_doctor_fails_when_the_named_temporal_server_is_down(worker_env):
    done = await asyncio.to_thread(doctor, worker_env | {"TEMPORAL_ADDRESS": "127.0.0.1:9"})
    assert done.returncode == 1
    failed = next(line for line in done.stdout.splitlines() if line.startswith("FAIL"))
    assert "127.0.0.1:9" in failed and "TEMPORAL_ADDRESS" in failed


@pytest.mark.parametrize(
    ("engine", "variable"), [("tavily", "TAVILY_BASE_URL"), ("searxng", "SEARXNG_URL"), ("brave", "BRAVE_BASE_URL")]
)
async def test_doctor_names_a_search_engine_that_does_not_answer(worker_env, llm, engine, variable):
    """A search engine that cannot be reached fails here, not at a run's first search."""
    llm.handler = cooperative
    dead = "http://127.0.0.1:9"
    env = worker_env | {"DEEPRESEARCH_SEARCH_ENGINE": engine, "BRAVE_API_KEY": "brave-key", variable: dead}
    done = await asyncio.to_thread(doctor, env)
    assert done.returncode == 1, done.stdout + done.stderr
    (failed,) = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert "search engine" in failed and dead in failed and variable in failed
    assert done.stdout.splitlines()[-1] == "1 needed check(s) failed: search engine"


async def test_doctor_checks_the_search_engine_answers(worker_env, llm, tavily):
    llm.handler = cooperative
    done = await asyncio.to_thread(doctor, worker_env)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if "search engine" in line)
    assert line.startswith("ok") and f"{tavily.base_url} answers" in line


async def test_doctor_warns_when_the_keyless_default_engine_cannot_be_reached(worker_env, llm):
    """Nothing configured for search: the keyless engine needs the internet.
    Doctor says so (with what to set) but a run can still be tried, so it is
    a warning; on a machine that reaches DuckDuckGo the row is ok."""
    llm.handler = cooperative
    env = {k: v for k, v in worker_env.items() if not k.startswith(("TAVILY_", "DEEPRESEARCH_SEARCH_ENGINE"))}
    done = await asyncio.to_thread(doctor, env)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if "search engine" in line)
    assert line.startswith(("ok", "warn")), line  # never a needed failure
    if line.startswith("warn"):  # as here, with no internet
        assert "https://duckduckgo.com cannot be reached" in line and "set TAVILY_API_KEY" in line, line


def test_doctor_knows_each_search_engines_default_address():
    from activities.search import base
    from activities.search.tavily import TavilyEngine
    from client.commands.doctor import SEARCH_DEFAULTS

    assert SEARCH_DEFAULTS["brave"] == base.BRAVE_BASE_URL and SEARCH_DEFAULTS["arxiv"] == base.ARXIV_BASE_URL
    assert str(TavilyEngine(api_key="k").http.base_url).rstrip("/") == SEARCH_DEFAULTS["tavily"]


async def test_doctor_on_a_local_server_it_found_says_so(worker_env):
    with LocalModelServer("vllm", model="qwen2.5-1.5b", n_ctx=16384, handler=cooperative) as server:
        env = {
            k: v for k, v in worker_env.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DEEPRESEARCH_MODEL")
        }
        url = f"http://127.0.0.1:{server.port}"
        env["DEEPRESEARCH_LOCAL_MODEL_URLS"] = url
        done = await asyncio.to_thread(doctor, env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"no OPENAI_API_KEY: using the vLLM server at {url}/v1")
    endpoint = next(line for line in lines if "model endpoint" in line)
    assert "a local server found without OPENAI_API_KEY" in endpoint and "OPENAI_BASE_URL" not in endpoint
    assert "16,384 tokens, from the server (/v1/models max_model_len)" in done.stdout


async def test_doctor_on_llama_cpp_python_warns_of_a_guessed_window_and_unstreamed_tool_calls(worker_env):
    """Issue 31: the documented llama-cpp-python setup passed doctor while
    every run failed: its window was a guess called "ok", and doctor's tool
    call was not sent as runs send it (streamed), which that server answers
    with an empty stream. Doctor now asks as runs ask, and says both."""
    with LocalModelServer("llama-cpp-python", model="smollm2-135m", handler=cooperative) as server:
        server.empty_failed_streams = True
        env = {k: v for k, v in worker_env.items() if k not in ("OPENAI_API_KEY", "DEEPRESEARCH_MODEL")}
        env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{server.port}/v1"
        done = await asyncio.to_thread(doctor, env)
        asked = [(bool(r.get("stream")), bool(r.get("tools"))) for r in server.requests]
    assert done.returncode == 0, done.stdout + done.stderr
    status = rows(done.stdout)
    assert status["context window"] == "warn" and status["tool calling"] == "warn"
    window = next(line for line in done.stdout.splitlines() if "context window" in line)
    assert "32,000 tokens, a guess" in window and "DEEPRESEARCH_CONTEXT_WINDOW" in window and "--n_ctx" in window
    tools = next(line for line in done.stdout.splitlines() if "tool calling" in line)
    assert "empty stream for a streamed tool call" in tools and "describe the tools in the prompt" in tools
    assert (True, True) in asked  # the tool call streamed, as runs send it


async def test_doctor_says_a_speech_endpoint_that_refuses_to_speak_is_not_ok(worker_env, llm):
    """Issue 27: doctor said "ok speech endpoint" because the port was open;
    the model server at OPENAI_BASE_URL has no /audio/speech."""
    llm.handler = cooperative
    done = await asyncio.to_thread(doctor, worker_env)
    line = next(line for line in done.stdout.splitlines() if "speech endpoint" in line)
    assert line.startswith("warn") and "refused to speak (HTTP 404" in line and "DEEPRESEARCH_TTS_BASE_URL" in line
    with ScriptedSpeech() as speech:
        done = await asyncio.to_thread(doctor, worker_env | {"DEEPRESEARCH_TTS_BASE_URL": speech.base_url})
        spoken = [r["input"] for r in speech.requests]
    line = next(line for line in done.stdout.splitlines() if "speech endpoint" in line)
    assert line.startswith("ok") and "spoke a word (mp3)" in line and spoken == ["ok"]


@contextlib.contextmanager
def silent_server():
    """A port that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(5)
        for connection in held:
            connection.close()
        listener.close()


async def test_doctor_tells_a_server_that_does_not_answer_from_one_that_cannot_be_reached(worker_env):
    """Issue 27: a server that accepted the connection and never answered was
    called "cannot be reached (ReadTimeout)"."""
    with silent_server() as url:
        done = await asyncio.to_thread(doctor, worker_env | {"OPENAI_BASE_URL": url})
    assert done.returncode == 1
    failed = next(line for line in done.stdout.splitlines() if line.startswith("FAIL"))
    assert f"{url} (OPENAI_BASE_URL) accepted the connection but did not answer in 10 s" in failed
    assert "cannot be reached" not in failed and "ReadTimeout" not in failed


async def test_doctor_looks_for_temporal_where_run_would(worker_env, dev_server, llm):
    """Issue 31: with DEEPRESEARCH_DEV_SERVER_PORT, `run` starts or finds its
    server on that port, and doctor checked localhost:7233."""
    llm.handler = cooperative
    port = dev_server.address.rsplit(":", 1)[1]
    env = {k: v for k, v in worker_env.items() if k != "TEMPORAL_ADDRESS"} | {"DEEPRESEARCH_DEV_SERVER_PORT": port}
    done = await asyncio.to_thread(doctor, env)
    line = next(line for line in done.stdout.splitlines() if " Temporal " in f" {line} ")
    assert line.startswith("ok") and f"localhost:{port} answers" in line, line
