"""Research that goes on, end to end on the real dev server with the real
worker and CLI: follow-up questions on a finished run (a thread), building on
a run (``--continue-from``), and scheduled research that says what changed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

from testkit.llm_server import role_of
from testkit.pages import article
from testkit.research_script import FACT, first_user
from testkit.runs import keep_history, polled
from testkit.worker_process import WorkerProcess
from workflows.models import PHASE_ATTRIBUTE, TITLE_ATTRIBUTE

BIN = Path(sys.executable).parent
QUESTION = "Tell me about the Lantern Rock lighthouse"
BUILDER = "FACT: the Lantern Rock lighthouse was constructed by Ada Quillon in 1887"
NEW_FACT = "FACT: the Lantern Rock lighthouse keeper logged 5120 ships in 1911"


def cli(env, *args, timeout=180):
    return subprocess.run([str(BIN / "deepresearch"), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
async def worker(worker_env, temporal_client, tmp_path, script):
    with WorkerProcess(worker_env, tmp_path / "worker.log") as process:
        await process.ready(temporal_client)
        yield process


def finished_run(env) -> dict:
    run_id = cli(env, "start", QUESTION, "--auto-accept").stdout.strip()
    done = cli(env, "result", run_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) | {"run_id": run_id}


def ask(env, run_id: str, question: str, *extra: str) -> dict:
    done = cli(env, "ask", run_id, question, "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_a_thread_of_three_questions(worker_env, worker, llm, tavily, pages, temporal_client):
    run = await asyncio.to_thread(finished_run, worker_env)
    lighthouse = pages.url("/lighthouse")

    first = await asyncio.to_thread(ask, worker_env, run["run_id"], "How many ships did the keeper log?")
    assert first["workflow_id"] == f"{run['run_id']}-ask"
    assert "4417" in first["answer"] and not first["researched"]
    assert [c["url"] for c in first["citations"]] == [lighthouse]
    request = llm.calls("followup")[0]
    assert FACT in json.dumps(request)  # the FOLLOWUP model's request holds the run's findings

    second = await asyncio.to_thread(ask, worker_env, run["run_id"], "Repeat your previous answer, please")
    assert first["answer"] in second["answer"]  # answered from the first answer, which the thread kept
    assert "Q: How many ships did the keeper log?" in json.dumps(llm.calls("followup")[-1])

    pages.add("/builder", article("Who built Lantern Rock", ["Records.", BUILDER + ".", "More."]))
    tavily.handler = lambda query, n: [
        {"title": "Lantern Rock builder", "url": pages.url("/builder"), "content": "Records.", "score": 0.9}
    ]
    third = await asyncio.to_thread(ask, worker_env, run["run_id"], "Who constructed it?")
    assert third["researched"] and third["research_run"]
    assert "Ada Quillon" in third["answer"]
    assert pages.url("/builder") in [c["url"] for c in third["citations"]]  # the new source, cited and verified
    planned = [json.dumps(c) for c in llm.calls("planner") if "Who constructed it?" in json.dumps(c)]
    assert planned and QUESTION in planned[0]  # the research knew what "it" is: the run's question came along
    research = await temporal_client.get_workflow_handle(third["research_run"]).describe()
    assert research.status == WorkflowExecutionStatus.COMPLETED
    # it shows in `list` and the Temporal UI as any run does: its question, plan title and phase
    assert await research.memo_value("question") == "Who constructed it?"
    assert research.typed_search_attributes.get(TITLE_ATTRIBUTE) == "Scripted research"
    assert research.typed_search_attributes.get(PHASE_ATTRIBUTE) == "completed"

    await keep_history(temporal_client.get_workflow_handle(first["workflow_id"]), "follow_up_thread")
    thread = await temporal_client.get_workflow_handle(first["workflow_id"]).query("status")
    assert thread["questions"] == 3 and [t["researched"] for t in thread["turns"]] == [False, False, True]
    ui = await temporal_client.get_workflow_handle(first["workflow_id"]).query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata
    )  # what the Temporal UI shows as the thread's current details
    assert "**Q:** Who constructed it?" in ui.current_details and "(researched more)" in ui.current_details
    shown = await asyncio.to_thread(cli, worker_env, "status", first["workflow_id"])
    assert shown.returncode == 0, shown.stderr
    assert "Q: Repeat your previous answer, please" in shown.stdout and "researched more in" in shown.stdout
    of_run = await asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "status", run["run_id"])
    assert f"ask {run['run_id']} QUESTION" in of_run.stdout and first["workflow_id"] in of_run.stdout  # its thread
    listed = await asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "list")
    assert first["workflow_id"] in listed.stdout and "follow-up thread: 3 question(s)" in listed.stdout
    # `result` of the thread: every answer in full at once (it used to wait for a thread that never ends).
    saved = Path(worker_env["DEEPRESEARCH_DATA_DIR"]) / "thread.md"
    done = await asyncio.to_thread(cli, worker_env, "result", first["workflow_id"], "-o", str(saved), timeout=60)
    assert done.returncode == 0, done.stderr
    text = saved.read_text()
    assert text.index("## How many ships") < text.index("## Repeat your previous") < text.index("## Who constructed")
    assert third["answer"].strip() in text and f"researched more for this answer in run {third['research_run']}" in (
        text.lower()
    )
    as_json = json.loads((await asyncio.to_thread(cli, worker_env, "result", first["workflow_id"], "--json")).stdout)
    assert as_json["workflow_id"] == first["workflow_id"] and len(as_json["turns"]) == 3


async def test_a_question_on_an_unknown_or_unfinished_run_is_one_line(worker_env, worker, temporal_client, task_queue):
    done = await asyncio.to_thread(cli, worker_env, "ask", "no-such-run", "anything?")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "no run with id no-such-run" in done.stderr and "Traceback" not in done.stderr

    waiting = await asyncio.to_thread(cli, worker_env, "start", QUESTION)  # its plan waits for review
    run_id = waiting.stdout.strip()
    deadline = time.monotonic() + 60
    while (await temporal_client.get_workflow_handle(run_id).query("status"))["phase"] != "awaiting_review":
        assert time.monotonic() < deadline, "the run never asked for review"
        await asyncio.sleep(0.2)
    done = await asyncio.to_thread(cli, worker_env, "ask", run_id, "anything?")
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"error: run {run_id} is still running: wait for its report first (`deepresearch result {run_id}` waits for it)"
    ]
    await temporal_client.get_workflow_handle(run_id).terminate("test over")
    # Issue 27, item 7: an ended run that has no report was told to "wait for its report first".
    failed = await temporal_client.start_workflow(
        "DeepResearch", {"question": QUESTION, "max_step_num": 0}, id=f"{run_id}-bad", task_queue=task_queue
    )
    with pytest.raises(WorkflowFailureError):
        await failed.result()
    for ended, how in ((run_id, "was terminated"), (failed.id, "failed")):
        line = (
            f"error: run {ended} {how}: it has no report and never will, so there is nothing to build on "
            f"(`deepresearch result {ended}` says why); start a new run instead"
        )
        for args in (["ask", ended, "anything?"], ["start", QUESTION, "--continue-from", ended]):
            done = await asyncio.to_thread(cli, worker_env, *args)
            assert done.returncode == 1 and done.stderr.strip().splitlines() == [line], (args, done.stderr)


async def test_a_question_too_long_or_a_thread_id_taken_is_one_line(worker_env, worker, temporal_client):
    """Issue 27, item 7: a question over 4,000 characters was cut there without
    a word; a run whose id is another run's thread id (`X-ask`) made `ask X`
    end in Temporal's "Update handler for 'ask' expected but not found"."""
    from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError
    from temporalio.common import WorkflowIDConflictPolicy

    run = await asyncio.to_thread(finished_run, worker_env)
    run_id = run["run_id"]
    long = "Why " + "very " * 1000 + "much?"
    done = await asyncio.to_thread(cli, worker_env, "ask", run_id, long)
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"error: the question is {len(long):,} characters long; a follow-up question may have at most 4,000: "
        f"shorten it (or start a run on it: `deepresearch run QUESTION --continue-from {run_id}`)"
    ]
    # Another client than ours (the desk, the SDK): the thread itself refuses it.
    start = WithStartWorkflowOperation(
        "FollowUp",
        {"run_id": run_id},
        id=f"{run_id}-ask",
        task_queue=worker_env["DEEPRESEARCH_TASK_QUEUE"],
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await temporal_client.execute_update_with_start_workflow(
            "ask", args=[long, False], start_workflow_operation=start
        )
    assert "longer than 4,000 characters" in str(refused.value.cause)
    await temporal_client.get_workflow_handle(f"{run_id}-ask").terminate("test over")

    taken = await asyncio.to_thread(cli, worker_env, "start", QUESTION, "--id", f"{run_id}-ask")
    assert taken.returncode == 0, taken.stderr
    try:
        done = await asyncio.to_thread(cli, worker_env, "ask", run_id, "Who built it?")
        assert done.returncode == 1 and done.stderr.strip().splitlines() == [
            f"error: run {run_id}'s follow-up questions go to the workflow {run_id}-ask, but that id is taken by a "
            "DeepResearch workflow (a run started with that id), so it cannot take questions; "
            f"ask in a new run instead: `deepresearch run QUESTION --continue-from {run_id}`"
        ]
    finally:
        await temporal_client.get_workflow_handle(f"{run_id}-ask").terminate("test over")


async def test_continue_from_a_cancelled_run_builds_on_its_partial_report_and_says_so(
    worker_env, worker, temporal_client
):
    """Issue 27, item 7: the docs said the run named must have completed with a
    report, the code took a cancelled one silently. Both now: taken, with a note."""
    waiting = await asyncio.to_thread(cli, worker_env, "start", QUESTION)  # its plan waits for review
    run_id = waiting.stdout.strip()
    deadline = time.monotonic() + 60
    while (await temporal_client.get_workflow_handle(run_id).query("status"))["phase"] != "awaiting_review":
        assert time.monotonic() < deadline, "the run never asked for review"
        await asyncio.sleep(0.2)
    assert (await asyncio.to_thread(cli, worker_env, "cancel", run_id)).returncode == 0
    assert (await temporal_client.get_workflow_handle(run_id).result())["status"] == "cancelled"
    done = await asyncio.to_thread(cli, worker_env, "start", QUESTION, "--continue-from", run_id)
    assert done.returncode == 0, done.stderr
    new_id = done.stdout.strip()  # standard output: the new run's id alone
    assert done.stderr.strip().splitlines() == [
        f"note: run {run_id} was cancelled; this run builds on its partial report (what it had found when it stopped)"
    ]
    await temporal_client.get_workflow_handle(new_id).terminate("test over")


def line_with(process: subprocess.Popen, text: str) -> str:
    """The first line of the process's output holding ``text`` ('' at its end)."""
    while line := process.stdout.readline():
        if text in line:
            return line
    return ""


async def test_ask_review_waits_for_the_review_of_its_research(worker_env, worker, tavily, pages, temporal_client):
    run = await asyncio.to_thread(finished_run, worker_env)
    pages.add("/builder", article("Who built Lantern Rock", ["Records.", BUILDER + ".", "More."]))
    tavily.handler = lambda query, n: [
        {"title": "Lantern Rock builder", "url": pages.url("/builder"), "content": "Records.", "score": 0.9}
    ]
    research = f"{run['run_id']}-ask-research-1"
    asking = subprocess.Popen(
        [str(BIN / "deepresearch"), "ask", run["run_id"], "Who constructed it?", "--review"],
        env=worker_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        told = await asyncio.wait_for(asyncio.to_thread(line_with, asking, "researching more"), 120)
        assert f"researching more in run {research}; review its plan with" in told  # ask says which run waits
        deadline = time.monotonic() + 60
        while (await temporal_client.get_workflow_handle(research).query("status"))["phase"] != "awaiting_review":
            assert time.monotonic() < deadline, "the research never waited for the asker's review"
            await asyncio.sleep(0.2)
        listed = await asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "list")
        assert "follow-up thread: answering its first question" in listed.stdout, listed.stdout  # not "0 questions"
        reviewed = await asyncio.to_thread(cli, worker_env, "review", research, "--accept")
        assert reviewed.returncode == 0, reviewed.stderr
        out, err = await asyncio.to_thread(asking.communicate, timeout=120)
    finally:
        if asking.poll() is None:
            asking.kill()
    assert asking.returncode == 0, err
    assert "Ada Quillon" in out and f"researched more in run {research}" in out


async def test_an_answer_cites_only_what_was_retrieved(worker_env, worker, llm, script, pages):
    """A follow-up answer's links are checked as the report's: a URL neither
    the run nor the thread's research retrieved is removed."""
    run = await asyncio.to_thread(finished_run, worker_env)
    real = pages.url("/lighthouse")

    def invents_a_source(request: dict):
        if role_of(request) != "followup":
            return script(request)
        return f"4417 ships ([the log]({real})), says [a made-up page](http://invented.example/log) too."

    llm.handler = invents_a_source
    answer = await asyncio.to_thread(ask, worker_env, run["run_id"], "How many ships did the keeper log?")
    assert "invented.example" not in answer["answer"] and "[unverified source removed]" in answer["answer"]
    assert [c["url"] for c in answer["citations"]] == [real]


async def test_a_long_thread_stays_small_and_remembers(worker_env, worker, temporal_client):
    """A thread continues as new when its history grows; the next run of it
    still has the run's findings, the newest turns and the question count."""
    from workflows.follow_up import CONTINUE_AFTER_EVENTS, MAX_TURNS_KEPT
    from workflows.follow_up_models import FollowUpAnswer, ThreadStatus

    run = await asyncio.to_thread(finished_run, worker_env)
    await asyncio.to_thread(ask, worker_env, run["run_id"], "How many ships did the keeper log?")  # starts the thread
    thread = temporal_client.get_workflow_handle(f"{run['run_id']}-ask")
    first_run = (await thread.describe()).run_id
    asked = 1
    while (await thread.describe()).run_id == first_run:
        assert asked < 400, "the thread never continued as new"
        await thread.execute_update("ask", args=[f"Repeat your previous answer ({asked})", False],
                                    result_type=FollowUpAnswer)  # fmt: skip
        asked += 1
    old = await temporal_client.get_workflow_handle(thread.id, run_id=first_run).describe()
    assert old.raw_description.workflow_execution_info.history_length < CONTINUE_AFTER_EVENTS + 100
    answer = await thread.execute_update("ask", args=["How many ships did the keeper log?", False],
                                         result_type=FollowUpAnswer)  # fmt: skip
    assert "4417" in answer.answer and answer.citations  # the run's findings and sources came along
    status = await thread.query("status", result_type=ThreadStatus)
    assert status.questions == asked + 1 and len(status.turns) == MAX_TURNS_KEPT
    assert status.turns[-2].question == f"Repeat your previous answer ({asked - 1})"


async def test_a_worker_killed_mid_answer_pays_nothing_twice(worker_env, worker, llm, temporal_client):
    run = await asyncio.to_thread(finished_run, worker_env)
    earlier = await asyncio.to_thread(ask, worker_env, run["run_id"], "How many ships did the keeper log?")
    before = {role: len(llm.calls(role)) for role in ("coordinator", "planner", "researcher", "coder", "reporter")}
    llm.latency = 4.0  # the follow-up call is in flight when the worker dies
    asking = asyncio.create_task(asyncio.to_thread(ask, worker_env, run["run_id"], "Repeat your previous answer"))
    deadline = time.monotonic() + 60
    while len(llm.calls("followup")) < 2:
        assert time.monotonic() < deadline, "the follow-up call never reached the model"
        await asyncio.sleep(0.1)
    worker.kill()
    llm.latency = 0.0
    worker.start()
    await worker.ready(temporal_client)
    answer = await asking
    assert earlier["answer"] in answer["answer"]  # the thread kept its earlier answer across the crash
    after = {role: len(llm.calls(role)) for role in before}
    assert after == before  # nothing the run had paid for was asked again
    assert len(llm.calls("followup")) == 3  # the earlier answer once, the call lost with the worker, its retry


async def test_continue_from_plans_from_what_the_run_found(worker_env, worker, llm, pages, temporal_client):
    first = await asyncio.to_thread(finished_run, worker_env)
    started = await asyncio.to_thread(
        cli, worker_env, "start", "What else is known about Lantern Rock?", "--auto-accept",
        "--continue-from", first["run_id"],
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    second_id = started.stdout.strip()
    done = await asyncio.to_thread(cli, worker_env, "result", second_id, "--json")
    assert done.returncode == 0, done.stderr
    second = json.loads(done.stdout)
    await keep_history(temporal_client.get_workflow_handle(second_id), "continued_from_run")
    planner = [c for c in llm.calls("planner") if first["run_id"] in json.dumps(c)]
    assert planner and FACT in json.dumps(planner[0])  # the planner saw what the first run found
    reporter = json.dumps(llm.calls("reporter")[-1])
    assert "The earlier report" in reporter and first["run_id"] in reporter  # the reporter had the earlier report
    assert "What changed since" in second["final_report"]
    assert pages.url("/lighthouse") in [c["url"] for c in second["citations"]]  # old findings keep their sources


async def test_a_report_without_what_changed_gets_it_under_its_title(worker_env, worker, llm, script):
    """When the reporter leaves the section out, one more call writes it, and
    it goes under the report's title (the title stays the report's title)."""
    first = await asyncio.to_thread(finished_run, worker_env)

    def reporter_leaves_it_out(request: dict):
        if role_of(request) != "reporter":
            return script(request)
        if "# The new report" in first_user(request):  # the call that writes only what changed
            return (
                "## What changed since the earlier run\n- Nothing changed ([source]("
                + first["citations"][0]["url"]
                + "))."
            )
        return f"# Lantern Rock, again\n\n## Key Points\n- {FACT}.\n"

    llm.handler = reporter_leaves_it_out
    started = await asyncio.to_thread(
        cli, worker_env, "start", "What else about Lantern Rock?", "--auto-accept", "--continue-from", first["run_id"]
    )  # fmt: skip
    done = await asyncio.to_thread(cli, worker_env, "result", started.stdout.strip(), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["final_report"]
    assert report.startswith("# Lantern Rock, again\n")  # the title first, then what changed, then the rest
    assert report.index("## What changed since") < report.index("## Key Points")
    changes = [json.dumps(c) for c in llm.calls("reporter") if "# The new report" in first_user(c)]
    assert len(changes) == 1 and first["run_id"] in changes[0]  # it was given the earlier report


async def test_continue_from_a_run_that_does_not_exist_fails_in_one_line(worker_env, worker):
    started = await asyncio.to_thread(
        cli, worker_env, "run", QUESTION, "--auto-accept", "--continue-from", "nothing-here"
    )  # fmt: skip
    assert started.returncode != 0
    assert "no run with id nothing-here" in started.stdout + started.stderr
    assert "Traceback" not in started.stdout + started.stderr


async def scheduled_runs(client, name: str) -> list:
    query = f"TemporalScheduledById = '{name}'"
    return [run async for run in client.list_workflows(query)]


async def completed(client, name: str, count: int, timeout: float = 120) -> list:
    deadline = time.monotonic() + timeout
    while True:
        runs = [r for r in await scheduled_runs(client, name) if r.status == WorkflowExecutionStatus.COMPLETED]
        if len(runs) >= count:
            return sorted(runs, key=lambda r: r.start_time)
        assert time.monotonic() < deadline, f"{len(runs)} of {count} scheduled runs completed"
        await asyncio.sleep(0.5)


async def test_a_schedule_runs_builds_on_its_last_run_and_says_what_changed(
    worker_env, worker, llm, pages, temporal_client
):
    name = f"lantern-{time.time_ns() % 10**8}"
    created = await asyncio.to_thread(
        cli, worker_env, "schedule", "create", name, QUESTION, "--every", "4s", "--max-step-num", "1"
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    try:
        deadline = time.monotonic() + 120
        while "/lighthouse" not in pages.hits:
            assert time.monotonic() < deadline, "the first scheduled run never read the page"
            await asyncio.sleep(0.2)
        # the site changes its figure once the first run has read it
        pages.add("/lighthouse", article("Lantern Rock history", ["Some history first.", NEW_FACT + ".", "More."]))
        first = (await completed(temporal_client, name, 1))[0]
        runs = await completed(temporal_client, name, 2)
        second = [r for r in runs if r.start_time > first.start_time][0]
        old = await temporal_client.get_workflow_handle(first.id).result()
        new = await temporal_client.get_workflow_handle(second.id).result()
        reporter_requests = [json.dumps(c) for c in llm.calls("reporter")]
        assert any(first.id in r and "4417" in r and "5120" in r for r in reporter_requests)
        report = new["final_report"]
        assert report.index("What changed since") < report.index("Key Points")  # it opens with the changes
        changes = report.split("What changed since", 1)[1].split("## Key Points", 1)[0]
        assert "4417" in changes and "5120" in changes  # the old and the new figure
        assert changes.count(f"]({pages.url('/lighthouse')})") == 2  # each cited, its link kept by the check
        assert pages.url("/lighthouse") in [c["url"] for c in new["citations"]]
        assert "What changed since" not in old["final_report"]
        listed = await asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "list")
        assert f"(schedule {name})" in listed.stdout
        described = await temporal_client.get_workflow_handle(second.id).describe()
        assert described.typed_search_attributes.get(TITLE_ATTRIBUTE) == "Scripted research"  # as any run shows

        bundled = subprocess.run(
            [str(BIN / "temporal"), "schedule", "list", "--address", worker_env["TEMPORAL_ADDRESS"]],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert name in bundled.stdout, bundled.stdout + bundled.stderr
        ours = await asyncio.to_thread(cli, worker_env, "schedule", "list")
        assert name in ours.stdout and "4s" in ours.stdout

        paused = await asyncio.to_thread(cli, worker_env, "schedule", "pause", name)
        assert paused.returncode == 0, paused.stderr
        await asyncio.sleep(1)  # a start already under way may still land
        count = len(await scheduled_runs(temporal_client, name))
        await asyncio.sleep(9)  # two intervals and more
        assert len(await scheduled_runs(temporal_client, name)) == count  # paused: no new run
        row = next(line for line in (await asyncio.to_thread(cli, worker_env, "schedule", "list")).stdout.splitlines()
                   if line.startswith(name))  # fmt: skip
        assert " paused " in row and row.split()[-1] == "-"  # no next run while paused
    finally:
        deleted = await asyncio.to_thread(cli, worker_env, "schedule", "delete", name)
    assert deleted.returncode == 0, deleted.stderr
    listed = await polled(  # schedules are listed from the visibility store, which learns of the delete a moment later
        lambda: asyncio.to_thread(cli, worker_env, "schedule", "list"), lambda listed: name not in listed.stdout
    )
    assert name not in listed.stdout
    again = await asyncio.to_thread(cli, worker_env, "schedule", "pause", name)
    assert again.returncode == 1 and f"no schedule named {name!r}" in again.stderr


def test_schedule_durations_read_as_users_write_them():
    from datetime import timedelta

    from client.commands.schedule import parse_every
    from client.errors import CliError

    assert parse_every("1w") == timedelta(weeks=1)
    assert parse_every("1h30m") == timedelta(minutes=90)
    assert parse_every(" 45s ") == timedelta(seconds=45)
    for bad in ("", "1x", "w", "1.5h", "-1d", "1d 2"):
        with pytest.raises(CliError, match="--every"):
            parse_every(bad)


async def test_bad_schedule_input_is_one_line(worker_env, worker):
    name = f"dup-{time.time_ns() % 10**8}"
    for timing in (["--every", ""], ["--every", "1x"], ["--cron", ""], ["--cron", "99 * * * *"]):
        done = await asyncio.to_thread(cli, worker_env, "schedule", "create", name, QUESTION, *timing)
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, (timing, done.stderr)
        assert "Traceback" not in done.stderr and f"error: {timing[0]}" in done.stderr
    # Issue 27, item 7: a cron expression no date matches was accepted and listed as "EVERY ?".
    never = await asyncio.to_thread(cli, worker_env, "schedule", "create", name, QUESTION, "--cron", "0 0 31 2 *")
    assert never.returncode == 1 and never.stderr.strip().splitlines() == [
        "error: --cron '0 0 31 2 *' never fires (no date matches it): no schedule created"
    ]
    created = await asyncio.to_thread(cli, worker_env, "schedule", "create", name, QUESTION, "--every", "1w")
    assert created.returncode == 0, created.stderr  # the refused one left nothing under its name
    weekdays = f"{name}-cron"
    try:
        again = await asyncio.to_thread(cli, worker_env, "schedule", "create", name, "Other?", "--cron", "0 8 * * *")
        assert again.returncode == 1 and again.stderr.strip().splitlines() == [
            f"error: a schedule named {name!r} already exists (delete it first, or choose another name)"
        ]
        made = await asyncio.to_thread(
            cli, worker_env, "schedule", "create", weekdays, QUESTION, "--cron", "0 8 * * MON-FRI"
        )
        assert made.returncode == 0, made.stderr
        listed = (await asyncio.to_thread(cli, worker_env, "schedule", "list")).stdout.splitlines()
        row = next(line for line in listed if line.startswith(weekdays))
        assert row.split("  ")[1].strip() == "0 8 * * MON-FRI"  # its timing, where "?" stood
    finally:
        assert (await asyncio.to_thread(cli, worker_env, "schedule", "delete", name)).returncode == 0
        await asyncio.to_thread(cli, worker_env, "schedule", "delete", weekdays)


def test_schedule_create_offers_only_the_options_it_keeps():
    """Issue 27, item 10: --auto-accept sat beside --review (which decides) and
    --continue-from beside the schedule's own building on its last run."""
    from client.cli import build_parser

    parser = build_parser()
    helped = parser._subparsers._group_actions[0].choices["schedule"]._subparsers._group_actions[0].choices["create"]
    text = helped.format_help()
    assert "--auto-accept" not in text and "--continue-from" not in text
    assert "--review" in text and "Temporal adds the start time" in text  # --id: what it names
    with pytest.raises(SystemExit):
        parser.parse_args(["schedule", "create", "n", "q?", "--every", "1w", "--auto-accept"])


async def test_a_schedule_made_anew_under_an_old_name_starts_afresh(worker_env, worker, llm, temporal_client):
    """A deleted schedule's runs stay, but a new schedule of the same name (here
    on another question) does not build on them: nothing from another run."""
    name = f"reused-{time.time_ns() % 10**8}"
    for question in (QUESTION, "What else stands on Lantern Rock?"):
        created = await asyncio.to_thread(cli, worker_env, "schedule", "create", name, question, "--every", "1w")
        assert created.returncode == 0, created.stderr
        try:
            assert (await asyncio.to_thread(cli, worker_env, "schedule", "trigger", name)).returncode == 0
            runs = await completed(temporal_client, name, 1 if question == QUESTION else 2)
        finally:
            assert (await asyncio.to_thread(cli, worker_env, "schedule", "delete", name)).returncode == 0
    old, new = runs[0], runs[-1]
    report = (await temporal_client.get_workflow_handle(new.id).result())["final_report"]
    assert "What changed since" not in report
    assert not [c for c in llm.calls() if old.id in json.dumps(c)]  # the old schedule's run reached no request


async def test_a_schedule_with_review_waits_and_starts_no_second_run_meanwhile(worker_env, worker, temporal_client):
    """--review: each scheduled run waits for review; the stated policy, one run
    at a time, skips the starts that fall while it waits."""
    from temporalio.client import ScheduleOverlapPolicy

    from client.commands.schedule import CATCHUP_WINDOW

    name = f"reviewed-{time.time_ns() % 10**8}"
    created = await asyncio.to_thread(
        cli, worker_env, "schedule", "create", name, QUESTION, "--every", "2s", "--review"
    )
    assert created.returncode == 0, created.stderr
    assert "plans wait for review" in created.stdout
    try:
        policy = (await temporal_client.get_schedule_handle(name).describe()).schedule.policy
        assert policy.overlap == ScheduleOverlapPolicy.SKIP and policy.catchup_window == CATCHUP_WINDOW
        deadline = time.monotonic() + 60
        while True:
            runs = await scheduled_runs(temporal_client, name)
            if runs and (await temporal_client.get_workflow_handle(runs[0].id).query("status"))["phase"] == (
                "awaiting_review"
            ):
                break
            assert time.monotonic() < deadline, "the scheduled run never waited for review"
            await asyncio.sleep(0.3)
        await asyncio.sleep(6)  # three intervals
        assert len(await scheduled_runs(temporal_client, name)) == 1  # skipped while the first waits
        described = await temporal_client.get_schedule_handle(name).describe()
        assert described.info.num_actions_skipped_overlap >= 2
    finally:
        assert (await asyncio.to_thread(cli, worker_env, "schedule", "delete", name)).returncode == 0
    for run in await scheduled_runs(temporal_client, name):
        await temporal_client.get_workflow_handle(run.id).terminate("test over")
