"""A review that arrives as a step's reading ends (worker.one_batch).

A worker that replays a run without its cache can be handed an update in the
activation of an earlier workflow task, beside that task's activity results,
while a replay from the history hands it over in its own task. With each
activation's jobs applied in one batch, both give the run the same commands;
before, the run could stop on a nondeterminism error (7 of 125 scripted
reviews sent the moment the plan waited; docs/changing-workflows.md).

The test runs a review after the plan's reading ended, on the real worker and
dev server, then replays its history twice: as it was, and as it would be had
the review come beside the reading's last result. Both replay; the second,
marked as recorded before the worker applied jobs in one batch, does not.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from infra.converter import data_converter
from testkit.runs import finished, polled, start, wait_for_phase
from worker import one_batch
from workflows.deep_research import DeepResearch

QUESTION = "Tell me about Lantern Rock"
ONE_BATCH = 2  # the SDK's PROCESS_WORKFLOW_ACTIVATION_JOBS_AS_SINGLE_BATCH, as histories record it


def _type(event: dict) -> str:
    return event["eventType"].removeprefix("EVENT_TYPE_")


def _read(history) -> bool:
    """The plan's reading has ended (its ranking answered) and the run is idle."""
    names = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    ranked = any(
        names.get(e.activity_task_completed_event_attributes.scheduled_event_id) == "rank_evidence"
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    )
    return ranked and history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED


def beside_the_reading(history: dict) -> dict:
    """The history had the review come in the workflow task that took the
    reading's last result: the review's own task (scheduled, started,
    completed) taken out, the events after it renumbered."""
    events = history["events"]
    accepted = next(n for n, e in enumerate(events) if _type(e) == "WORKFLOW_EXECUTION_UPDATE_ACCEPTED")
    own, before = events[accepted - 3 : accepted], events[accepted - 4]
    assert [_type(e) for e in own] == ["WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_COMPLETED"]
    assert _type(before) == "WORKFLOW_TASK_COMPLETED"  # the reading's last result took a task with no command
    gone = {int(e["eventId"]) for e in own}
    into = int(before["eventId"])
    last = max(gone)

    def renumbered(value: int) -> int:
        return into if value in gone else value - len(gone) if value > last else value

    def walk(node):
        if isinstance(node, dict):
            return {
                k: (str(renumbered(int(v))) if k.endswith("EventId") or k == "eventId" else walk(v))
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    merged = copy.deepcopy(history)
    merged["events"] = [walk(e) for e in events if int(e["eventId"]) not in gone]
    return merged


def recorded_before(history: dict) -> dict:
    """The history as a worker without one-batch activations records it."""
    earlier = copy.deepcopy(history)
    for event in earlier["events"]:
        meta = event.get("workflowTaskCompletedEventAttributes", {}).get("sdkMetadata", {})
        if "langUsedFlags" in meta:
            meta["langUsedFlags"] = [f for f in meta["langUsedFlags"] if f != ONE_BATCH]
    return earlier


async def replayed(history: dict, tmp_path: Path) -> Exception | None:
    replayer = Replayer(workflows=[DeepResearch], data_converter=data_converter(tmp_path))
    run = WorkflowHistory.from_json("review", json.dumps(history))
    return (await replayer.replay_workflow(run, raise_on_replay_failure=False)).replay_failure


async def test_a_review_beside_the_reading_gives_the_commands_it_gives_on_its_own(
    temporal_client, task_queue, worker, script, tmp_path
):
    handle = await start(temporal_client, task_queue, QUESTION)
    await wait_for_phase(handle, "awaiting_review")
    assert _read(await polled(handle.fetch_history, _read))  # the steps' reading ended while the plan waited
    await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)
    assert (await finished(handle)).status == "completed"
    history = json.loads((await handle.fetch_history()).to_json())

    first = next(e for e in history["events"] if _type(e) == "WORKFLOW_TASK_COMPLETED")
    assert ONE_BATCH in first["workflowTaskCompletedEventAttributes"]["sdkMetadata"]["langUsedFlags"]
    merged = beside_the_reading(history)
    assert await replayed(history, tmp_path) is None
    assert await replayed(merged, tmp_path) is None
    failure = await replayed(recorded_before(merged), tmp_path)  # what the worker did before: another order
    assert failure is not None and "Nondeterminism" in str(failure)


def test_a_worker_on_an_sdk_without_one_batch_activations_refuses_to_start():
    with pytest.raises(RuntimeError, match="single-batch"):
        one_batch(object())  # type: ignore[arg-type]
