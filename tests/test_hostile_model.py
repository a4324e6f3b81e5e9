"""A model that misbehaves, end to end on the scripted servers with the real
worker and dev server: whatever it sends, the run ends (with its report, or a
clear failure) and never wedges. The numbers are those of the issue
"Twenty-five ways a model, a page or a folder breaks a run today".
"""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError

from testkit.llm_server import Reply, has_tool_result, tool_messages
from testkit.research_script import CODE, EXPECTED_SUM, FACT
from testkit.runs import keep_history, start, wait_for_phase
from workflows.activity_calls import MAX_TOOLS_IN_FLIGHT
from workflows.models import RunStatus

QUESTION = "Tell me about Lantern Rock"
COMPUTED = f"SUM_OF_SQUARES={EXPECTED_SUM}"
RUN_TIMEOUT = 60  # seconds; a wedged run would otherwise hang the test


async def finish(handle):
    async with asyncio.timeout(RUN_TIMEOUT):
        return await handle.result()


def answers(request: dict) -> list[str]:
    return [m.get("content") or "" for m in tool_messages(request)]


# --- 1. whitespace-only code, and arguments that are not JSON ----------------------


async def test_coder_with_blank_code_and_broken_arguments_gets_errors_and_the_run_completes(
    temporal_client, task_queue, worker, llm, script
):
    turns = []

    def coder(request):
        turns.append(request)
        if len(turns) == 1:
            return Reply(
                tool_calls=[
                    ("run_python", {"code": "   \n\t  "}),
                    ("run_python", "{this is not json"),
                    ("run_python", json.dumps(["a", "list"])),
                    ("run_python", {"code": 42}),
                ]
            )
        if len(turns) == 2:
            return Reply(tool_calls=[("run_python", {"code": CODE})])
        return "Computed:\n" + "\n".join(answers(request))

    script.coder = coder
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finish(handle)
    assert result.status == "completed" and COMPUTED in result.final_report
    first_answers = answers(turns[1])
    assert len(first_answers) == 4 and all(a.startswith("Error:") for a in first_answers[:3])
    assert "non-empty 'code'" in first_answers[0] and "not valid JSON" in first_answers[1]
    assert "42" in first_answers[3] or first_answers[3].startswith("Error:")  # a number is taken as code text


async def test_researcher_with_broken_calls_gets_errors_and_the_run_completes(
    temporal_client, task_queue, worker, llm, script
):
    normal, turns = script.researcher, []

    def researcher(request):
        turns.append(request)
        if len(turns) == 1:
            return Reply(
                tool_calls=[
                    ("web_search", "not json at all"),
                    ("web_search", {"query": ""}),
                    ("crawl", {"url": None}),
                    ("no_such_tool", {"x": 1}),
                    ("web_search", "".join(f'{{"q{n}": ' for n in range(500))),  # deep, not a loop
                    ("", "{}"),
                ]
            )
        # Then as usual, on the conversation after the broken turn.
        later = {**request, "messages": request["messages"][:2] + request["messages"][2 + 1 + 6 :]}
        return normal(later)

    script.researcher = researcher
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finish(handle)
    assert result.status == "completed" and FACT in result.final_report
    assert len(answers(turns[1])) == 6 and all(a.startswith("Error:") for a in answers(turns[1]))


# --- 2. lone UTF-16 surrogates everywhere --------------------------------------------


async def test_lone_surrogates_from_the_model_never_wedge_the_run(temporal_client, task_queue, worker, llm, script):
    lone = "\\ud83d"  # escaped in the JSON text, as a model's output can be
    normal_researcher, normal_reporter = script.researcher, script.reporter

    def coordinator(request):
        args = '{"research_topic": "Lantern Rock ' + lone + '", "locale": "en-US"}'
        return Reply(tool_calls=[("handoff_to_planner", args)])

    def planner(request):
        return Reply(
            body=json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {
                                "role": "assistant",
                                "content": '{"title": "Plan '
                                + "\ud83d"
                                + '", "thought": "t", "has_enough_context": false, '
                                '"steps": [{"title": "Find the lighthouse fact", "description": "d", "step_type": "research"}]}',
                            },
                        }
                    ],
                }
            )
        )

    def researcher(request):
        if not has_tool_result(request, "web_search"):
            return Reply(tool_calls=[("web_search", '{"query": "lighthouse ' + lone + '"}')])
        return normal_researcher(request)

    def reporter(request):
        return normal_reporter(request) + "\nThe end \ud83d."

    script.coordinator, script.planner, script.researcher, script.reporter = coordinator, planner, researcher, reporter
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finish(handle)
    assert result.status == "completed" and FACT in result.final_report
    assert "\ufffd" in result.final_report or "The end" in result.final_report
    assert result.plan and result.plan.title.startswith("Plan")


# --- 3. thousands of tool calls in one turn --------------------------------------------


async def test_two_thousand_tool_calls_in_one_turn_run_only_a_bounded_number(
    temporal_client, task_queue, worker, llm, script, tavily
):
    normal, turns = script.researcher, []

    def researcher(request):
        turns.append(request)
        # Its first turn, also when a loaded worker asks it again (a retried
        # activity): no call has been answered yet.
        if not any(tool_messages(t) for t in turns):
            return Reply(tool_calls=[("web_search", {"query": f"q{i}"}) for i in range(2100)])
        return normal(request)

    script.researcher = researcher
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finish(handle)
    assert result.status == "completed" and FACT in result.final_report
    replies = next(answers(t) for t in turns if tool_messages(t))  # the turn after the 2,100 calls
    assert len(replies) == 2100  # every call answered, exactly once
    assert sum(r.startswith("Error: only the first") for r in replies) == 2100 - 16
    # the bounded calls; the background search, the step's evidence search and its lead's; the normal one
    assert len(tavily.requests) <= 16 + 4


TOOL_ACTIVITIES = {"web_search", "local_search", "crawl", "run_python", "mcp_call_tool"}


def most_tools_pending(history) -> int:
    """The most tool activities scheduled and not yet closed at any point of a history."""
    names, pending, most = {}, set(), 0
    for e in history.events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            names[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
            if names[e.event_id] in TOOL_ACTIVITIES:
                pending.add(e.event_id)
                most = max(most, len(pending))
        for closed in ("completed", "failed", "timed_out", "canceled"):
            attributes = f"activity_task_{closed}_event_attributes"
            if e.HasField(attributes):
                pending.discard(getattr(e, attributes).scheduled_event_id)
    return most


def researchers_answered(history, steps: int) -> bool:
    """Whether the workflow has acted on the first reply of each of ``steps``
    researchers (a workflow task completed after the last of them)."""
    chats, answered, acted = {}, 0, False
    for e in history.events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            attributes = e.activity_task_scheduled_event_attributes
            if attributes.activity_type.name == "chat":
                chats[e.event_id] = json.loads(attributes.input.payloads[0].data)["role"]
        elif e.HasField("activity_task_completed_event_attributes"):
            if chats.get(e.activity_task_completed_event_attributes.scheduled_event_id) == "researcher":
                answered, acted = answered + 1, False
        elif e.HasField("workflow_task_completed_event_attributes"):
            acted = True
    return answered >= steps and acted


async def test_parallel_steps_keep_the_tool_activities_in_flight_bounded(
    temporal_client, task_queue, worker, llm, script, tavily
):
    """Four research steps side by side, each asking 16 searches in its first
    turn: 64 wanted at once, at most MAX_TOOLS_IN_FLIGHT pending. The searches
    are held until the workflow has acted on all four turns, so without the
    bound all 64 would be pending."""
    steps = [f"Research angle {n}" for n in range(4)]
    script.steps = [(title, "research") for title in steps]
    normal, search, released = script.researcher, tavily.handler, threading.Event()

    def researcher(request):
        if not tool_messages(request):
            step = next(t for t in steps if t in request["messages"][1]["content"])
            return Reply(tool_calls=[("web_search", {"query": f"{step} {i}"}) for i in range(16)])
        return normal(request)

    def held(query, max_results):
        if query.startswith("Research angle"):
            released.wait(30)
        return search(query, max_results)

    script.researcher, tavily.handler = researcher, held
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True, max_step_num=4)
    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            while not researchers_answered(await handle.fetch_history(), len(steps)):
                await asyncio.sleep(0.2)
    finally:
        released.set()
    result = await finish(handle)
    assert result.status == "completed" and FACT in result.final_report
    assert most_tools_pending(await handle.fetch_history()) == MAX_TOOLS_IN_FLIGHT
    assert sorted(r["query"] for r in tavily.requests if r["query"].startswith("Research angle")) == sorted(
        f"{step} {i}" for step in steps for i in range(16)
    )  # every search ran, once
    assert [len(answers(r)) for r in llm.calls("researcher") if turns_of(r) == 1] == [16] * len(steps)


def turns_of(request: dict) -> int:
    return sum(1 for m in request["messages"] if m["role"] == "assistant" and m.get("tool_calls"))


# --- 5. deep nesting -------------------------------------------------------------------------


async def test_deeply_nested_plan_and_handoff_are_refused_and_asked_again(
    temporal_client, task_queue, worker, llm, script
):
    normal_planner, asked = script.planner, []

    def deep(bracket: str, n: int) -> str:
        """``n`` brackets spaced by the Thue-Morse sequence: deep, never a loop
        (no run repeats thrice), so the nesting limit is what refuses it."""
        return "".join(bracket + " " * (bin(k).count("1") % 2) for k in range(n))

    def planner(request):
        asked.append(request)
        return deep("[", 1000) if len(asked) == 1 else normal_planner(request)

    script.coordinator = lambda request: Reply(tool_calls=[("handoff_to_planner", deep("{", 30000))])
    script.planner = planner
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finish(handle)
    assert result.status == "completed" and FACT in result.final_report
    assert "nested more than" in asked[1]["messages"][-1]["content"]


# --- 6. tool-call ids that are null or repeated ---------------------------------------------


def raw_completion(message: dict) -> Reply:
    return Reply(
        body=json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
            }
        )
    )


async def test_tool_calls_with_null_or_repeated_ids_are_answered(temporal_client, task_queue, worker, llm, script):
    normal, turns = script.researcher, []

    def researcher(request):
        turns.append(request)
        if len(turns) == 1:
            call = {"type": "function", "function": {"name": "web_search", "arguments": '{"query": "lighthouse"}'}}
            return raw_completion(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": None, **call}, {"id": "a", **call}, {"id": "a", **call}],
                }
            )
        return normal(request)

    script.researcher = researcher
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finish(handle)
    assert result.status == "completed" and FACT in result.final_report
    assert len(answers(turns[1])) == 3  # the scripted provider rejects any call left unanswered


# --- 7. a literal <think> in the report ---------------------------------------------------------


async def test_a_report_that_mentions_think_keeps_everything_after_it(temporal_client, task_queue, worker, llm, script):
    normal = script.reporter
    script.reporter = lambda request: "Models may emit a <think> tag. " + normal(request) + "\nLAST LINE"
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finish(handle)
    assert result.final_report.startswith("Models may emit a <think> tag.")
    assert "LAST LINE" in result.final_report and FACT in result.final_report


# --- 8. empty replies ------------------------------------------------------------------------------


async def test_an_empty_coordinator_reply_is_asked_again_once(temporal_client, task_queue, worker, llm, script):
    normal, asked = script.coordinator, []

    def coordinator(request):
        asked.append(request)
        return "" if len(asked) == 1 else normal(request)

    script.coordinator = coordinator
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finish(handle)
    assert result.status == "completed" and len(asked) == 2


async def test_empty_replies_twice_fail_the_run_clearly(temporal_client, task_queue, worker, llm, script):
    script.coordinator = lambda request: "   "
    handle = await start(temporal_client, task_queue, QUESTION, enable_clarification=True)
    with pytest.raises(WorkflowFailureError) as failure:
        await finish(handle)
    assert "coordinator model returned an empty reply twice" in str(failure.value.cause)
    status = await handle.query("status", result_type=RunStatus)
    assert status.phase == "failed" and status.pending_question is None  # never asked the user an empty question


async def test_an_empty_report_is_asked_again(temporal_client, task_queue, worker, llm, script):
    normal, asked = script.reporter, []

    def reporter(request):
        asked.append(request)
        return "" if len(asked) == 1 else normal(request)

    script.reporter = reporter
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finish(handle)
    assert result.status == "completed" and FACT in result.final_report and len(asked) == 2


# --- 9. plans in other shapes -----------------------------------------------------------------------


async def test_a_bare_list_of_steps_without_types_or_titles_becomes_a_plan(
    temporal_client, task_queue, worker, llm, script
):
    script.planner = lambda request: json.dumps(
        [
            {"need_search": True, "description": "Find the lighthouse fact", "title": ""},
            {"need_search": False, "title": "Weigh the findings", "description": "think"},
        ]
    )
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finish(handle)
    assert result.status == "completed" and FACT in result.final_report
    assert [s.step_type for s in result.plan.steps] == ["research", "analysis"]
    assert result.plan.steps[0].title == "Find the lighthouse fact" and result.plan.title
    assert len(llm.calls("analyst")) == 1 and not llm.calls("coder")


async def test_steps_cut_beyond_the_limit_are_named(temporal_client, task_queue, worker, llm, script):
    script.steps = [(f"Step {i}", "research") for i in range(5)]
    handle = await start(temporal_client, task_queue, QUESTION, max_step_num=3)
    status = await wait_for_phase(handle, "awaiting_review")
    assert status.steps_cut == ["Step 3", "Step 4"] and len(status.plan.steps) == 3
    assert "at most 3" in llm.calls("planner")[0]["messages"][0]["content"]  # the limit is in the prompt
    await handle.execute_update("submit_review", "[EDIT_PLAN] add a step on costs", result_type=str)
    await wait_for_phase(handle, "awaiting_review", plan_version=2)
    assert "at most 3 steps" in llm.calls("planner")[-1]["messages"][-1]["content"]
    await handle.cancel()


# --- 23. a provider error that echoes the key ------------------------------------------------------


async def test_a_provider_error_echoing_the_key_does_not_leak_it(temporal_client, task_queue, worker, llm, script):
    script.coordinator = lambda request: Reply(
        status=400, content="Invalid request: header Authorization: Bearer test-openai-key is malformed"
    )
    handle = await start(temporal_client, task_queue, QUESTION)
    with pytest.raises(WorkflowFailureError) as failure:
        await finish(handle)
    message = str(failure.value.cause)
    assert "HTTP 400" in message and "test-openai-key" not in message
    history = (await handle.fetch_history()).to_json()
    assert "test-openai-key" not in history


# --- 24. a second workflow argument of the wrong shape ---------------------------------------------


async def test_a_second_argument_of_the_wrong_shape_fails_the_run_clearly(temporal_client, task_queue, worker):
    handle = await temporal_client.start_workflow(
        "DeepResearch", args=[{"question": QUESTION}, {"not": "a state"}], id=f"bad-{task_queue}", task_queue=task_queue
    )
    with pytest.raises(WorkflowFailureError) as failure:
        await finish(handle)
    assert "second workflow argument" in str(failure.value.cause)


# --- 25. a review names the plan it approves ----------------------------------------------------------


async def test_a_review_of_a_plan_that_changed_is_rejected(
    temporal_client, task_queue, worker, worker_env, llm, script
):
    handle = await start(temporal_client, task_queue, QUESTION)
    seen = await wait_for_phase(handle, "awaiting_review")
    assert seen.plan_version == 1
    await handle.execute_update("submit_review", args=["[EDIT_PLAN] add a step on costs", 1], result_type=str)
    await wait_for_phase(handle, "awaiting_review", plan_version=2)
    with pytest.raises(WorkflowUpdateFailedError) as stale:  # the other reviewer still saw version 1
        await handle.execute_update("submit_review", args=["[ACCEPTED]", 1], result_type=str)
    assert "version 1" in str(stale.value.cause) and "version 2" in str(stale.value.cause)
    # The command line: status shows the version and hints the review that names it; a stale one is refused.
    cli = [str(Path(sys.executable).parent / "deepresearch")]
    run = functools.partial(subprocess.run, env=worker_env, capture_output=True, text=True, timeout=60)
    shown = await asyncio.to_thread(run, [*cli, "status", handle.id])  # the worker answers in this event loop
    assert "plan version 2" in shown.stdout and f"review {handle.id} --plan-version 2 --accept" in shown.stdout
    refused = await asyncio.to_thread(run, [*cli, "review", handle.id, "--plan-version", "1", "--accept"])
    assert refused.returncode == 1 and "version 2" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert await handle.execute_update("submit_review", args=["[ACCEPTED]", 2], result_type=str) == "plan accepted"
    result = await finish(handle)
    assert result.status == "completed" and any(s.title.startswith("Edited") for s in result.plan.steps)


# --- cancel and budget ----------------------------------------------------------------------------------


async def test_cancel_ends_a_running_run_with_a_partial_report(temporal_client, task_queue, worker, llm, script):
    handle = await start(temporal_client, task_queue, QUESTION)
    await wait_for_phase(handle, "awaiting_review")
    await handle.cancel()
    result = await finish(handle)
    assert result.status == "cancelled" and "partial" in result.final_report.lower()
    assert len(llm.calls("reporter")) == 1
    assert (await handle.query("status", result_type=RunStatus)).phase == "cancelled"
    await keep_history(handle, "cancelled_phase")  # tests/histories/cancelled.json: recorded before the patch


async def test_a_token_budget_stops_research_and_reports(temporal_client, task_queue, worker, llm, script):
    script.steps = [("Find the lighthouse fact", "research"), ("Compute the sum of squares", "processing")]
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True, token_budget=1)
    result = await finish(handle)
    assert result.status == "completed" and result.budget_exhausted
    assert not llm.calls("researcher") and not llm.calls("coder")  # no research turn started
    assert len(llm.calls("reporter")) == 1 and "partial" in result.final_report.lower()
