"""`deepresearch start`: start a run and print its workflow id."""

from __future__ import annotations

import argparse

from client.options import connection, research_input
from client.runs import new_workflow_id, start_research
from infra.temporal import connect


async def main(args: argparse.Namespace) -> int:
    request = research_input(args)
    conn = connection(args)
    handle = await start_research(await connect(conn), conn, request, args.id or new_workflow_id())
    print(handle.id)
    return 0
