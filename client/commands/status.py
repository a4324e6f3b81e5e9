"""`deepresearch status`: a run's phase, plan, steps and pending question;
for a run whose workflow task keeps failing, the failure and what to do.
A podcast, slides or prose workflow answers with its own, smaller status."""

from __future__ import annotations

import argparse
import json

from rich.text import Text
from temporalio.client import WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from client.commands.result import side_kind
from client.display import make_console, render_status
from client.errors import CliError
from client.options import connection
from client.side_outputs import status_lines
from client.talk import QUERY_TIMEOUT, next_action, query_status, stuck
from infra.temporal import cli_name, connect
from workflows.models import SideStatus


async def main(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = await connect(conn)
    handle = client.get_workflow_handle(args.workflow_id)
    kind = await side_kind(client, handle.id)
    try:
        status = await (query_side_status(handle) if kind else query_status(handle))
    except (RPCError, WorkflowQueryFailedError) as err:
        if isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND:
            raise
        if problem := await stuck(client, handle):
            if args.json:
                shown = {"phase": problem.phase, "stuck": True, "workflow_task_attempts": problem.attempts}
                print(json.dumps(shown | {"error": problem.error}, indent=2))
                return 1
            raise CliError(problem.line(handle.id)) from None
        if isinstance(err, WorkflowQueryFailedError):
            raise
        raise CliError(
            f"no worker answered the status query within {QUERY_TIMEOUT.seconds} s; "
            f"is one running on task queue {conn.task_queue!r}? (`{cli_name()} worker`)"
        ) from None
    if isinstance(status, SideStatus):
        return await show_side_status(handle, status, args.json)
    if args.json:
        print(status.model_dump_json(indent=2))
        return 0
    console = make_console()
    console.print(render_status(status, handle.id))
    if hint := next_action(status, handle.id):
        console.print(Text(hint, style="bold yellow"))
    return 0


async def query_side_status(handle: WorkflowHandle) -> SideStatus:
    return await handle.query("status", result_type=SideStatus, rpc_timeout=QUERY_TIMEOUT)


async def show_side_status(handle: WorkflowHandle, status: SideStatus, as_json: bool) -> int:
    """The side output's phase (and, for a podcast, how many lines are
    spoken) beside the workflow's own state, which tells a podcast that
    stopped mid-speech (terminated) from one still speaking."""
    described = await handle.describe()
    state = described.status.name.lower() if described.status else "unknown"
    if as_json:
        shown = {"workflow_id": handle.id, "state": state} | status.model_dump(mode="json")
        print(json.dumps(shown, ensure_ascii=False, indent=2))
        return 0
    print("\n".join(status_lines(status, handle.id, state)))
    return 0
