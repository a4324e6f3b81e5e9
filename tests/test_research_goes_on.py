"""Research that goes on, end to end on the real dev server with the real
worker and CLI: follow-up questions on a finished run (a thread), building on
a run (``--continue-from``). Scheduled research: tests/test_schedules.py."""

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
from testkit.runs import keep_history
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
    listed = await asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "list", "--limit", "1000")
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
        listed = await asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "list", "--limit", "1000")
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
