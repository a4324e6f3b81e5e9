"""The product as a user drives it: the `deepresearch` CLI and a worker
process against a real Temporal dev server, the stock `temporal` CLI for the
review signal, and scripted model/search servers plus loopback pages."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from client.devserver import free_port, port_open, temporal_binary
from testkit.research_script import EXPECTED_SUM, FACT
from testkit.worker_process import WorkerProcess

BIN = Path(sys.executable).parent
QUESTION = "Tell me about the Lantern Rock lighthouse"


def cli(env, *args, stdin=None, timeout=120):
    return subprocess.run(
        [str(BIN / "deepresearch"), *args], env=env, input=stdin, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def env(worker_env, script):
    return worker_env


@pytest.fixture
def worker_process(env, tmp_path):
    log = open(tmp_path / "worker.log", "w")
    proc = subprocess.Popen([str(BIN / "deepresearch"), "worker"], env=env, stdout=log, stderr=subprocess.STDOUT)
    yield proc
    proc.terminate()
    proc.wait(15)
    log.close()


def wait_for_review(env, run_id, timeout=60, plan_version=1):
    """The status once plan ``plan_version`` waits for review (right after an
    edit, the old plan can still be what a query sees)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = cli(env, "status", run_id, "--json")
        if out.returncode == 0:
            status = json.loads(out.stdout)
            if status["review_pending"] and status["plan_version"] == plan_version:
                return status
        time.sleep(0.3)
    raise AssertionError(f"{run_id} never waited for review")


def check_report(result, pages):
    assert result["status"] == "completed"
    report = result["final_report"]
    assert FACT in report  # only in the crawled page's body: search + crawl happened
    assert f"SUM_OF_SQUARES={EXPECTED_SUM}" in report  # only by running the coder's code
    assert pages.url("/lighthouse") in [c["url"] for c in result["citations"]]
    usage = result["usage"]
    assert usage["searches"] >= 1 and usage["crawls"] == 1 and usage["code_runs"] == 1


def test_cli_run_with_bad_review_edit_and_accept(env, worker_process, pages):
    run_id = cli(env, "start", QUESTION).stdout.strip()
    assert run_id.startswith("research-")
    wait_for_review(env, run_id)

    bad = cli(env, "review", run_id, "--feedback", "looks good to me")
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "[ACCEPTED]" in bad.stderr and "Traceback" not in bad.stderr
    assert json.loads(cli(env, "status", run_id, "--json").stdout)["phase"] == "awaiting_review"

    edited = cli(env, "review", run_id, "--edit", "add the keeper's name")
    assert edited.returncode == 0, edited.stderr
    status = wait_for_review(env, run_id, plan_version=2)
    assert "Edited: add the keeper's name" in [s["title"] for s in status["steps"]]

    accepted = cli(env, "review", run_id, "--accept")
    assert accepted.returncode == 0, accepted.stderr
    out = cli(env, "result", run_id, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    check_report(result, pages)
    assert "Edited: add the keeper's name" in [s["title"] for s in result["plan"]["steps"]]


def test_stock_temporal_cli_signal_reviews_the_plan(env, worker_process, dev_server, pages):
    run_id = cli(env, "start", QUESTION).stdout.strip()
    wait_for_review(env, run_id)

    def signal(text):
        subprocess.run(
            [
                temporal_binary(),
                "workflow",
                "signal",
                "--address",
                dev_server.address,
                "--workflow-id",
                run_id,
                "--name",
                "review",
                "--input",
                json.dumps(text),
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )

    signal("not a review")  # ignored: the run keeps waiting
    time.sleep(1)
    assert json.loads(cli(env, "status", run_id, "--json").stdout)["review_pending"]
    signal("[ACCEPTED]")
    result = json.loads(cli(env, "result", run_id, "--json").stdout)
    check_report(result, pages)


def test_run_command_reviews_at_the_terminal_and_saves_the_report(env, dev_server, data_dir, pages):
    # stdin: an edit, then an empty line to accept.
    out = cli(env, "run", QUESTION, "--worker", "--id", "run-terminal", stdin="add the keeper's name\n\n", timeout=180)
    assert out.returncode == 0, out.stderr
    assert FACT in out.stdout and f"SUM_OF_SQUARES={EXPECTED_SUM}" in out.stdout
    # tool calls shown as they happen (the whole output on a failure: CI27 and CI28 saw none, once each)
    assert "  crawl: " in out.stdout and "  run_python: " in out.stdout, out.stdout
    saved = data_dir / "reports" / "run-terminal.md"
    assert FACT in saved.read_text()


def test_run_starts_the_embedded_server_when_none_is_reachable(env, data_dir):
    port, ui = free_port(), free_port()  # the machine's 7233 may be taken: the test does not need it
    local = {k: v for k, v in env.items() if k not in ("TEMPORAL_ADDRESS", "DEEPRESEARCH_TASK_QUEUE")}
    local |= {"DEEPRESEARCH_DEV_SERVER_PORT": str(port), "DEEPRESEARCH_DEV_UI_PORT": str(ui)}
    out = cli(local, "run", "Hello!", "--id", "embedded-greeting", timeout=180)
    assert out.returncode == 0, out.stderr
    assert "research assistant" in out.stdout  # the coordinator's direct answer
    assert f"started the embedded Temporal dev server at 127.0.0.1:{port}" in out.stdout
    assert "The Temporal UI stopped with the embedded server" in out.stdout and "`deepresearch server`" in out.stdout
    assert (data_dir / "temporal.db").exists()
    assert not port_open("127.0.0.1", port)  # the server was stopped again


async def test_watch_shows_events_from_before_a_worker_crash(env, temporal_client, tmp_path):
    with WorkerProcess(env, tmp_path / "crash-worker.log") as worker:
        await worker.ready(temporal_client)
        run_id = cli(env, "start", QUESTION).stdout.strip()
        wait_for_review(env, run_id)  # phase, plan, a search and the review request are published
        worker.kill()
        worker.start()
        await worker.ready(temporal_client)
        assert cli(env, "review", run_id, "--accept").returncode == 0
        out = cli(env, "watch", run_id)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    before_crash = ["phase: investigating", "  web_search: " + QUESTION, "the plan is waiting for review"]
    after_crash = ["  crawl: ", "step 2 finished: Compute the sum of squares", "run finished: completed"]
    for expected in before_crash + after_crash:
        assert any(line.startswith(expected) for line in lines), (expected, lines)
    assert [line for line in lines if line.startswith("plan: ")][0].startswith("plan: Scripted research")


async def test_status_reads_the_same_the_quick_way_as_through_the_full_client(env, worker_process, monkeypatch, capsys):
    """`status` answers from the query's JSON without the SDK's full client or
    the models (client/quick.py); what it prints is what the full client and
    the models print."""
    from client.cli import build_parser
    from client.commands import status
    from client.options import connection

    run_id = cli(env, "start", QUESTION).stdout.strip()
    wait_for_review(env, run_id)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for as_json in ([], ["--json"]):
        args = build_parser().parse_args(["status", run_id, *as_json])
        printed = []
        for way in (status.main(args), status.full(args, connection(args), None)):
            assert await way == 0
            printed.append(capsys.readouterr().out)
        assert printed[0] == printed[1]
        assert "awaiting_review" in printed[0] and "Scripted research" in printed[0]

    # In a process of its own: neither the full client nor the models were loaded.
    code = f"""
import json, sys
from client.cli import build_parser, dispatch
for argv in (["status", {run_id!r}], ["review", {run_id!r}, "--feedback", "fine"]):
    code = dispatch(build_parser().parse_args(argv))
    print(code, file=sys.stderr)
print(json.dumps(sorted(sys.modules)), flush=True)
sys.stderr.flush()
import os; os._exit(0)
"""
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "awaiting_review" in done.stdout and "review rejected: feedback must start with" in done.stderr
    modules = json.loads(done.stdout.splitlines()[-1])
    assert "temporalio.service" in modules
    heavy = ("temporalio.client", "pydantic", "workflows")
    assert [m for m in modules if m.split(".")[0] in heavy or m.startswith("temporalio.client")] == []


async def test_a_review_sent_while_no_worker_runs_is_applied_once_when_one_comes_back(env, temporal_client, tmp_path):
    """Temporal answers an update no worker takes after about 20 s; the quick way
    then hands over to the full client with the same update id, so the edit is
    applied once, not twice."""
    with WorkerProcess(env, tmp_path / "worker.log") as worker:
        await worker.ready(temporal_client)
        run_id = cli(env, "start", QUESTION).stdout.strip()
        wait_for_review(env, run_id)
        worker.stop()
        review = subprocess.Popen(
            [str(BIN / "deepresearch"), "review", run_id, "--edit", "add the keeper's name"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(25)
        assert review.poll() is None  # still waiting for a worker
        worker.start()
        await worker.ready(temporal_client)
        out, err = review.communicate(timeout=60)
        assert review.returncode == 0, err
        status = wait_for_review(env, run_id, plan_version=2)
    titles = [step["title"] for step in status["steps"]]
    assert titles.count("Edited: add the keeper's name") == 1, titles
    assert status["plan_version"] == 2  # the first plan and the edited one
    history = await temporal_client.get_workflow_handle(run_id).fetch_history()
    accepted = [e for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    assert len(accepted) == 1


async def test_start_sends_what_the_full_client_sends(env, temporal_client, task_queue):
    """`start` goes the quick way (client/quick.py); the run it starts has the
    input, memo, Temporal UI summary and details and phase that the full
    client's start gives (owner and sharing too), and a second start with the same id is refused."""
    from client.runs import start_research
    from infra.connection import Connection
    from workflows.models import OWNER_ATTRIBUTE, PHASE_ATTRIBUTE, SHARED_ATTRIBUTE, ResearchInput

    idle = f"{task_queue}-idle"  # no worker: the runs only have to exist
    question = "Wie viel Licht gab der Leuchtturm Lantern Rock 1911?\n(zweite Zeile)"
    quick = cli(
        env | {"DEEPRESEARCH_USER": "alice"},
        "start", question, "--max-step-num", "2", "--report-style", "news", "--task-queue", idle,
        "--share", "bob,team:ops",
    )  # fmt: skip
    assert quick.returncode == 0, quick.stderr
    request = ResearchInput(
        question=question, max_step_num=2, report_style="news", owner="alice", shared_with=["bob", "team:ops"]
    )
    full = await start_research(temporal_client, Connection(task_queue=idle), request, f"full-{task_queue}")

    async def started(handle):
        described = await handle.describe()
        history = await handle.fetch_history()
        attributes = history.events[0].workflow_execution_started_event_attributes
        payloads = attributes.input.payloads
        (given,) = await temporal_client.data_converter.decode(payloads, [ResearchInput])
        shown = (await described.static_summary(), await described.static_details())
        keep = (
            described.workflow_type,
            attributes.task_queue.name,
            described.typed_search_attributes.get(PHASE_ATTRIBUTE),
            described.typed_search_attributes.get(OWNER_ATTRIBUTE),
            described.typed_search_attributes.get(SHARED_ATTRIBUTE),
        )
        return given, await described.memo(), shown, keep

    quick_handle = temporal_client.get_workflow_handle(quick.stdout.strip())
    try:
        seen = await started(quick_handle)
        assert seen == await started(full)
        given, memo, (summary, details), keep = seen
        assert given == request and memo == {"question": question}
        assert keep[-2:] == ("alice", ["bob", "team:ops"])
        assert "\n" not in summary and "`max_step_num`: 2" in details
        again = cli(env, "start", question, "--task-queue", idle, "--id", quick_handle.id)
        assert (
            again.returncode == 1
            and again.stderr.strip() == f"error: a run with id {quick_handle.id} is already running"
        )
    finally:
        await quick_handle.terminate()
        await full.terminate()


async def test_list_reads_the_same_the_quick_way_as_through_the_full_client(env, worker_process, monkeypatch):
    """`list` reads runs from Temporal's gRPC service as plain JSON
    (client/quick.py); what it finds is what the full client finds."""
    from client import quick
    from client.commands import list_runs
    from infra.connection import Connection

    run_id = cli(env, "start", QUESTION).stdout.strip()
    wait_for_review(env, run_id)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    conn = Connection.from_env()
    query = f'WorkflowId="{run_id}"'
    for _ in range(50):  # the title reaches the visibility store a moment after the plan
        (listed,) = await quick.list_workflows(conn, query, 10)
        if "ResearchTitle" in listed.search_attributes:
            break
        await asyncio.sleep(0.1)
    assert await list_runs.full(conn, query, 10) == [listed]
    assert listed.status == "running" and listed.search_attributes["ResearchPhase"] == "awaiting_review"
    assert listed.search_attributes["ResearchTitle"] == "Scripted research" and listed.memo == {"question": QUESTION}
    assert listed.task_attempts <= 1 and listed.start_time.tzinfo is not None
    listing = cli(env | {"COLUMNS": "250"}, "list")
    assert listing.returncode == 0 and f"{run_id}" in listing.stdout and "running (awaiting_review)" in listing.stdout
