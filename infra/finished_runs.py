"""A research run that has finished with a report, read from Temporal: what
podcasts, slides, follow-up threads and runs that build on runs start from.
Shared by the CLI (``client/side_outputs.py``) and the ``prior_run`` activity
(``activities/earlier_runs.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from workflows.models import ResearchResult

if TYPE_CHECKING:
    from temporalio.client import Client


class NoReport(Exception):
    """The run named cannot be built on; the message is one line."""


async def finished_research(client: Client, run_id: str, namespace: str = "") -> ResearchResult:
    """The result of a research run that completed with a report (a cancelled
    run's partial report counts); ``NoReport`` when the run does not exist, is
    not a research run, has not completed, or ended without a report."""
    handle = client.get_workflow_handle(run_id, result_type=ResearchResult)
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise NoReport(f"no run with id {run_id}" + (f" in namespace {namespace}" if namespace else "")) from None
        raise
    if described.workflow_type != "DeepResearch":
        raise NoReport(f"{run_id} is a {described.workflow_type} workflow, not a research run")
    if described.status != WorkflowExecutionStatus.COMPLETED:
        raise NoReport(not_completed(run_id, described.status))
    result = await handle.result()
    if result.status not in ("completed", "cancelled") or not result.final_report.strip():
        raise NoReport(f"run {run_id} ended without a research report ({result.status})")
    return result


def not_completed(run_id: str, status: WorkflowExecutionStatus | None) -> str:
    """Why a run that has not completed cannot be built on: one still going
    will have its report; one that failed or was stopped never will."""
    from infra.errors import cli_name

    if status in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW):
        return f"run {run_id} is still running: wait for its report first (`{cli_name()} result {run_id}` waits for it)"
    ended = {
        WorkflowExecutionStatus.FAILED: "failed",
        WorkflowExecutionStatus.TIMED_OUT: "timed out",
        WorkflowExecutionStatus.TERMINATED: "was terminated",
        WorkflowExecutionStatus.CANCELED: "was cancelled before it could write a report",
    }.get(status, f"ended {status.name.lower() if status else 'without a result'}")  # type: ignore[union-attr]
    return (
        f"run {run_id} {ended}: it has no report and never will, so there is nothing to build on "
        f"(`{cli_name()} result {run_id}` says why); start a new run instead"
    )
