"""The DeepResearch workflow on a real dev server with a real in-process
worker; the model and search services are scripted servers on loopback.

The worker caches no workflows, so every workflow task replays the whole
history: non-determinism fails these tests.
"""

from __future__ import annotations

import json

import pytest
from temporalio.client import WorkflowUpdateFailedError

from testkit.research_script import EXPECTED_SUM, FACT
from testkit.runs import keep_history, start, wait_for_phase
from workflows.models import PHASE_ATTRIBUTE, ProgressEvent, RunStatus


async def test_full_run_searches_crawls_computes_and_reports(temporal_client, task_queue, worker, llm, pages):
    handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "happy_path")

    assert result.status == "completed"
    assert FACT in result.final_report  # only in the crawled page's body
    assert f"SUM_OF_SQUARES={EXPECTED_SUM}" in result.final_report  # only by running the code
    assert [c.url for c in result.citations] == [pages.url("/lighthouse")]
    assert result.plan_iterations == 1
    assert all(s.execution_res for s in result.plan.steps)
    usage = result.usage
    # background investigation, the step's evidence and its lead (a name on the page), the researcher's own
    assert usage.searches == 4
    assert (usage.crawls, usage.code_runs) == (1, 1)
    assert usage.llm_calls == len(llm.requests) and usage.prompt_tokens > 0
    assert pages.hits == ["/lighthouse"]


async def test_greeting_is_answered_directly_without_planning(temporal_client, task_queue, worker, llm):
    handle = await start(temporal_client, task_queue, "Hello there!")
    result = await handle.result()
    await keep_history(handle, "greeting")
    assert result.status == "answered_directly"
    assert "research assistant" in result.final_report
    assert [r["_role"] for r in llm.requests] == ["coordinator"]


async def test_review_rejects_bad_feedback_then_takes_edit_and_accept(temporal_client, task_queue, worker, llm):
    handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock")
    status = await wait_for_phase(handle, "awaiting_review")
    assert status.review_pending and len(status.steps) == 2

    with pytest.raises(WorkflowUpdateFailedError) as rejected:
        await handle.execute_update("submit_review", "looks fine to me", result_type=str)
    assert "[ACCEPTED]" in str(rejected.value.cause)
    assert (await handle.query("status", result_type=RunStatus)).phase == "awaiting_review"

    reply = await handle.execute_update("submit_review", "[EDIT_PLAN] add the keeper's name", result_type=str)
    assert reply == "plan edit requested"
    status = await wait_for_phase(handle, "awaiting_review", plan_version=2)
    assert "Edited: add the keeper's name" in [s.title for s in status.steps]

    await handle.execute_update("submit_review", "[accepted]", result_type=str)
    with pytest.raises(WorkflowUpdateFailedError) as late:
        await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)
    assert "no plan is waiting for review" in str(late.value.cause)
    result = await handle.result()
    await keep_history(handle, "edited_plan")
    assert result.status == "completed" and result.plan_iterations == 1
    assert [s.title for s in result.plan.steps][1] == "Edited: add the keeper's name"
    assert len(llm.calls("planner")) == 2  # the edit re-planned; acceptance did not


async def test_progress_stream_and_search_attributes(temporal_client, task_queue, worker):
    from temporalio.contrib.workflow_streams import WorkflowStreamClient

    handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
    await handle.result()
    stream = WorkflowStreamClient.create(temporal_client, handle.id)
    events = [item.data async for item in stream.subscribe("progress", result_type=ProgressEvent)]
    kinds = [e.kind for e in events]
    assert kinds[0] == "phase" and kinds[-1] == "finished"
    assert {"plan", "step_started", "step_finished", "tool_call"} <= set(kinds)
    assert any(e.kind == "tool_call" and e.text.startswith("crawl: ") for e in events)
    described = await handle.describe()
    assert described.typed_search_attributes.get(PHASE_ATTRIBUTE) == "completed"


async def test_broken_plan_is_recovered_by_asking_again(temporal_client, task_queue, worker, llm, script):
    replies = iter(["This is not JSON at all, sorry."])
    normal = script.planner
    script.planner = lambda request: next(replies, None) or normal(request)
    handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
    result = await handle.result()
    assert result.status == "completed"
    second_ask = llm.calls("planner")[1]
    assert "not a valid plan" in second_ask["messages"][-1]["content"]


async def test_plan_that_never_comes_ends_as_plan_failed(temporal_client, task_queue, worker, llm, script):
    # A planner that says something is researched from the question instead
    # (tests/test_weak_model.py); one that says nothing at all ends the run.
    script.planner = lambda request: ""
    handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock")
    result = await handle.result()
    await keep_history(handle, "plan_failed")
    assert result.status == "plan_failed"
    assert "did not produce a valid plan" in result.final_report
    assert len(llm.calls("planner")) == 2
    assert llm.calls("researcher") == [] and llm.calls("reporter") == []


async def test_a_run_is_started_with_only_the_options_the_user_set(temporal_client, task_queue):
    """So a newer CLI can start runs on workers of an older version, whose
    input model refuses fields it does not know: defaults are not sent."""
    handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock", max_step_num=2)
    history = await handle.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    sent = json.loads(started.input.payloads[0].data)
    assert sent == {"question": "Tell me about Lantern Rock", "max_step_num": 2}
    await handle.terminate("done")
