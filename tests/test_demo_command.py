"""`deepresearch demo`: the whole flow with no key and no network, as a user
runs it (a subprocess with a scrubbed environment), on the test's Temporal dev
server. Keys and endpoints set in the environment are neither used nor called."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from client.commands.demo import CORPUS, DEFAULT_QUESTION, replaced_environment
from client.devserver import free_port

ROOT = Path(__file__).resolve().parent.parent


def demo(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client.cli", "demo", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=240,
    )


def scrubbed_env(data_dir: Path, **extra: str) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return env | {"PYTHONPATH": str(ROOT), "DEEPRESEARCH_DATA_DIR": str(data_dir), "COLUMNS": "200"} | extra


def test_demo_runs_with_no_key_and_calls_nothing_outside(dev_server, tmp_path, llm, tavily):
    # Keys and endpoints a user may have set: the demo must not use them.
    env = scrubbed_env(
        tmp_path / "data",
        TEMPORAL_ADDRESS=dev_server.address,
        OPENAI_API_KEY="sk-real-key-must-not-be-used",
        OPENAI_BASE_URL=llm.base_url,
        TAVILY_API_KEY="tvly-real-key-must-not-be-used",
        TAVILY_BASE_URL=tavily.base_url,
        DEEPRESEARCH_MODEL_REPORTER="gpt-4o",
        HTTP_PROXY="http://127.0.0.1:9",  # a proxy that is not there: loopback must not go through it
        HTTPS_PROXY="http://127.0.0.1:9",
    )
    done = demo(env, "--auto-accept", "Who designed the Greyhorn Light in Brackwater, and when was it first lit?")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert out.index("DEMO: the model is scripted") < out.index("Caspar Lund")  # says so first
    assert "1871" in out
    assert re.search(r"\(http://127\.0\.0\.1:\d+/(towns/brackwater|tourism/greyhorn-light-history)\.md\)", out)
    assert "written by the scripted demo model" in out.split("report saved to")[-1]  # and at the end
    assert "Traceback" not in done.stderr
    assert llm.requests == [] and tavily.requests == []  # nothing went to the configured services
    reports = list((tmp_path / "data" / "reports").glob("*.md"))
    assert len(reports) == 1 and "Caspar Lund" in reports[0].read_text(encoding="utf-8")


def peers(trace: str) -> list[str]:
    """The addresses of every IPv4/IPv6 connect() in an ``strace -e trace=connect`` log."""
    lines = [line for line in trace.splitlines() if "connect(" in line and "sa_family=AF_INET" in line]
    return [m.group(1) for line in lines if (m := re.search(r'"([0-9A-Fa-f:.]+)"', line))]


def loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_loopback or bool(getattr(ip, "ipv4_mapped", None) and ip.ipv4_mapped.is_loopback)


def test_demo_on_its_embedded_server_connects_to_nothing_but_loopback(tmp_path):
    """As a newcomer runs it: no Temporal server yet, so the demo starts the
    embedded one; every connect() of the whole process tree (the CLI, its
    worker, the dev server, the sandbox) goes to loopback. The dev server
    once looked up version-info.temporal.io (Temporal's version check)."""
    strace = shutil.which("strace")
    assert strace, "this test needs strace (apt-get install strace; .ci/run installs it)"
    server_port = free_port()
    env = scrubbed_env(
        tmp_path / "data", DEEPRESEARCH_DEV_SERVER_PORT=str(server_port), DEEPRESEARCH_DEV_UI_PORT=str(free_port())
    )
    trace = tmp_path / "connect.log"
    question = "Where does the Carrick Bank Wind Farm's export cable come ashore?"
    done = subprocess.run(
        [strace, "-f", "-qq", "-e", "trace=connect", "-e", "signal=none", "-o", str(trace)]
        + [sys.executable, "-m", "client.cli", "demo", "--auto-accept", question],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "started the embedded Temporal dev server" in done.stdout and "Saltcombe" in done.stdout
    addresses = peers(trace.read_text())
    assert "127.0.0.1" in addresses  # the trace saw the process tree's connections
    assert [a for a in addresses if not loopback(a)] == []


def test_demo_default_question_computes_with_the_coder(dev_server, tmp_path):
    env = scrubbed_env(tmp_path / "data", TEMPORAL_ADDRESS=dev_server.address)
    done = demo(env, "--auto-accept")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert DEFAULT_QUESTION in done.stdout
    assert "41.3%" in done.stdout  # the growth rate, computed in the sandbox from the annual report's table
    assert "run_python" in done.stdout and "completed" in done.stdout


def test_demo_reviews_the_plan_at_the_terminal_in_chinese_too(dev_server, tmp_path):
    env = scrubbed_env(tmp_path / "data", TEMPORAL_ADDRESS=dev_server.address)
    done = demo(env, "澄波海洋仪器有限公司成立于哪一年？总部位于哪座城市？", stdin="y\n")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "Accept the plan?" in out  # the same review as `run`
    assert out.index("Accept the plan?") < out.index("2009年")
    assert "临澜" in out and "/zh/chengbo-marine-instruments.md)" in out


def test_an_ended_runs_status_counts_its_sources_from_its_result():
    """Issue 36, item 9: `status` of an ended run no worker answers for is
    read from its result, and said "sources: 0" for a run citing five."""
    from client.commands.status import sources_of
    from workflows.models import Citation, PageRead, ResearchResult

    result = ResearchResult(status="completed", question="q", locale="en-US", final_report="r", sources=7)
    assert sources_of(result) == 7  # what the run's status counted
    older = result.model_copy(update={"sources": None, "pages": [PageRead(url="https://a.example/1")],
                                      "citations": [Citation(url="https://a.example/1"),
                                                    Citation(url="https://b.example/2")]})  # fmt: skip
    assert sources_of(older) == 2  # a result from before the count was kept: what it read and cites


def test_the_demo_environment_is_restored(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-mine")
    monkeypatch.setenv("DEEPRESEARCH_MODEL_PLANNER", "gpt-4o")
    monkeypatch.setenv("DEEPRESEARCH_SEARCH_INCLUDE_DOMAINS", "example.com")
    with replaced_environment({"OPENAI_API_KEY": "demo"}):
        assert os.environ["OPENAI_API_KEY"] == "demo"
        assert "DEEPRESEARCH_MODEL_PLANNER" not in os.environ
        assert "DEEPRESEARCH_SEARCH_INCLUDE_DOMAINS" not in os.environ
    assert os.environ["OPENAI_API_KEY"] == "sk-mine" and os.environ["DEEPRESEARCH_MODEL_PLANNER"] == "gpt-4o"


# -- issue 27, item 8: the keyless first hour goes on after the demo ---------------------


def cli(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


async def test_after_the_demo_its_runs_stay_readable_and_a_demo_worker_answers_follow_ups(tmp_path):
    """As a newcomer goes on from the README with no key: the demo stopped
    its embedded server, and `list`, `status` and `result` said "cannot reach
    Temporal"; `ask` sent them to `worker --task-queue deep-research-demo`,
    which wanted OPENAI_API_KEY. Now they read the stored runs, and
    `worker --demo` serves follow-up questions and a schedule, keyless."""
    import asyncio
    import signal

    from temporalio.client import Client

    port = free_port()
    env = scrubbed_env(
        tmp_path / "data", DEEPRESEARCH_DEV_SERVER_PORT=str(port), DEEPRESEARCH_DEV_UI_PORT=str(free_port())
    )
    question = "How many people live in the capital of Vellmark and how has that changed since 2010?"
    done = demo(env, "--auto-accept", question)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_id = re.search(r"run (research-[0-9a-f]+) started", done.stdout).group(1)
    report = done.stdout.split("## Key Points", 1)[1].split("report saved to", 1)[0]
    assert "23,480" in report and "The sources do not state this directly" not in report  # item 9: from its page
    assert "`./dr worker --demo`" in done.stdout or "worker --demo" in done.stdout  # the next steps, keyless

    listed = cli(env, "list")
    assert listed.returncode == 0, listed.stderr
    assert run_id in listed.stdout and "reading the runs stored in" in listed.stderr
    shown = cli(env, "status", run_id)
    assert shown.returncode == 0 and "completed" in shown.stdout, shown.stderr
    result = cli(env, "result", run_id)
    assert result.returncode == 0 and "23,480" in result.stdout, result.stderr
    # issue 36, item 9: an ended run's status, read from its result, said "sources: 0"
    cited = set(re.findall(r"\]\((http[^)\s]+)\)", result.stdout))
    sources = int(re.search(r"sources: (\d+)", shown.stdout).group(1))
    assert cited and sources >= len(cited), (sources, cited)

    log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "client.cli", "worker", "--demo"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    at = env | {"TEMPORAL_ADDRESS": f"127.0.0.1:{port}"}
    name = "demo-watch"
    try:
        deadline = time.monotonic() + 120
        while "demo worker for task queue 'deep-research-demo'" not in (tmp_path / "worker.log").read_text():
            assert worker.poll() is None and time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
            await asyncio.sleep(0.2)
        assert "DEMO worker: the model is scripted" in (tmp_path / "worker.log").read_text()
        # a question the run's pages do not answer: the thread researches more
        asked = await asyncio.to_thread(cli, at, "ask", run_id, "Who designed the Greyhorn Light in Brackwater?")
        assert asked.returncode == 0, asked.stdout + asked.stderr
        assert "Caspar Lund" in asked.stdout and "OPENAI_API_KEY" not in asked.stdout + asked.stderr

        created = await asyncio.to_thread(cli, at, "schedule", "create", name, "Who designed the Greyhorn Light?",
                                          "--every", "1d", "--demo")  # fmt: skip
        assert created.returncode == 0 and "worker --demo" in created.stdout, created.stderr
        assert (await asyncio.to_thread(cli, at, "schedule", "trigger", name)).returncode == 0
        client = await Client.connect(at["TEMPORAL_ADDRESS"])
        scheduled = []
        while not scheduled:
            assert time.monotonic() < deadline + 120, "the schedule started no run"
            scheduled = [w async for w in client.list_workflows(f'TemporalScheduledById="{name}"')]
            await asyncio.sleep(0.5)
        outcome = await asyncio.wait_for(client.get_workflow_handle(scheduled[0].id).result(), 120)
        assert outcome["status"] == "completed" and "Caspar Lund" in outcome["final_report"]
    finally:
        await asyncio.to_thread(cli, at, "schedule", "delete", name)
        worker.send_signal(signal.SIGINT)
        worker.wait(60)
        log.close()


def test_eval_demo_scores_the_scripted_model_on_questions_of_its_own_without_a_key(dev_server, tmp_path):
    """`eval` had no keyless mode (item 8), and the demo model answered only
    questions worded like the built-in suite's (item 9): these five, asked in
    other words, each lost a fact its pages hold (0.77 recall on a set of 15)."""
    import json

    tasks = [
        ("capital", "How many people live in the capital of Vellmark and how has that changed since 2010?", "23,480"),
        ("opponent", "Who did Tobias Wren defeat in the Brackwater mayoral election?", "Hilde Marsh"),
        ("turnout", "What was the turnout in the 2021 Brackwater mayoral election?", "61 per cent"),
        ("staff", "How many employees does Skelly Aeronautics have?", "64"),
        ("brackwater", "What is the population of Brackwater?", "8,312"),
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": i, "question": q, "facts": [{"id": "f", "any": [fact]}]}) + "\n" for i, q, fact in tasks
        )
    )
    out = tmp_path / "scores.json"
    env = scrubbed_env(tmp_path / "data", TEMPORAL_ADDRESS=dev_server.address)
    done = cli(env, "eval", "--demo", "--tasks", str(path), "--corpus", str(CORPUS), "--json", str(out),
               "--concurrency", "3", "--id", f"demo-eval-{time.time_ns() % 10**8}", timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.startswith("DEMO: the model is scripted")
    scores = json.loads(out.read_text())
    assert set(scores["models"].values()) == {"demo-scripted"}
    assert {t["id"]: t["fact_recall"] for t in scores["tasks"]} == {i: 1.0 for i, _, _ in tasks}
    refused = cli(env, "eval", "--demo", "--judge-model", "gpt-4o")
    assert refused.returncode == 1 and "the demo's scripted model cannot judge" in refused.stderr
