"""Reading timings and sizes out of a run's Temporal history."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowHistory


def _t(event) -> float:
    return event.event_time.ToNanoseconds() / 1e9


@dataclass
class ActivitySpan:
    kind: str
    scheduled: float  # ActivityTaskScheduled
    started: float  # ActivityTaskStarted (the worker picked it up)
    closed: float  # ActivityTaskCompleted / Failed / TimedOut
    trigger: float  # WorkflowTaskScheduled of the task that scheduled it
    attempt: int
    wft_started: float = 0.0  # WorkflowTaskStarted of that task
    wft_completed: float = 0.0  # WorkflowTaskCompleted of that task

    @property
    def body(self) -> float:
        return self.closed - self.started

    @property
    def orchestration(self) -> float:
        """From the moment the workflow had something to react to (the
        workflow task that scheduled this activity became due) to the
        moment this activity is running on the worker."""
        return self.started - self.trigger


def gap_breakdown(spans: list[ActivitySpan]) -> dict[str, float]:
    """Medians (ms) of the three parts of the orchestration gap."""
    med = lambda values: round(statistics.median(values) * 1000, 2)  # noqa: E731
    return {
        "workflow_task_dispatch_ms": med([s.wft_started - s.trigger for s in spans]),
        "workflow_task_processing_ms": med([s.wft_completed - s.wft_started for s in spans]),
        "activity_dispatch_ms": med([s.started - s.wft_completed for s in spans]),
    }


def activity_spans(history: WorkflowHistory) -> list[ActivitySpan]:
    by_id = {e.event_id: e for e in history.events}
    spans: dict[int, ActivitySpan] = {}
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = e.activity_task_scheduled_event_attributes
            completed = by_id[a.workflow_task_completed_event_id]
            wft_scheduled = by_id[completed.workflow_task_completed_event_attributes.scheduled_event_id]
            wft_started = by_id[completed.workflow_task_completed_event_attributes.started_event_id]
            spans[e.event_id] = ActivitySpan(
                a.activity_type.name, _t(e), 0.0, 0.0, _t(wft_scheduled), 0, _t(wft_started), _t(completed)
            )
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            a = e.activity_task_started_event_attributes
            span = spans[a.scheduled_event_id]
            span.started, span.attempt = _t(e), a.attempt
        elif e.event_type in (
            EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
            EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
        ):
            attrs = (
                e.activity_task_completed_event_attributes
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
                else e.activity_task_failed_event_attributes
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
                else e.activity_task_timed_out_event_attributes
            )
            spans[attrs.scheduled_event_id].closed = _t(e)
    return sorted(spans.values(), key=lambda s: s.scheduled)


def server_duration(history: WorkflowHistory) -> float:
    events = history.events
    return _t(events[-1]) - _t(events[0])


def body_by_kind(spans: list[ActivitySpan]) -> dict[str, dict[str, float]]:
    """Median / max body time (s) per activity type."""
    groups: dict[str, list[float]] = defaultdict(list)
    for s in spans:
        groups[s.kind].append(s.body)
    return {
        kind: {"count": len(v), "median_s": round(statistics.median(v), 4), "max_s": round(max(v), 4)}
        for kind, v in sorted(groups.items())
    }


async def sizes(handle: WorkflowHandle) -> dict[str, int]:
    """History size four ways: the server's own count (headline), the sum of
    the events' protobuf sizes, the JSON export's length, and what external
    storage holds outside history."""
    history = await handle.fetch_history()
    info = (await handle.describe()).raw_description.workflow_execution_info
    return {
        "events": len(history.events),
        "server_history_size_bytes": info.history_size_bytes,
        "protobuf_bytes": sum(e.ByteSize() for e in history.events),
        "json_bytes": len(history.to_json().encode()),
        "external_payload_count": info.external_payload_count,
        "external_payload_bytes": info.external_payload_size_bytes,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)
