"""Per-user limits, kept by the run itself (not only by the desk): at most
``DEEPRESEARCH_USER_MAX_RUNS`` runs of one owner at a time, and at most
``DEEPRESEARCH_USER_DAILY_TOKENS`` tokens a day (UTC) across the owner's
runs. Both are the worker's settings, off by default.

A run with an owner asks the ``owner_usage`` activity (activities/owners.py,
over Temporal's visibility) before its coordinator:

- too many of the owner's runs going (started before it; a run waiting for
  review counts): it waits, looking again after 15 s, then twice as long each
  time up to 5 minutes, the oldest waiting run first;
- the day's tokens spent: it waits for the next day (00:00 UTC);

``status`` says why it waits (``owner_wait``). Once going, what the daily
budget leaves it (the budget less the owner's other runs' tokens of the day)
bounds it as ``--token-budget`` does: no new research turn starts past it,
and the report is written from what was found (``Box.out_of_budget``).
That allowance is looked at again before each batch of research steps.

Runs without an owner (recorded before owners, evaluation suites) never
ask. The activity failing (Temporal unreachable from the worker after its
retries) lets the run go on with a warning rather than fail it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():  # side-effect free
    from workflows.models import ResearchInput
    from workflows.ownership import OwnerQuery, OwnerUsage, allowance, start_wait
    from workflows.state import RunState

PATCH = "owner-limits"
OWNER_USAGE_CALL = dict(
    start_to_close_timeout=timedelta(seconds=60),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=20), maximum_attempts=5
    ),
)


class OwnerLimits:
    def __init__(self, request: ResearchInput, state: RunState, emit: Callable[..., None]) -> None:
        self.request, self.state, self.emit = request, state, emit
        self.waiting: str | None = None  # why the run has not started (the status query's owner_wait)
        self.warned = False

    def applies(self) -> bool:
        return bool(self.request.owner) and workflow.patched(PATCH)

    async def before_start(self) -> None:
        """Waits while the owner's limits hold the run back; then sets what the
        daily budget leaves it."""
        if not self.applies():
            return
        looks = 0
        while True:
            usage = await self.usage()
            wait = start_wait(usage, self.request.owner or "", workflow.now(), looks)
            if wait is None:
                break
            seconds, why = wait
            if why != self.waiting:
                self.emit("notice", f"waiting: {why}")
            self.waiting, looks = why, looks + 1
            workflow.set_current_details(f"Waiting: {why}")
            await workflow.sleep(timedelta(seconds=seconds))
        if self.waiting:
            self.emit("notice", "the owner's limits allow the run now: it starts")
        self.waiting = None
        self.state.owner_allowance = allowance(usage)

    async def refresh(self) -> None:
        """What the daily budget leaves the run, looked at again (before a batch of steps)."""
        if self.state.owner_allowance is None or not self.applies():
            return
        usage = await self.usage()
        self.state.owner_allowance = allowance(usage)

    async def usage(self) -> OwnerUsage:
        query = OwnerQuery(owner=self.request.owner or "", workflow_id=workflow.info().workflow_id)
        try:
            return await workflow.execute_activity(
                "owner_usage", query, result_type=OwnerUsage, summary=f"limits of {query.owner}", **OWNER_USAGE_CALL
            )
        except ActivityError as err:
            if is_cancelled_exception(err):
                raise
            if not self.warned:
                self.warned = True
                self.emit("notice", f"the per-user limits could not be checked ({err.cause or err}): the run goes on")
            return OwnerUsage(checked=False, problem=str(err.cause or err)[:200])
