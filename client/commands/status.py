"""`deepresearch status`: a run's phase, plan, steps and pending question."""

from __future__ import annotations

import argparse

from rich.text import Text
from temporalio.service import RPCError, RPCStatusCode

from client.display import make_console, render_status
from client.errors import CliError
from client.options import connection
from client.talk import QUERY_TIMEOUT, next_action, query_status
from infra.temporal import connect


async def main(args: argparse.Namespace) -> int:
    conn = connection(args)
    handle = (await connect(conn)).get_workflow_handle(args.workflow_id)
    try:
        status = await query_status(handle)
    except RPCError as err:
        if err.status not in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
            raise
        raise CliError(
            f"no worker answered the status query within {QUERY_TIMEOUT.seconds} s; "
            f"is one running on task queue {conn.task_queue!r}? (`deepresearch worker`)"
        ) from None
    if args.json:
        print(status.model_dump_json(indent=2))
        return 0
    console = make_console()
    console.print(render_status(status, handle.id))
    if hint := next_action(status, handle.id):
        console.print(Text(hint, style="bold yellow"))
    return 0
