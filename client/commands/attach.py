"""`deepresearch attach ID` (or `run --attach ID`): the interactive view of a
run started elsewhere (`start`, the desk, another machine): live progress,
the review and clarification prompts, and the report at the end."""

from __future__ import annotations

import argparse

from client.display import make_console, print_report
from client.interactive import follow_run
from client.options import connection, report_path
from client.report_files import render
from client.talk import exit_code, write_file
from client.wording import usage_text
from infra.temporal import connect
from workflows.models import ResearchResult


async def main(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = await connect(conn)
    handle = client.get_workflow_handle(args.workflow_id, result_type=ResearchResult)
    await handle.describe()  # an unknown id is one clear error
    console = make_console()
    console.print(f"attached to run {handle.id} on {conn.address}", markup=False)
    result = await follow_run(client, handle, conn, console, None)
    print_report(console, result.final_report)
    path, fmt = report_path(args, conn.data_dir / "reports", handle.id)
    path = write_file(path, render(result, fmt))
    console.print(f"run {handle.id}: {result.status}; {usage_text(result.usage)}", markup=False)
    console.print(f"report saved to {path}", markup=False)
    return exit_code(result)
