"""`deepresearch status`: a run's phase, plan, steps and pending question;
for a run whose workflow task keeps failing, the failure and what to do."""

from __future__ import annotations

import argparse
import json

from rich.text import Text
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from client.display import make_console, render_status
from client.errors import CliError
from client.options import connection
from client.talk import QUERY_TIMEOUT, next_action, query_status, stuck
from infra.temporal import cli_name, connect


async def main(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = await connect(conn)
    handle = client.get_workflow_handle(args.workflow_id)
    try:
        status = await query_status(handle)
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
    if args.json:
        print(status.model_dump_json(indent=2))
        return 0
    console = make_console()
    console.print(render_status(status, handle.id))
    if hint := next_action(status, handle.id):
        console.print(Text(hint, style="bold yellow"))
    return 0
