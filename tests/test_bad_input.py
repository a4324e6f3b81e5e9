"""Bad input from users, clients and models, with the real worker and dev
server: every case gets a clear error or a sane outcome, the run is never
crashed, and nothing done so far is lost."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError

from testkit.crash import Gate
from testkit.faults import Override, tool_protocol_problems
from testkit.llm_server import Reply, tool_messages
from testkit.research_script import EXPECTED_SUM, FACT
from testkit.runs import start, wait_for_phase
from workflows.models import ResearchInput, RunStatus

QUESTION = "Tell me about Lantern Rock"
COMPUTED = f"SUM_OF_SQUARES={EXPECTED_SUM}"
CLI = Path(sys.executable).parent / "deepresearch"


async def status_of(handle) -> RunStatus:
    return await handle.query("status", result_type=RunStatus)


# --- reviews --------------------------------------------------------------------


async def test_two_racing_reviews_one_wins_one_is_rejected(temporal_client, task_queue, worker, llm):
    handle = await start(temporal_client, task_queue, QUESTION)
    await wait_for_phase(handle, "awaiting_review")
    outcomes = await asyncio.gather(
        handle.execute_update("submit_review", "[ACCEPTED]", result_type=str),
        handle.execute_update("submit_review", "[ACCEPTED]", result_type=str),
        return_exceptions=True,
    )
    accepted = [o for o in outcomes if o == "plan accepted"]
    rejected = [o for o in outcomes if isinstance(o, WorkflowUpdateFailedError)]
    assert len(accepted) == 1 and len(rejected) == 1, outcomes
    reason = str(rejected[0].cause)  # depends on whether the winner's plan moved on yet
    assert "already been reviewed" in reason or "no plan is waiting for review" in reason

    result = await handle.result()
    assert result.status == "completed" and result.plan_iterations == 1
    assert len(llm.calls("reporter")) == 1 and len(llm.calls("planner")) == 1
    assert FACT in result.final_report


async def test_review_when_none_is_pending_is_rejected(temporal_client, task_queue, worker, llm, script):
    gate = Gate(script, "planner")  # hold the first plan until the test has tried to review it
    llm.handler = gate
    handle = await start(temporal_client, task_queue, QUESTION)
    try:
        await gate.wait_reached(30)
        assert (await status_of(handle)).phase == "planning"
        with pytest.raises(WorkflowUpdateFailedError) as early:
            await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)
        assert "no plan is waiting for review (phase: planning)" in str(early.value.cause)
        await handle.signal("review", "[ACCEPTED]")  # the signal is ignored too, not kept for later
    finally:
        gate.release()

    status = await wait_for_phase(handle, "awaiting_review")
    assert status.review_pending and status.plan is not None
    await asyncio.sleep(0.5)
    assert (await status_of(handle)).phase == "awaiting_review"  # the early signal did not accept it
    assert await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str) == "plan accepted"
    result = await handle.result()
    assert result.status == "completed"

    # After the run: a clear refusal, and the result is untouched.
    with pytest.raises((WorkflowUpdateFailedError, RPCError)) as late:
        await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)
    assert "completed" in str(late.value).lower() or "completed" in str(getattr(late.value, "cause", "")).lower()
    assert (await handle.result()).final_report == result.final_report


GARBAGE = ["looks good", "", "   ", "[EDIT_PLAN]", "ACCEPTED", "[REJECTED] no", "\x00\x01", "x" * 100_000, 42, {"a": 1}]


async def test_invalid_review_signals_are_ignored_and_the_run_keeps_waiting(temporal_client, task_queue, worker, llm):
    handle = await start(temporal_client, task_queue, QUESTION)
    await wait_for_phase(handle, "awaiting_review")
    for garbage in GARBAGE:  # prose, empty, blank, an edit without text, no brackets,
        await handle.signal("review", garbage)  # unknown tag, control bytes, 100 KB, not a string
    await asyncio.sleep(1.0)  # time for the workflow task that takes the signals
    status = await status_of(handle)
    assert status.phase == "awaiting_review" and status.review_pending
    assert len(llm.calls("planner")) == 1 and llm.calls("researcher") == []

    await handle.signal("review", "[ACCEPTED]")
    result = await handle.result()
    assert result.status == "completed" and FACT in result.final_report
    assert result.plan_iterations == 1 and len(llm.calls("planner")) == 1


async def test_update_with_a_non_string_is_rejected(temporal_client, task_queue, worker):
    handle = await start(temporal_client, task_queue, QUESTION)
    await wait_for_phase(handle, "awaiting_review")
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update("submit_review", {"accept": True}, result_type=str)
    assert (await status_of(handle)).phase == "awaiting_review"
    await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)
    assert (await handle.result()).status == "completed"


# --- run settings -------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, field",
    [
        ({"question": ""}, "question"),
        ({"question": "   "}, "question"),
        ({"question": "x" * 100_000}, "question"),
        ({"question": "q", "report_style": "limerick"}, "report_style"),
        ({"question": "q", "max_step_num": 0}, "max_step_num"),
        ({"question": "q", "max_step_num": 1000}, "max_step_num"),
        ({"question": "q", "agent_max_turns": 0}, "agent_max_turns"),
        ({"question": "q", "locale": "not a locale!"}, "locale"),
    ],
    ids=["empty", "blank", "100KB", "style", "steps-0", "steps-1000", "turns-0", "locale"],
)
def test_invalid_run_settings_are_refused_by_the_client(options, field):
    with pytest.raises(ValidationError) as invalid:
        ResearchInput(**options)
    assert [e["loc"][0] for e in invalid.value.errors()] == [field]
    assert field in str(invalid.value)


@pytest.mark.parametrize(
    "args, mentions",
    [(["   "], "question"), (["Tell me about Lantern Rock", "--max-step-num", "1000"], "--max-step-num")],
    ids=["empty-question", "steps-1000"],
)
def test_cli_start_refuses_invalid_settings_with_one_error_line(args, mentions, worker_env):
    done = subprocess.run([str(CLI), "start", *args], env=worker_env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and mentions in errors[0], done.stderr
    assert done.stdout == ""  # no workflow id: nothing was started


@pytest.mark.parametrize(
    "command, hours",
    [("start", "3e10"), ("start", "1e300"), ("start", "inf"), ("start", "nan"), ("run", "1e300"), ("run", "inf")],
)
def test_24_an_impossible_review_timeout_is_refused_with_one_line(command, hours, worker_env, tmp_path):
    """Before: 3e10 and 1e300 were accepted and the run hung at review
    ("Python int too large to convert to C int"); inf meant no timeout."""
    env = worker_env | {"DEEPRESEARCH_DATA_DIR": str(tmp_path / "fresh")}
    done = subprocess.run(
        [str(CLI), command, QUESTION, "--auto-accept", f"--review-timeout={hours}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == "", done.stdout  # nothing started, no server, no worker
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: invalid run options: --review-timeout: ")
    assert "finite" in done.stderr if hours in ("inf", "nan") else "87840" in done.stderr
    assert not (tmp_path / "fresh").exists()


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"question": ""}, "question"),
        ({"question": "q", "max_step_num": 1000}, "max_step_num"),
        ({"question": "q", "report_style": "limerick"}, "report_style"),
        ({"questoin": "q"}, "question"),
        ("just a question", "input"),
    ],
    ids=["empty-question", "steps-1000", "style", "misspelt", "not-an-object"],
)
async def test_raw_invalid_input_fails_the_run_promptly_with_a_clear_message(
    raw, field, temporal_client, task_queue, worker, llm
):
    # Bypasses the client's pydantic model, as `temporal workflow start` would.
    handle = await temporal_client.start_workflow(
        "DeepResearch", raw, id=f"test-raw-{uuid.uuid4().hex[:8]}", task_queue=task_queue
    )
    with pytest.raises(WorkflowFailureError) as failed:
        async with asyncio.timeout(15):
            await handle.result()
    message = failed.value.cause.message
    assert message.startswith("invalid run settings") and field in message, message
    assert (await status_of(handle)).phase == "failed"
    assert llm.requests == []  # nothing was paid for


# --- bad plans ------------------------------------------------------------------------


async def test_plan_with_no_steps_twice_researches_the_question_as_one_step(
    temporal_client, task_queue, worker, llm, script
):
    script.steps = []
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    assert result.status == "completed"
    assert [s.description for s in result.plan.steps] == [QUESTION]
    assert len(llm.calls("planner")) == 2
    assert llm.calls("researcher") and llm.calls("reporter")


async def test_plan_with_1000_steps_runs_only_max_step_num(temporal_client, task_queue, worker, llm, script):
    script.steps = [("Find the lighthouse fact", "research")] + [
        (f"Analyse aspect {i}", "analysis") for i in range(999)
    ]
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True, max_step_num=3)
    result = await handle.result()
    assert result.status == "completed"
    assert [s.title for s in result.plan.steps] == ["Find the lighthouse fact", "Analyse aspect 0", "Analyse aspect 1"]
    assert all(s.execution_res for s in result.plan.steps)
    assert len(llm.calls("analyst")) == 2 and len(result.observations) == 3
    assert FACT in result.final_report


# --- bad model replies ----------------------------------------------------------------


async def test_tool_call_arguments_that_are_not_json_give_a_tool_error(
    temporal_client, task_queue, worker, llm, script
):
    normal = script.researcher

    def researcher(request: dict):
        told = [m["content"] for m in tool_messages(request)]
        if not told:
            return Reply(tool_calls=[("web_search", "{not json")])
        if len(told) == 1:  # the error: now search properly, then go on as scripted
            return Reply(tool_calls=[("web_search", {"query": "lighthouse fact"})])
        return normal(request)

    script.researcher = researcher
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    assert result.status == "completed" and FACT in result.final_report
    error = tool_messages(llm.calls("researcher")[1])[0]["content"]
    assert error.startswith("Error:") and "not valid JSON" in error
    # the broken call searched nothing (background, the step's evidence and its lead, the researcher's)
    assert result.usage.searches == 4


@pytest.mark.parametrize("mixed", [False, True], ids=["unknown-only", "unknown-with-valid"])
async def test_call_to_an_unknown_tool_is_handled(mixed, temporal_client, task_queue, worker, llm, script):
    unknown = ("delete_everything", {"path": "/"})

    def first(request: dict, normal):
        return Reply(tool_calls=[unknown, ("web_search", {"query": "lighthouse fact"})] if mixed else [unknown])

    llm.handler = Override(llm.handler, "researcher", first)
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    assert result.status == "completed" and COMPUTED in result.final_report
    # Whatever the loop does with the unknown call, every request it sends
    # afterwards must be one an OpenAI-compatible server accepts.
    for request in llm.requests:
        assert tool_protocol_problems(request) == [], request["_role"]
