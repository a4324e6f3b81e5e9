"""`deepresearch list`: recent runs with their status, and each run's
podcast and slides beside it. The quick way (client/quick.py) lists them;
the full client takes over when it cannot (tracing on)."""

from __future__ import annotations

import argparse
import asyncio

from rich.table import Table
from rich.text import Text

from client import quick
from client.display import make_console
from client.ids import owner
from client.options import connection
from client.runs import WORKFLOW_TYPE
from client.terminal_text import one_line, visible
from infra.connection import Connection
from workflows.models import PHASE_ATTRIBUTE, TITLE_ATTRIBUTE

TYPES = (WORKFLOW_TYPE, "Podcast", "Slides", "Prose", "FollowUp")
QUERY = " OR ".join(f'WorkflowType="{t}"' for t in TYPES)


async def main(args: argparse.Namespace) -> int:
    from client.stored_runs import stored_runs

    with stored_runs(connection(args)) as reading:  # no server: the runs stored in the data dir
        try:
            runs = await quick.list_workflows(reading.conn, QUERY, args.limit)
        except quick.NotQuick:
            runs = await full(reading.conn, QUERY, args.limit)
    console = make_console()
    if not runs:
        console.print("no runs yet")
        return 0
    show(console, [row(run) for run in ordered(runs)])
    return 0


def show(console, rows: list[tuple[str, str, str, str]]) -> None:
    """The runs as a table whose ids are never cut (a schedule's run ids are
    long, and an id is what the user copies); when the terminal is too narrow
    for that, one run per paragraph instead: its id, status and start on one
    line, whatever its length, its title below."""
    longest = max(len(r[0]) for r in rows)
    status = max(len(r[1]) for r in rows)
    if longest + min(status, 20) + 10 + 20 + 13 > console.width:  # the table's borders and padding: 13
        for run_id, state, started, title in rows:
            console.print(Text(f"{run_id}  {state}  {started}"), soft_wrap=True)  # the terminal wraps it, not rich
            for line in title.splitlines():
                console.print(Text(f"    {line}"))
        return
    table = Table("id", "status", "started", "title / question")
    table.columns[0].no_wrap, table.columns[0].min_width = True, longest
    for run_id, state, started, title in rows:
        table.add_row(run_id, state, started, Text(title))
    console.print(table)


def row(run: quick.Listed) -> tuple[str, str, str, str]:
    """One run's id, status, start time and title, as shown."""
    state = run.status
    phase = run.search_attributes.get(PHASE_ATTRIBUTE.name)
    if phase == "cancelled" and run.status == "completed":  # Temporal: completed, with a partial report
        state = "cancelled"
    elif phase and (run.status == "running" or (run.status == "completed" and phase != "completed")):
        state += f" ({phase})"  # what it does now, or how it ended without a report
    if run.task_attempts >= 2:
        state = f"STUCK: task failed {run.task_attempts}x"
    started = run.start_time.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    title = run.search_attributes.get(TITLE_ATTRIBUTE.name) or ""
    question = run.memo.get("question", "") if run.workflow_type == WORKFLOW_TYPE else ""
    if question:
        question = " ".join(str(question).split())
        title = f"{title}\n{question[:100]}" if title else question[:100]
    if run.workflow_type == WORKFLOW_TYPE and run.memo.get("schedule"):
        title = f"{title}\n(schedule {run.memo['schedule']})"
    if run.workflow_type == "FollowUp":
        title = thread_title(run.memo.get("questions"), run.status)
    elif run.workflow_type != WORKFLOW_TYPE:
        title = f"{run.workflow_type.lower()}"
    indent = "  " if run.workflow_type != WORKFLOW_TYPE else ""
    return indent + one_line(run.id), visible(state), started, visible(title)


def thread_title(asked, status: str) -> str:
    """A follow-up thread's row: how many questions it answered (its memo
    counts answers, so while the first is on its way it reads 0)."""
    if isinstance(asked, int) and asked > 0:
        return f"follow-up thread: {asked} question(s)"
    return "follow-up thread: answering its first question" if status == "running" else "follow-up thread"


async def full(conn: Connection, query: str, limit: int) -> list[quick.Listed]:
    """What the quick way lists, through the SDK's full client."""
    from temporalio.client import WorkflowExecutionStatus

    from infra.temporal import connect

    client = await connect(conn)
    runs = [run async for run in client.list_workflows(query, limit=limit)]

    async def listed(run) -> quick.Listed:
        attempts = 0
        if run.status == WorkflowExecutionStatus.RUNNING:
            try:
                described = await client.get_workflow_handle(run.id, run_id=run.run_id).describe()
                attempts = described.raw_description.pending_workflow_task.attempt
            except Exception:  # gone meanwhile: not stuck
                pass
        return quick.Listed(
            id=run.id,
            workflow_type=run.workflow_type,
            status=run.status.name.lower() if run.status else "?",
            start_time=run.start_time,
            memo=await memo(run),
            search_attributes={key.name: value for key, value in run.typed_search_attributes},
            task_attempts=attempts,
        )

    return list(await asyncio.gather(*(listed(run) for run in runs)))


async def memo(run) -> dict:
    """The run's memo, each value decoded on its own: one that does not
    decode reads as ``quick.UNREADABLE`` (the quick way does the same)."""
    values = {}
    for key in run.raw_info.memo.fields:
        try:
            values[key] = await run.memo_value(key)
        except Exception:  # not valid JSON, or an encoding this client cannot read
            values[key] = quick.UNREADABLE
    return values


def ordered(runs: list[quick.Listed]) -> list[quick.Listed]:
    """Newest first, each run's podcast and slides right after it."""
    started = {run.id: run.start_time for run in runs if run.workflow_type == WORKFLOW_TYPE}
    return sorted(
        runs,
        key=lambda r: (started.get(owner(r.id), r.start_time), r.workflow_type == WORKFLOW_TYPE, r.start_time),
        reverse=True,
    )
