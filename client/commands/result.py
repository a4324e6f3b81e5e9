"""`deepresearch result`: wait for a run and print or save its report."""

from __future__ import annotations

import argparse

from client.display import make_console, print_report
from client.export import render
from client.options import connection, output_format
from client.talk import exit_code, write_file
from infra.temporal import connect
from workflows.models import ResearchResult


async def main(args: argparse.Namespace) -> int:
    client = await connect(connection(args))
    handle = client.get_workflow_handle(args.workflow_id, result_type=ResearchResult)
    result: ResearchResult = await handle.result()
    fmt = output_format(args)
    text = render(result, fmt)
    if args.output:
        print(f"saved to {write_file(args.output, text)}")
    elif fmt == "md":
        print_report(make_console(), text)
    else:
        print(text, end="" if text.endswith("\n") else "\n")
    return exit_code(result)
