"""``owner_usage``: how much of the per-user limits a run's owner is using
(workflows/owner_limits.py), read from Temporal's visibility with the
worker's own client:

- runs going: the owner's running ``DeepResearch`` runs (``ResearchOwner``)
  that started before the asking run (by start time, then id), so the oldest
  waiting run goes first;
- tokens today: the prompt + completion tokens of the owner's runs started
  since 00:00 UTC, other than the asking one: a completed run's from its
  result (kept in memory: it never changes), any other's from its status
  query. A run continued as new is counted once, by its latest run.

Limits off (the default): it answers at once without asking Temporal.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from temporalio import activity

from infra.user_limits import UserLimits
from workflows.models import ResearchResult, RunStatus
from workflows.ownership import OwnerQuery, OwnerUsage, day_start, name_problem, next_day

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowExecution

MOST_RUNS = 500  # runs of one owner looked at per question (a day's worth, and then some)
QUERY_TIMEOUT = timedelta(seconds=10)


class OwnerActivities:
    def __init__(self, client: Client, limits: UserLimits) -> None:
        self.client = client
        self.limits = limits
        self.finished: dict[tuple[str, str], int] = {}  # (workflow id, run id) -> tokens of a completed run

    @activity.defn(name="owner_usage")
    async def owner_usage(self, query: OwnerQuery) -> OwnerUsage:
        limits = self.limits
        if not limits.any:
            return OwnerUsage()
        if problem := name_problem(query.owner):  # it goes into a visibility query
            return OwnerUsage(checked=False, problem=problem)
        now = datetime.now(UTC)
        usage = OwnerUsage(
            max_runs=limits.max_runs, daily_tokens=limits.daily_tokens, resets_at=next_day(now).isoformat()
        )
        own = f"WorkflowType = 'DeepResearch' AND ResearchOwner = '{query.owner}'"
        if limits.max_runs:
            me = await self.client.get_workflow_handle(query.workflow_id).describe()
            mine = (me.start_time, query.workflow_id)
            async for run in self.client.list_workflows(f"{own} AND ExecutionStatus = 'Running'", limit=MOST_RUNS):
                if run.id != query.workflow_id and (run.start_time, run.id) < mine:
                    usage.runs_before += 1
        if limits.daily_tokens:
            since = day_start(now).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            async for run in self.client.list_workflows(f"{own} AND StartTime >= '{since}'", limit=MOST_RUNS):
                if run.id != query.workflow_id:
                    usage.tokens_today += await self.tokens(run)
        return usage

    async def tokens(self, run: WorkflowExecution) -> int:
        """What one run used; 0 for a run continued as new (its latest run
        carries its usage) or one that cannot say."""
        from temporalio.client import WorkflowExecutionStatus

        if run.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
            return 0
        key = (run.id, run.run_id)
        if key in self.finished:
            return self.finished[key]
        handle = self.client.get_workflow_handle(run.id, run_id=run.run_id, result_type=ResearchResult)
        try:
            if run.status == WorkflowExecutionStatus.COMPLETED:
                result = await handle.result()
                self.finished[key] = result.usage.prompt_tokens + result.usage.completion_tokens
                return self.finished[key]
            status = await handle.query("status", result_type=RunStatus, rpc_timeout=QUERY_TIMEOUT)
        except Exception as err:  # noqa: BLE001 - a run that cannot say counts nothing (logged)
            activity.logger.warning("owner_usage: run %s did not say what it used: %s", run.id, err)
            return 0
        return status.usage.prompt_tokens + status.usage.completion_tokens
