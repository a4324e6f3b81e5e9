"""A cancelled run ends in bounded time, with a partial report.

`deepresearch cancel` cancels the workflow: the research stops, and the run
writes a report from what it found so far (workflows/deep_research.py). That
report's model calls could wait on the provider's rate limit for ever, so
once the run is cancelled its reporter has ``GRACE`` in all:

- a rate limit whose wait would end after the grace is not waited: the call
  fails at once (``ProviderWaits.deadline``, workflows/rate_limits.py);
- a reporter still writing when the grace ends is stopped;
- a second cancel while it writes (the signal ``CANCEL_AGAIN``, which
  `deepresearch cancel` and the desk send to a run whose cancel was already
  asked: Temporal records one cancel request per run) stops it at once.

A cancel that comes just as a model call's 429 arrives is not lost in it
(``ProviderWaits._unless_cancelled``; the same for the cut-short reporter:
it is cancelled again until it ends).

Then the report is the one the workflow writes itself from the findings and
the sources (workflows/fallback_report.py, no model call; the passages they
rest on come from two local activities on the run's own queue), saying why,
and the run ends ``cancelled``. Runs recorded before: ``PATCH``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from workflows.rate_limits import CANCEL_PATCH, ProviderWaits

PATCH = CANCEL_PATCH
GRACE = timedelta(minutes=2)  # a cancelled run's reporter, rate-limit waits included
CANCEL_AGAIN = "cancel_again"  # the signal of a second cancel
CUT_SHORT = "ReportCutShort"  # the error that makes report() write the report itself


class CancelGrace:
    """The time a cancelled run gives its reporter."""

    def __init__(self) -> None:
        self.until: datetime | None = None  # None: not cancelled (or recorded before PATCH)
        self.again = False
        self.waits: ProviderWaits | None = None

    def begin(self, waits: ProviderWaits) -> None:
        """The run was cancelled: its report has ``GRACE`` from now, and a
        second cancel ends it at once."""
        if not workflow.patched(PATCH):
            return
        self.until = waits.deadline = workflow.now() + GRACE
        self.waits = waits
        workflow.set_signal_handler(CANCEL_AGAIN, self._cancel_again)

    def _cancel_again(self, *_: Any) -> None:
        self.again = True

    async def bounded(self, writing: Coroutine[Any, Any, str]) -> str:
        """What ``writing`` (the reporter) returns or raises; once the run is
        cancelled, ``CUT_SHORT`` when the grace ends first or the run is
        cancelled again."""
        if self.until is None:
            return await writing
        task = asyncio.ensure_future(writing)
        left = (self.until - workflow.now()).total_seconds()
        with contextlib.suppress(asyncio.TimeoutError):
            await workflow.wait_condition(lambda: task.done() or self.again, timeout=max(left, 1.0))
        if task.done():
            return task.result()
        if self.waits:
            self.waits.deadline = workflow.now()  # no call waits on the provider any more
        while not task.done():
            # Its model call or wait is cancelled at once; but a cancel that comes as
            # the call ends is lost in its outcome (the SDK keeps it): cancel again.
            task.cancel()
            with contextlib.suppress(asyncio.TimeoutError):
                await workflow.wait_condition(task.done, timeout=1.0)
        with contextlib.suppress(asyncio.CancelledError, Exception):
            task.result()
        raise ApplicationError(cut_short_reason(self.again), type=CUT_SHORT, non_retryable=True)


def cut_short_reason(again: bool) -> str:
    """Why a cancelled run's report is not the model's (the report says it)."""
    if again:
        return "the run was cancelled again while its partial report was being written"
    minutes = GRACE.total_seconds() / 60
    return f"the run was cancelled and its reporter did not finish within {minutes:g} minutes"
