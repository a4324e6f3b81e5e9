"""`deepresearch list`: recent runs with their status."""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text
from temporalio.client import WorkflowExecutionStatus

from client.display import make_console
from client.options import connection
from client.runs import WORKFLOW_TYPE
from infra.temporal import connect
from workflows.models import PHASE_ATTRIBUTE, TITLE_ATTRIBUTE


async def main(args: argparse.Namespace) -> int:
    client = await connect(connection(args))
    runs = [run async for run in client.list_workflows(f'WorkflowType="{WORKFLOW_TYPE}"', limit=args.limit)]
    console = make_console()
    if not runs:
        console.print("no runs yet")
        return 0
    table = Table("id", "status", "started", "title")
    for run in sorted(runs, key=lambda r: r.start_time, reverse=True):
        state = run.status.name.lower() if run.status else "?"
        phase = run.typed_search_attributes.get(PHASE_ATTRIBUTE)
        if phase and run.status == WorkflowExecutionStatus.RUNNING:
            state += f" ({phase})"
        started = run.start_time.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(run.id, state, started, Text(run.typed_search_attributes.get(TITLE_ATTRIBUTE) or ""))
    console.print(table)
    return 0
