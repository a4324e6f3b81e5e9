"""`deepresearch watch`: follow a run's progress stream until it ends."""

from __future__ import annotations

import argparse

from temporalio.contrib.workflow_streams import WorkflowStreamClient

from client.display import event_line, make_console
from client.options import connection
from client.talk import exit_code
from client.wording import usage_text
from infra.temporal import cli_name, connect
from workflows.models import PROGRESS_TOPIC, ProgressEvent, ResearchResult


async def main(args: argparse.Namespace) -> int:
    """Follow the run's progress stream (every event since the start, then
    live) until the run ends; events survive worker crashes."""
    client = await connect(connection(args))
    handle = client.get_workflow_handle(args.workflow_id, result_type=ResearchResult)
    await handle.describe()  # an unknown id is one clear error, not a silent wait
    console = make_console()
    stream = WorkflowStreamClient.create(client, handle.id)
    async for item in stream.subscribe(PROGRESS_TOPIC, result_type=ProgressEvent):
        console.print(event_line(item.data), markup=False)
        if item.data.kind == "review_requested":
            console.print(f"review with `{cli_name()} review {handle.id} --accept` or `--edit TEXT`", markup=False)
        elif item.data.kind == "question":
            console.print(f"answer with `{cli_name()} answer {handle.id} TEXT`", markup=False)
    result = await handle.result()
    console.print(f"run {handle.id} finished: {result.status}; {usage_text(result.usage)}", markup=False)
    console.print(f"print the report with `{cli_name()} result {handle.id}`", markup=False)
    return exit_code(result)
