"""What a newcomer meets in the first hour, end to end with the real CLI
(issue "A first hour without surprises"; the numbers are its items)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pty
import re
import select
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from client.cli import build_parser
from client.display import render_plan, render_status
from infra.log_lines import OneLine
from testkit.runs import start, wait_for_phase
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
        "start the server, or set OPENAI_BASE_URL to a running OpenAI-compatible endpoint "
        "(`deepresearch doctor` checks the whole setup)"
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


async def test_2_an_activitys_warning_reads_as_words_not_a_python_dict():
    """Issue 27, item 7: the run's terminal showed "the model's reply looped
    again … ({'activity_id': '9', …})": the SDK's activity logger appends its
    context as a dict. The real logger, in a real activity context."""
    import dataclasses
    import logging

    from temporalio import activity
    from temporalio.testing import ActivityEnvironment

    from infra.log_lines import WorkerLines

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    @activity.defn(name="chat")
    async def chat() -> None:
        activity.logger.warning("the model's reply looped again: kept what it wrote before the loop")

    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, activity_type="chat", workflow_id="research-1a2b")
    keep = Keep()
    logging.getLogger("temporalio.activity").addHandler(keep)
    try:
        await environment.run(chat)
    finally:
        logging.getLogger("temporalio.activity").removeHandler(keep)
    (record,) = records
    assert "{'activity_id'" in record.getMessage()  # what the SDK writes
    line = "chat, run research-1a2b: the model's reply looped again: kept what it wrote before the loop"
    assert OneLine().format(record) == line  # `run`'s terminal
    assert WorkerLines().format(record).endswith(f"temporalio.activity: {line}")  # a worker's log


@pytest.mark.parametrize("kind", ["ModelRepetition", "ModelTimeout", "ModelWindowMismatch"])
def test_a_retry_line_names_the_bound_the_call_really_has(kind):
    """Issue 31: a reply that loops or a model that times out is tried 3
    times, not the retry policy's 12; the line said "attempt 2 of 12"."""
    import logging

    from temporalio.exceptions import ApplicationError

    try:
        raise ApplicationError("the model's reply degenerated into repetition", type=kind)
    except ApplicationError:
        record = logging.LogRecord(
            "temporalio.activity", logging.WARNING, "", 0, "Completing activity as failed", (), sys.exc_info()
        )
    record.temporal_activity = {"activity_type": "chat", "attempt": 2}
    assert OneLine().format(record).startswith("chat failed (attempt 2 of 3): the model's reply degenerated")


@contextlib.contextmanager
def hanging_up_endpoint() -> Iterator[str]:
    """A model URL where something accepts connections and hangs up at once:
    the check at start (a connect) passes, every model call fails as
    unreachable."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def hang_up() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                connection, _ = listener.accept()
                connection.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


async def test_2_failed_calls_are_one_line_each_and_their_tracebacks_go_to_the_log(worker_env, temporal_client):
    with hanging_up_endpoint() as url:
        err_file = Path(worker_env["DEEPRESEARCH_DATA_DIR"]).parent / "run.err"
        with open(err_file, "w") as err:
            proc = subprocess.Popen(
                [str(BIN / "deepresearch"), "run", QUESTION, "--worker", "--id", "unreachable-model"],
                env=worker_env | {"OPENAI_BASE_URL": url},
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
            try:
                deadline = time.monotonic() + 60
                while err_file.read_text().count("chat failed (attempt") < 2 and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
            finally:
                proc.terminate()
                out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
                await temporal_client.get_workflow_handle("unreachable-model").terminate()
    terminal = out + err_file.read_text()
    failures = [line for line in terminal.splitlines() if "chat failed (attempt" in line]
    assert len(failures) >= 2, terminal
    assert failures[0].startswith("chat failed (attempt 1 of 12): the model provider is unreachable at ")
    assert failures[0].endswith("; Temporal retries it")
    assert "Traceback" not in terminal and 'File "' not in terminal
    log = (Path(worker_env["DEEPRESEARCH_DATA_DIR"]) / "logs" / "deepresearch.log").read_text()
    assert "Traceback (most recent call last)" in log and "the model provider is unreachable" in log


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


async def test_9_watch_says_when_the_review_arrives(worker_env, worker, temporal_client, task_queue, script):
    handle = await start(temporal_client, task_queue, QUESTION)
    watch = subprocess.Popen(
        [str(BIN / "deepresearch"), "watch", handle.id], env=worker_env, stdout=subprocess.PIPE, text=True
    )
    try:
        await wait_for_phase(handle, "awaiting_review")
        review = await asyncio.to_thread(cli, worker_env, "review", handle.id, "--accept")
        assert review.returncode == 0, review.stderr
        out, _ = await asyncio.to_thread(watch.communicate, timeout=120)
    finally:
        if watch.poll() is None:
            watch.kill()
    lines = out.splitlines()
    received = [n for n, line in enumerate(lines) if line.startswith("review received: plan accepted by ")]
    assert received, lines  # and who accepted it (the CLI's user)
    assert lines.index("the plan is waiting for review") < received[0]
    assert watch.returncode == 0


async def test_9_list_shows_the_question_and_blob_prints_a_stored_page(
    worker_env, worker, temporal_client, task_queue, script
):
    handle = await start(temporal_client, task_queue, "How bright is the Lantern Rock light?", auto_accept_plan=True)
    await handle.result()
    listing = await asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "list", "--limit", "1000")
    assert "How bright is the Lantern Rock light?" in listing.stdout
    stored = Path(worker_env["DEEPRESEARCH_DATA_DIR"]) / "blobs"
    pages = [p for p in stored.rglob("*") if p.is_file() and p.read_bytes().startswith(b"Lantern Rock history By")]
    out = await asyncio.to_thread(cli, worker_env, "blob", f"sha256:{pages[0].name}")
    assert out.returncode == 0 and "4417 ships" in out.stdout  # the crawled page, as the researcher read it
    bad = await asyncio.to_thread(cli, worker_env, "blob", "nope")
    assert bad.returncode == 1 and "not a blob reference" in bad.stderr


@contextlib.contextmanager
def on_terminal(env: dict, *args: str) -> Iterator[int]:
    """`deepresearch ARGS` on a pseudo-terminal, as a user runs it; yields the
    terminal's fd, and kills the CLI when done."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on a terminal
        argv = [str(BIN / "deepresearch"), *args]
        os.execve(argv[0], argv, env | {"TERM": "xterm", "COLUMNS": "120"})
    try:
        yield fd
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


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
        with on_terminal(worker_env, "attach", run_id) as fd:
            read_until(fd, r"Accept the plan\?")
            os.write(fd, b"add a step on shipwrecks\r")
            shown = read_until(fd, r"revising the plan with your edit \(add a step on shipwrecks\)")
            assert "add a step on shipwrecks" in shown
            read_until(fd, r"Edited: add a step on shipwrecks[\s\S]*Accept the plan\?")
            os.write(fd, b"\r")
            read_until(fd, r"report saved to", timeout=120)


async def test_10_run_attach_reviews_a_run_started_with_start_and_the_html_report_is_dated(
    worker_env, temporal_client, tmp_path, script
):
    """`run --attach ID` in a pseudo-terminal: the review prompt of a run
    started with `start`; accepted, the report is saved as HTML with its date."""
    saved = tmp_path / "report.html"
    day_before = datetime.now(UTC).date().isoformat()
    with WorkerProcess(worker_env, tmp_path / "worker.log") as process:
        await process.ready(temporal_client)
        run_id = cli(worker_env, "start", QUESTION).stdout.strip()
        with on_terminal(worker_env, "run", "--attach", run_id, "-o", str(saved)) as fd:
            shown = read_until(fd, r"Accept the plan\?")
            assert f"attached to run {run_id}" in shown
            os.write(fd, b"\r")
            read_until(fd, r"report saved to", timeout=120)
    footer = saved.read_text(encoding="utf-8").split("<footer>", 1)[1]
    assert day_before in footer or datetime.now(UTC).date().isoformat() in footer  # run at midnight UTC


# --- every command the README prints -----------------------------------------

# `./dr` runs these itself (the script's `case`); everything else goes to the CLI.
DR_OWN = ("test", "bench", "temporal")


def readme_commands() -> list[list[str]]:
    """The arguments of every `./dr …` command in README.md's fenced bash
    blocks (comments dropped, continuations joined; a command after `&&`, `|`
    or `;` counts too)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"^```(?:bash|sh|shell|console)\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line.removeprefix("$ "), posix=True, punctuation_chars=True)
            lexer.whitespace_split, lexer.commenters = True, "#"
            segment: list[str] = []
            for token in [*lexer, ";"]:
                if token in ("&&", "||", "|", ";", "&"):
                    words = [w for w in segment if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", w)]  # VAR=value
                    if words and words[0] == "./dr":
                        commands.append(words[1:])
                    segment = []
                else:
                    segment.append(token)
    return commands


def test_the_readme_has_dr_commands():
    assert ["run", "How do solid-state batteries compare with lithium-ion cells in 2025?"] in readme_commands()


@pytest.mark.parametrize("words", readme_commands(), ids=" ".join)
def test_every_readme_command_parses(words):
    # Placeholders such as research-1a2b3c4d are plain values to the parser, so
    # no line is skipped; a line that fails here is one a reader cannot run.
    if words and words[0] in DR_OWN:
        assert f"  {words[0]})" in (ROOT / "dr").read_text()
        return
    try:
        args = build_parser().parse_args(words)
    except SystemExit as exit:
        assert exit.code == 0, f"`./dr {shlex.join(words)}` does not parse"  # --help exits 0
        return
    assert isinstance(args, argparse.Namespace) and args.handler
