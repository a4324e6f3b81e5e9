"""Local model servers as a first-class path (issue 23): with no
OPENAI_API_KEY, a local OpenAI-compatible server on a well-known port is
found, its model and context window are read from it, and `run` says which.
Scripted local servers (testkit/local_model_server.py) over real HTTP."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from infra import local_models
from infra.local_models import local_settings, resolve
from testkit.local_model_server import LocalModelServer

BIN = Path(sys.executable).parent


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def local_env(*urls: str, **extra: str) -> dict[str, str]:
    return {"DEEPRESEARCH_LOCAL_MODEL_URLS": ",".join(urls), **extra}


@pytest.mark.parametrize(
    ("kind", "name", "window", "told_by"),
    [
        ("ollama", "Ollama", 4096, "/api/show"),
        ("llama.cpp", "llama.cpp", 8192, "/props n_ctx"),
        ("vllm", "vLLM", 16384, "/v1/models max_model_len"),
    ],
)
async def test_a_local_server_is_found_with_its_model_and_window(kind, name, window, told_by):
    with LocalModelServer(kind, model="smollm2:135m", n_ctx=window) as server:
        url = f"http://127.0.0.1:{server.port}"
        settings, line = await local_settings(local_env(dead_url(), url))
    assert settings.openai_base_url == f"{url}/v1" and settings.openai_api_key is None
    assert settings.model_for("planner") == "smollm2:135m"
    assert settings.context_window_for("planner") == window
    assert told_by in settings.context_window_source
    assert line == (
        f"no OPENAI_API_KEY: using the {name} server at {url}/v1 "
        f"(model smollm2:135m, context window {window} from the server ({told_by}))"
    )
    settings.check()  # a local server needs no key


async def test_ollama_without_num_ctx_is_taken_at_its_default_window_not_the_trained_length():
    with LocalModelServer("ollama", model="llama3.2:1b") as server:
        server.num_ctx_set = False
        settings, _ = await local_settings(local_env(f"http://127.0.0.1:{server.port}"))
    assert settings.context_window_for("researcher") == 4096  # not 131072: Ollama would cut the prompt


async def test_a_server_that_tells_no_window_keeps_the_default():
    with LocalModelServer("lmstudio", model="qwen2.5-7b-instruct") as server:
        settings, line = await local_settings(local_env(f"http://127.0.0.1:{server.port}"))
    assert settings.model_for("coordinator") == "qwen2.5-7b-instruct"
    assert settings.context_window_for("coordinator") == 32_000  # by name (qwen)
    assert "built-in table" in settings.context_window_source
    assert line and "a local server at" in line
    assert "it does not tell its context window: 32,000 tokens assumed" in line  # a guess, said as one


async def test_the_environment_wins_over_what_the_server_says():
    with LocalModelServer("llama.cpp", model="smollm2", n_ctx=8192) as server:
        env = local_env(
            f"http://127.0.0.1:{server.port}", DEEPRESEARCH_MODEL="mine", DEEPRESEARCH_CONTEXT_WINDOW="2048"
        )
        settings, _ = await local_settings(env)
    assert settings.model_for("reporter") == "mine"
    assert settings.context_window_for("reporter") == 2048
    assert settings.context_window_source == "DEEPRESEARCH_CONTEXT_WINDOW"


async def test_a_key_means_no_probing_and_a_given_base_url_is_read_for_model_and_window():
    with LocalModelServer("vllm", model="Qwen/Qwen2.5-1.5B", n_ctx=32768) as server:
        url = f"http://127.0.0.1:{server.port}"
        keyed = await resolve(local_env(url, OPENAI_API_KEY="sk-x"))
        assert server.probes == [] and "OPENAI_BASE_URL" not in keyed.env
        given = await resolve({"OPENAI_BASE_URL": f"{url}/v1"})
    assert given.line is None  # the user named it: nothing to announce
    assert given.env["DEEPRESEARCH_MODEL"] == "Qwen/Qwen2.5-1.5B"
    assert given.env["DEEPRESEARCH_CONTEXT_WINDOW"] == "32768"


async def test_nothing_found_leaves_the_settings_as_they_were():
    resolved = await resolve(local_env(dead_url(), dead_url()))
    assert resolved.line is None and "OPENAI_BASE_URL" not in resolved.env


def test_the_well_known_ports_are_probed_by_default():
    assert [url for _, url in local_models.candidates({})] == [
        "http://127.0.0.1:11434/v1",
        "http://127.0.0.1:8080/v1",
        "http://127.0.0.1:1234/v1",
        "http://127.0.0.1:8000/v1",
    ]


def test_a_server_on_a_well_known_port_is_named_by_it():
    urls = "http://10.0.0.5:11434, http://gpu:8080/v1;http://[::1]:1234,http://127.0.0.1:8000,http://127.0.0.1:9999"
    assert local_models.candidates({"DEEPRESEARCH_LOCAL_MODEL_URLS": urls}) == (
        ("Ollama", "http://10.0.0.5:11434/v1"),
        ("llama.cpp", "http://gpu:8080/v1"),
        ("LM Studio", "http://[::1]:1234/v1"),
        ("vLLM", "http://127.0.0.1:8000/v1"),
        ("a local server", "http://127.0.0.1:9999/v1"),
    )


async def test_run_without_a_key_uses_the_local_server_and_says_which(worker_env, script):
    with LocalModelServer("llama.cpp", model="smollm2-135m", n_ctx=8192, handler=script) as server:
        url = f"http://127.0.0.1:{server.port}"
        env = {k: v for k, v in worker_env.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
        env |= local_env(dead_url(), url)
        env.pop("DEEPRESEARCH_MODEL", None)
        out = await asyncio.to_thread(
            subprocess.run,
            [str(BIN / "deepresearch"), "run", "Tell me about Lantern Rock", "--worker", "--auto-accept"],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        models = {r.get("model") for r in server.calls()}
    assert out.returncode == 0, out.stderr
    assert f"no OPENAI_API_KEY: using the llama.cpp server at {url}/v1 (model smollm2-135m" in out.stdout
    assert models == {"smollm2-135m"}
    assert "Scripted Report" in out.stdout


def test_run_without_a_key_or_a_local_server_says_what_to_do_in_one_line(worker_env):
    env = {k: v for k, v in worker_env.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env |= local_env(dead_url())
    out = subprocess.run(
        [str(BIN / "deepresearch"), "run", "Tell me about Lantern Rock", "--worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: OPENAI_API_KEY is not set and no local model server answers (127.0.0.1:")
    assert "docs/local-models.md" in line and "`deepresearch doctor` checks the whole setup" in line


async def test_worker_without_a_key_says_which_local_server_it_uses(worker_env):
    with LocalModelServer("ollama", model="qwen2.5:0.5b", n_ctx=16384) as server:
        url = f"http://127.0.0.1:{server.port}"
        unset = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DEEPRESEARCH_MODEL")
        env = {k: v for k, v in worker_env.items() if k not in unset} | local_env(url)
        proc = subprocess.Popen(
            [str(BIN / "deepresearch"), "worker"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            lines = [await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60) for _ in range(2)]
        finally:
            proc.terminate()
            await asyncio.to_thread(proc.communicate, timeout=30)
    assert lines[0].startswith("worker for task queue")
    assert lines[1].strip() == (
        f"no OPENAI_API_KEY: using the Ollama server at {url}/v1 "
        "(model qwen2.5:0.5b, context window 16384 from the server (/api/show))"
    )


async def test_llama_cpp_python_is_named_and_its_untold_window_called_a_guess():
    """Issue 31: llama-cpp-python's server answers 404 at /props (llama.cpp's
    own server's route) and tells its window nowhere: the line says so
    instead of passing the default off as the server's."""
    with LocalModelServer("llama-cpp-python", model="smollm2-135m") as server:
        url = f"http://127.0.0.1:{server.port}"
        settings, line = await local_settings(local_env(url))
    assert settings.context_window_for("planner") == 32_000
    assert not settings.context_window_source.startswith("the server")
    assert line == (
        f"no OPENAI_API_KEY: using the llama-cpp-python server at {url}/v1 (model smollm2-135m; it does not tell "
        "its context window: 32,000 tokens assumed, set DEEPRESEARCH_CONTEXT_WINDOW)"
    )


def test_the_documented_llama_cpp_python_command_is_what_the_real_model_tier_runs():
    """docs/local-models.md says only what was seen: the server flags it
    recommends are the ones tests/test_real_model.py runs SmolLM2 with."""
    from testkit.real_model import DOCUMENTED_FLAGS

    text = (Path(__file__).resolve().parent.parent / "docs" / "local-models.md").read_text()
    start = text.index("python -m llama_cpp.server --model")
    command = " ".join(text[start : text.index("```", start)].replace("\\\n", " ").split())
    assert " ".join(DOCUMENTED_FLAGS) in command, command
