"""Calls to a provider that wait out its rate limit instead of failing.

A 429 (or an overloaded 503/529 with ``Retry-After``) ends the activity at
once with ``ModelRateLimited``, its details the seconds the provider asked
for (activities/llm.py). ``ProviderWaits.call`` then waits with a durable
timer, jittered, and calls again, for as long as the run's own deadlines
allow. So a rate limit:

- never fails a run, and never counts against the attempts that bound real
  errors (those stay the activity's retry policy);
- costs no tokens and is counted apart in the usage (``rate_limited`` waits,
  ``rate_limited_seconds``);
- shows: ``since()`` says since when a call has been waiting, for the status
  query, and the run's progress stream says so (at most once a minute).

Model calls go to a task queue of their own, ``<task queue>-model``
(``model_queue``): the server paces its workers to ``DEEPRESEARCH_MODEL_RPS``
across the fleet (worker.py), and research steps, searches and crawls never
queue behind the model limit.

Each wait adds about ten events to the history (the failed attempt, a timer,
two workflow tasks); a fleet paced below the account's limit sees few. So the
waits of one call grow whatever the provider asks (``wait_seconds``): at
least 1 s doubled per wait, to a minute, and at least ``LONGEST_WAIT`` once
the call has waited ``PATIENT`` seconds. A provider that answers every call
``Retry-After: 0`` (or a date in the past) costs a run about 500 events in
its first hour of waiting and about 50 an hour after, not 11 a second.

A cancelled run's partial report waits only within its grace
(``ProviderWaits.deadline``, workflows/cancelling.py).

Recorded runs replay as they ran: ``PATCH``, ``BACKOFF_PATCH``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

PATCH = "wait-on-rate-limits"  # model calls on their own queue, rate limits waited out
BACKOFF_PATCH = "back-off-every-wait"  # every wait of a call at least the backoff, even "now"
CANCEL_PATCH = "cancel-ends-in-bounded-time"  # a cancelled run waits no more (workflows/cancelling.py)
RATE_LIMITED = "ModelRateLimited"  # the activity's error type for a provider's rate limit
MODEL_QUEUE_SUFFIX = "-model"
LONGEST_WAIT = 600.0  # seconds in one wait; a longer Retry-After is waited in turns
FIRST_BACKOFF = 1.0  # seconds, when the provider did not say: doubled per wait of the same call
LONGEST_BACKOFF = 60.0
PATIENT = 1800.0  # seconds one call has waited, after which it asks again at most every LONGEST_WAIT
NOTICE_EVERY = timedelta(minutes=1)

T = TypeVar("T")


class WaitCounts(Protocol):
    """What counts the waits: ``Usage`` and ``SpeechUsage`` (workflows/models.py)."""

    rate_limited: int
    rate_limited_seconds: float


def model_queue(task_queue: str) -> str:
    """The task queue of the model calls of runs on ``task_queue``."""
    return task_queue + MODEL_QUEUE_SUFFIX


def waiting_options(options: dict[str, Any]) -> dict[str, Any]:
    """Activity ``options`` whose retry policy leaves rate limits to the
    workflow: ``ModelRateLimited`` ends the activity, the workflow waits."""
    policy: RetryPolicy = options["retry_policy"]
    kept = list(policy.non_retryable_error_types or [])
    return {**options, "retry_policy": dataclasses.replace(policy, non_retryable_error_types=[*kept, RATE_LIMITED])}


def asked_seconds(err: BaseException) -> tuple[bool, float | None]:
    """(whether ``err`` is a provider's rate limit, the seconds it asked to
    wait or None when it did not say or that does not read)."""
    cause = err.cause if isinstance(err, ActivityError) else None
    if not (isinstance(cause, ApplicationError) and cause.type == RATE_LIMITED):
        return False, None
    details = list(cause.details or ())
    asked = details[0] if details else None
    if isinstance(asked, bool) or not isinstance(asked, int | float) or not 0 <= asked < float("inf"):
        return True, None
    return True, float(asked)


def wait_seconds(asked: float | None, waits: int, draw: float, waited: float | None = None) -> float:
    """How long a call waits before it asks again, ``waits`` being its
    earlier waits and ``waited`` the seconds they took: what the provider
    asked (``Retry-After``) but at least 1 s doubled per earlier wait (to
    60 s), and at least ``LONGEST_WAIT`` once the call has waited ``PATIENT``
    seconds; at most ``LONGEST_WAIT``; plus up to half of that at random,
    ``draw`` in [0, 1), so the runs told the same do not all come back at
    once. So "now" (``Retry-After: 0``, a date past) is no loop, and one
    call's waits add a bounded number of events an hour, whatever is asked.

    ``waited`` None is the rule of runs recorded before ``BACKOFF_PATCH``:
    what was asked, else the backoff; plus at least a quarter second."""
    backoff = min(FIRST_BACKOFF * 2 ** min(waits, 16), LONGEST_BACKOFF)
    if waited is None:
        base = asked if asked is not None else backoff
    else:
        floor = LONGEST_WAIT if waited >= PATIENT else backoff
        base = max(asked or 0.0, floor)
    base = min(max(base, 0.0), LONGEST_WAIT)
    return base + max(base, 0.5) * 0.5 * min(max(draw, 0.0), 1.0)


def run_deadline() -> datetime | None:
    """When Temporal ends this run whatever it is doing (its execution or
    run timeout), or None when it has none."""
    info = workflow.info()
    ends = []
    if info.execution_timeout:
        ends.append(info.workflow_start_time + info.execution_timeout)
    if info.run_timeout:
        ends.append(info.start_time + info.run_timeout)
    return min(ends) if ends else None


class ProviderWaits:
    """The waits of one workflow's calls on a provider's rate limit.

    ``usage`` gives the object that counts them (the run's ``Usage``, a side
    output's ``SpeechUsage``); ``notice`` is told, at most once a minute,
    when a call starts waiting (the progress stream)."""

    def __init__(self, usage: Callable[[], WaitCounts], notice: Callable[[str], None] = lambda _: None) -> None:
        self.usage = usage
        self.notice = notice
        # No wait ends after this (a cancelled run's grace, workflows/cancelling.py):
        # a rate limit then fails the call, as the run's own deadline does.
        self.deadline: datetime | None = None
        self._waiting: dict[int, datetime] = {}  # call -> since when it waits
        self._calls = itertools.count()
        self._noticed: datetime | None = None

    def since(self) -> str | None:
        """Since when (ISO 8601, UTC) a call has been waiting on the
        provider's limit; None when none waits."""
        return min(self._waiting.values()).isoformat(timespec="seconds") if self._waiting else None

    async def call(
        self,
        activity: str,
        arg: Any,
        *,
        result_type: type[T],
        options: dict[str, Any],
        summary: str | None = None,
        task_queue: Callable[[str], str] | None = None,
    ) -> T:
        """The activity, called again after each rate limit; any other
        failure raises as before. ``task_queue`` maps the workflow's queue to
        the activity's (default: the same). Runs recorded before this
        (``PATCH``) call the activity once, on the workflow's queue."""
        if not workflow.patched(PATCH):
            return await workflow.execute_activity(activity, arg, result_type=result_type, summary=summary, **options)
        queue = task_queue(workflow.info().task_queue) if task_queue else None
        options = waiting_options(options)
        me, waits = next(self._calls), 0
        try:
            while True:
                try:
                    return await workflow.execute_activity(
                        activity, arg, result_type=result_type, summary=summary, task_queue=queue, **options
                    )
                except ActivityError as err:
                    limited, asked = asked_seconds(err)
                    if not limited:
                        raise
                    self._unless_cancelled()
                    since = self._waiting.setdefault(me, workflow.now())
                    waited = (workflow.now() - since).total_seconds() if workflow.patched(BACKOFF_PATCH) else None
                    seconds = wait_seconds(asked, waits, workflow.random().random(), waited)
                    ends = [d for d in (run_deadline(), self.deadline) if d is not None]
                    if ends and workflow.now() + timedelta(seconds=seconds) >= min(ends):
                        raise  # the run ends (or its grace does) before the wait would: say why
                    await self._wait(seconds, str(err.cause))
                    self._unless_cancelled()
                    waits += 1
        finally:
            self._waiting.pop(me, None)

    def _unless_cancelled(self) -> None:
        """Raise the run's cancellation when it was cancelled and the call
        did not hear of it: Temporal's cancel came as the call's 429 (or the
        wait's timer) arrived, and the SDK kept that outcome instead. The
        run then writes its partial report, whose own calls wait within the
        grace (``deadline``). Runs recorded before: ``CANCEL_PATCH``."""
        if self.deadline is None and workflow.cancellation_reason() is not None and workflow.patched(CANCEL_PATCH):
            raise asyncio.CancelledError("the run was cancelled")

    async def _wait(self, seconds: float, why: str) -> None:
        now = workflow.now()
        if self._noticed is None or now - self._noticed >= NOTICE_EVERY:
            self._noticed = now
            self.notice(f"waiting on the model provider's rate limit ({why[:200]}): asking again in {seconds:.1f} s")
        counts = self.usage()
        counts.rate_limited += 1
        try:
            await workflow.sleep(seconds)
        finally:
            waited = (workflow.now() - now).total_seconds()
            counts.rate_limited_seconds = round(counts.rate_limited_seconds + waited, 3)
