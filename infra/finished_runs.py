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
        state = described.status.name.lower() if described.status else "unknown"
        raise NoReport(f"run {run_id} has not completed (it is {state}): wait for its report first")
    result = await handle.result()
    if result.status not in ("completed", "cancelled") or not result.final_report.strip():
        raise NoReport(f"run {run_id} ended without a research report ({result.status})")
    return result
