"""Following a run (`watch`, `run`, `attach`) leaves its history as it is:
the progress stream is read by query, so no stream-poll updates appear
between the run's model and tool calls in the Temporal UI (issue 20). Its
review hint names the plan version, and a version that does not exist is
called that."""

from __future__ import annotations

import asyncio
import base64
import sys
from pathlib import Path

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter as data_converter
from temporalio.contrib.workflow_streams import PollResult
from temporalio.contrib.workflow_streams._types import _WorkflowStreamWireItem
from temporalio.service import RPCError, RPCStatusCode

from client.follow import READS_AFTER_END, progress_events
from testkit.runs import start, wait_for_phase
from workflows.models import ProgressEvent

CLI = Path(sys.executable).parent / "deepresearch"
QUESTION = "Tell me about the Lantern Rock lighthouse"


async def test_watching_a_run_adds_nothing_to_its_history(temporal_client, task_queue, worker_env, worker):
    handle = await start(temporal_client, task_queue, QUESTION)
    watch = await asyncio.create_subprocess_exec(
        str(CLI), "watch", handle.id, env=worker_env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    seen: list[str] = []
    async with asyncio.timeout(60):  # watch follows the open run up to its review
        while not any("--accept" in line for line in seen):  # the hint after "waiting for review"
            seen.append((await watch.stdout.readline()).decode())
    await wait_for_phase(handle, "awaiting_review")
    # watch's hint names the plan version, as `status` does
    assert any(f"review {handle.id} --plan-version 1 --accept" in line for line in seen), seen
    # a version that does not exist is called that, not "changed since you saw it"
    wrong = await asyncio.create_subprocess_exec(
        str(CLI), "review", handle.id, "--plan-version", "2", "--accept", env=worker_env, stderr=asyncio.subprocess.PIPE
    )
    _, said = await asyncio.wait_for(wrong.communicate(), 60)
    assert wrong.returncode == 1 and said.decode().strip().splitlines() == [
        "error: review rejected: there is no plan version 2 (the latest is version 1)"
    ], said
    await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)
    out, err = await asyncio.wait_for(watch.communicate(), 120)
    lines = seen + out.decode().splitlines()
    assert watch.returncode == 0, err.decode()
    assert any(line.startswith("run finished: completed") for line in lines), lines
    assert any(line.startswith("  crawl: ") for line in lines), lines  # events after the review came too
    history = await handle.fetch_history()
    updates = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in history.events
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    ]
    assert updates == ["submit_review"], updates


class _EndedRun:
    """A Temporal handle, as the SDK's, of a run that ends at once, whose
    stream query after the end fails ``fails`` times first (a busy worker
    replaying the whole run to answer, past the query's deadline), then
    answers with the run's one event."""

    def __init__(self, fails: int) -> None:
        self.fails = fails
        self.ended = False
        self.reads_after_end = 0

    async def result(self):
        self.ended = True

    async def query(self, *args, **kwargs):
        if not self.ended:
            return PollResult(items=[], next_offset=0)
        self.reads_after_end += 1
        if self.reads_after_end <= self.fails:
            raise RPCError("query timed out", RPCStatusCode.DEADLINE_EXCEEDED, b"")
        event = ProgressEvent(kind="tool_call", text="crawl: https://a.example/")
        payload = data_converter.payload_converter.to_payloads([event])[0]
        item = _WorkflowStreamWireItem(topic="progress", data=base64.b64encode(payload.SerializeToString()).decode())
        return PollResult(items=[item], next_offset=1)


class _Client:
    data_converter = data_converter

    def __init__(self, handle: _EndedRun) -> None:
        self.handle = handle

    def get_workflow_handle(self, workflow_id: str) -> _EndedRun:
        return self.handle


async def test_the_last_read_after_the_end_is_tried_again_when_a_query_fails():
    """CI27 and CI28: `run` completed and showed none of its tool calls; the
    one read after the end had failed. It is tried again, and gives up (it
    raises, and `run` says so) only after ``READS_AFTER_END`` more."""
    handle = _EndedRun(fails=READS_AFTER_END)
    events = [e async for _, e in progress_events(_Client(handle), "run-1", every=0.01)]
    assert [e.text for e in events] == ["crawl: https://a.example/"] and handle.reads_after_end == READS_AFTER_END + 1
    with pytest.raises(RPCError):
        _ = [e async for _, e in progress_events(_Client(_EndedRun(fails=READS_AFTER_END + 1)), "run-1", every=0.01)]
