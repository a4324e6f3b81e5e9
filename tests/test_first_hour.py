"""What a newcomer meets in the first hour, end to end with the real CLI
(issue "A first hour without surprises"; the numbers are its items)."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from client.display import render_plan, render_status
from client.terminal_log import OneLine
from testkit.runs import start
from testkit.worker_process import WorkerProcess
from workflows.models import Plan, RunStatus, Step, Usage

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent
QUESTION = "Tell me about Lantern Rock"


def cli(env, *args, timeout=120):
    return subprocess.run([str(BIN / "deepresearch"), *args], env=env, capture_output=True, text=True, timeout=timeout)


def test_1_hints_name_the_command_the_user_ran(worker_env):
    env = {k: v for k, v in worker_env.items() if k != "DEEPRESEARCH_CLI"} | {"TEMPORAL_ADDRESS": "127.0.0.1:1"}
    assert "`deepresearch server`" in cli(env, "status", "x").stderr
    through_dr = subprocess.run([str(ROOT / "dr"), "status", "x"], env=env, capture_output=True, text=True, timeout=120)
    assert f"`{ROOT / 'dr'} server`" in through_dr.stderr or "`./dr server`" in through_dr.stderr
    bundled = subprocess.run([str(ROOT / "dr"), "temporal", "--version"], capture_output=True, text=True, timeout=60)
    assert bundled.returncode == 0 and bundled.stdout.startswith("temporal version")


def test_2_an_unreachable_model_url_fails_at_start_in_one_line(worker_env):
    env = worker_env | {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    started = time.monotonic()
    out = cli(env, "run", QUESTION, "--worker", timeout=60)
    assert out.returncode == 1 and time.monotonic() - started < 30
    assert out.stderr.strip().splitlines() == [
        "error: the model endpoint OPENAI_BASE_URL=http://127.0.0.1:9/v1 cannot be reached (nothing listens there): "
        "start the server, or set OPENAI_BASE_URL to a running OpenAI-compatible endpoint"
    ]


def test_2_a_failing_call_is_one_line_on_the_terminal():
    import logging

    from temporalio.exceptions import ApplicationError

    try:
        raise ApplicationError("the model provider is unreachable at http://127.0.0.1:9/v1: APIConnectionError")
    except ApplicationError:
        record = logging.LogRecord(
            "temporalio.activity", logging.WARNING, "", 0, "Completing activity as failed", (), sys.exc_info()
        )
    record.temporal_activity = {"activity_type": "chat", "attempt": 3}
    assert OneLine().format(record) == (
        "chat failed (attempt 3 of 12): the model provider is unreachable at http://127.0.0.1:9/v1: "
        "APIConnectionError; Temporal retries it"
    )


def test_3_run_says_which_server_and_that_no_worker_polls(worker_env, dev_server):
    out = cli(worker_env | {"DEEPRESEARCH_TASK_QUEUE": "nobody-polls-this"}, "start", QUESTION)
    assert out.returncode == 0
    proc = subprocess.Popen(
        [str(BIN / "deepresearch"), "run", QUESTION, "--no-worker", "--task-queue", "nobody-polls-this"],
        env=worker_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(6)
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    assert f"using the Temporal server at {dev_server.address} (not started by this command)" in out
    assert "no worker polls task queue 'nobody-polls-this'" in out
    assert "WARN" not in out + err and "temporalio_client" not in out + err  # no SDK noise


def test_6_cut_steps_are_named_in_the_plan_view():
    from rich.console import Console

    console = Console(record=True, width=200)
    plan = Plan(title="T", steps=[Step(title="a"), Step(title="b")])
    console.print(render_plan(plan, ["c: costs", "d: outlook"], max_steps=2))
    shown = console.export_text()
    assert "Cut by the limit of 2: c: costs; d: outlook" in shown and "--max-step-num" in shown


def test_7_the_live_view_shows_elapsed_time():
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(render_status(RunStatus(phase="researching", question="q", usage=Usage()), "run-1", elapsed=83))
    assert "researching  1:23" in console.export_text()


def test_9_status_and_list_without_a_server_say_why_in_whole_words(worker_env):
    env = worker_env | {"TEMPORAL_ADDRESS": "127.0.0.1:1"}
    for args in (["status", "x"], ["list"]):
        line = cli(env, *args).stderr.strip()
        assert line.startswith("error: cannot reach Temporal at 127.0.0.1:1") and "connection refused;" in line


async def test_9_list_shows_the_question_and_blob_prints_a_stored_page(
    worker_env, worker, temporal_client, task_queue, script
):
    handle = await start(temporal_client, task_queue, "How bright is the Lantern Rock light?", auto_accept_plan=True)
    await handle.result()
    listing = await asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "list")
    assert "How bright is the Lantern Rock light?" in listing.stdout
    stored = Path(worker_env["DEEPRESEARCH_DATA_DIR"]) / "blobs"
    pages = [p for p in stored.rglob("*") if p.is_file() and p.read_bytes().startswith(b"Lantern Rock history By")]
    out = await asyncio.to_thread(cli, worker_env, "blob", f"sha256:{pages[0].name}")
    assert out.returncode == 0 and "4417 ships" in out.stdout  # the crawled page, as the researcher read it
    bad = await asyncio.to_thread(cli, worker_env, "blob", "nope")
    assert bad.returncode == 1 and "not a blob reference" in bad.stderr


def read_until(fd: int, pattern: str, timeout: float = 90) -> str:
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if re.search(pattern, seen.decode("utf-8", "replace")):
                return seen.decode("utf-8", "replace")
    raise AssertionError(f"no {pattern!r} in:\n{seen.decode('utf-8', 'replace')[-3000:]}")


async def test_5_and_10_an_edit_typed_at_the_terminal_stays_and_attach_reviews_a_run_started_elsewhere(
    worker_env, temporal_client, tmp_path, script
):
    """In a pseudo-terminal, as a user sees it: `attach` to a run started with
    `start`, type an edit at the review prompt, and it stays on screen with
    what happens next; then accept the revised plan."""
    with WorkerProcess(worker_env, tmp_path / "worker.log") as process:
        await process.ready(temporal_client)
        run_id = cli(worker_env, "start", QUESTION).stdout.strip()
        pid, fd = pty.fork()
        if pid == 0:  # the child: the CLI on a terminal
            os.execve(
                str(BIN / "deepresearch"),
                [str(BIN / "deepresearch"), "attach", run_id],
                worker_env | {"TERM": "xterm", "COLUMNS": "120"},
            )
        try:
            read_until(fd, r"Accept the plan\?")
            os.write(fd, b"add a step on shipwrecks\r")
            shown = read_until(fd, r"revising the plan with your edit \(add a step on shipwrecks\)")
            assert "add a step on shipwrecks" in shown
            read_until(fd, r"Edited: add a step on shipwrecks[\s\S]*Accept the plan\?")
            os.write(fd, b"\r")
            read_until(fd, r"report saved to", timeout=120)
        finally:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
