"""`deepresearch start`: start a run and print its workflow id. The quick
way (client/quick.py) starts it; the full client takes over when it cannot
(tracing on, an input for external storage)."""

from __future__ import annotations

import argparse
import sys

from client import quick
from client.options import connection, research_input
from client.runs import check_continue_from, new_workflow_id, start_research, start_research_quickly


async def main(args: argparse.Namespace) -> int:
    request = research_input(args)
    conn = connection(args)
    workflow_id = args.id or new_workflow_id()
    if request.continue_from:  # the run to build on must be there: one line now, not a failed run later
        from infra.temporal import connect

        if note := await check_continue_from(await connect(conn), conn, request):
            print(note, file=sys.stderr)  # standard output holds the id alone
    try:
        await start_research_quickly(conn, request, workflow_id)
    except quick.NotQuick:
        from infra.temporal import connect

        await start_research(await connect(conn), conn, request, workflow_id)
    print(workflow_id)
    return 0
