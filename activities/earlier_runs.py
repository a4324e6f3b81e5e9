"""``prior_run``: what an earlier research run found, for a run that builds on
it (``--continue-from ID``, a scheduled run, a follow-up thread).

It asks Temporal (the worker's own client) for the run's result: a named run
must have completed with a report; a schedule's previous run is the newest
completed run that the schedule started (Temporal's ``TemporalScheduledById``
search attribute, and started since the schedule was created: a schedule made
anew under a deleted one's name starts afresh) other than the asking one.
"""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING

from temporalio import activity
from temporalio.exceptions import ApplicationError

from infra.finished_runs import NoReport, finished_research
from workflows.models import ResearchResult
from workflows.prior import MAX_PRIOR_FINDINGS, MAX_PRIOR_REPORT, PriorRequest, PriorRun

if TYPE_CHECKING:
    from temporalio.client import Client

SCHEDULE_LOOKBACK = 20  # completed runs of a schedule looked at, newest first


def _not_usable(message: str) -> ApplicationError:
    return ApplicationError(message, type="PriorRunUnusable", non_retryable=True)


def prior_of(run_id: str, result: ResearchResult) -> PriorRun:
    findings = "\n\n".join(result.observations)
    return PriorRun(
        run_id=run_id,
        question=result.question,
        locale=result.locale,
        finished_at=result.finished_at or "",
        report=result.final_report[:MAX_PRIOR_REPORT],
        report_cut=len(result.final_report) > MAX_PRIOR_REPORT,
        findings=findings[:MAX_PRIOR_FINDINGS],
        citations=result.citations,
        pages=result.pages,
        searches=result.searches,
    )


class EarlierRuns:
    def __init__(self, client: Client) -> None:
        self.client = client

    @activity.defn(name="prior_run")
    async def prior_run(self, request: PriorRequest) -> PriorRun | None:
        if request.run_id:
            return await self._named(request.run_id)
        if request.schedule:
            return await self._last_of_schedule(request.schedule, request.current_id)
        return None

    async def _named(self, run_id: str) -> PriorRun:
        try:
            return prior_of(run_id, await finished_research(self.client, run_id))
        except NoReport as err:
            raise _not_usable(f"nothing to build on: {err}") from None

    async def _last_of_schedule(self, schedule: str, current_id: str) -> PriorRun | None:
        from temporalio.service import RPCError, RPCStatusCode

        try:  # only this schedule's runs: not those of an earlier schedule of the same name
            created = (await self.client.get_schedule_handle(schedule).describe()).info.created_at
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None  # deleted meanwhile: whose runs they were cannot be told
            raise
        name = schedule.replace("\\", "\\\\").replace("'", "\\'")
        since = created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        query = (
            f"WorkflowType = 'DeepResearch' AND TemporalScheduledById = '{name}' AND ExecutionStatus = 'Completed' "
            f"AND StartTime >= '{since}'"
        )
        seen = 0
        async for execution in self.client.list_workflows(query):
            if execution.id == current_id:
                continue
            seen += 1
            if seen > SCHEDULE_LOOKBACK:
                break
            handle = self.client.get_workflow_handle(execution.id, run_id=execution.run_id, result_type=ResearchResult)
            result = await handle.result()
            if result.status == "completed" and result.final_report.strip():
                return prior_of(execution.id, result)
        return None
