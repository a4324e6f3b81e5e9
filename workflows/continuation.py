"""Runs that build on runs: ``--continue-from ID`` and scheduled research.

A run that continues from an earlier one loads that run's report, findings and
sources once, at its start (the ``prior_run`` activity): the planner sees what
was found and plans only what is missing, the old sources stay citable, and
the reporter writes a report covering old and new that opens with a section
"What changed since <date>". A scheduled run builds on its schedule's last
completed run. Nothing from any other run reaches a run: only the run named,
or the schedule's own previous run.

What they are shown is built in ``workflows/prior.py``.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.prior import PriorRequest, PriorRun

PRIOR_RUN_CALL = dict(
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=RetryPolicy(maximum_attempts=5, non_retryable_error_types=["PriorRunUnusable"]),
)


async def load_prior(run_id: str | None, schedule: str | None) -> PriorRun | None:
    """The earlier run to build on (one activity), or None when there is none
    (a schedule's first run). A named run that cannot be built on fails the
    run with one line (the activity's ``PriorRunUnusable``)."""
    if not (run_id or schedule):
        return None
    request = PriorRequest(run_id=run_id, schedule=None if run_id else schedule, current_id=workflow.info().workflow_id)
    what = f"earlier run {run_id}" if run_id else f"schedule {schedule}: last completed run"
    return await workflow.execute_activity(
        "prior_run", request, result_type=PriorRun | None, summary=what, **PRIOR_RUN_CALL
    )
