"""`deepresearch list`: recent runs with their status, and each run's
podcast and slides beside it."""

from __future__ import annotations

import argparse
import asyncio

from rich.table import Table
from rich.text import Text
from temporalio.client import WorkflowExecutionStatus

from client.display import make_console
from client.ids import owner
from client.options import connection
from client.runs import WORKFLOW_TYPE
from infra.temporal import connect
from workflows.models import PHASE_ATTRIBUTE, TITLE_ATTRIBUTE

TYPES = (WORKFLOW_TYPE, "Podcast", "Slides", "Prose")


async def main(args: argparse.Namespace) -> int:
    client = await connect(connection(args))
    query = " OR ".join(f'WorkflowType="{t}"' for t in TYPES)
    runs = [run async for run in client.list_workflows(query, limit=args.limit)]
    console = make_console()
    if not runs:
        console.print("no runs yet")
        return 0
    table = Table("id", "status", "started", "title / question")
    failing = await failing_tasks(client, runs)
    for run in ordered(runs):
        state = run.status.name.lower() if run.status else "?"
        phase = run.typed_search_attributes.get(PHASE_ATTRIBUTE)
        if phase and run.status == WorkflowExecutionStatus.RUNNING:
            state += f" ({phase})"
        if run.id in failing:
            state = f"STUCK: task failed {failing[run.id]}x"
        started = run.start_time.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        title = run.typed_search_attributes.get(TITLE_ATTRIBUTE) or ""
        question = await run.memo_value("question", default="") if run.workflow_type == WORKFLOW_TYPE else ""
        if question:
            question = " ".join(str(question).split())
            title = f"{title}\n{question[:100]}" if title else question[:100]
        if run.workflow_type != WORKFLOW_TYPE:
            title = f"{run.workflow_type.lower()}"
        table.add_row(("  " if run.workflow_type != WORKFLOW_TYPE else "") + run.id, state, started, Text(title))
    console.print(table)
    return 0


async def failing_tasks(client, runs: list) -> dict[str, int]:
    """Running runs whose workflow task keeps failing: id -> attempts."""

    async def attempts(run) -> tuple[str, int]:
        try:
            described = await client.get_workflow_handle(run.id, run_id=run.run_id).describe()
            return run.id, described.raw_description.pending_workflow_task.attempt
        except Exception:  # gone meanwhile: not stuck
            return run.id, 0

    running = [run for run in runs if run.status == WorkflowExecutionStatus.RUNNING]
    found = await asyncio.gather(*(attempts(run) for run in running))
    return {run_id: n for run_id, n in found if n >= 2}


def ordered(runs: list) -> list:
    """Newest first, each run's podcast and slides right after it."""
    started = {run.id: run.start_time for run in runs if run.workflow_type == WORKFLOW_TYPE}
    return sorted(
        runs,
        key=lambda r: (started.get(owner(r.id), r.start_time), r.workflow_type == WORKFLOW_TYPE, r.start_time),
        reverse=True,
    )
