"""`deepresearch watch`: follow a run's progress stream until it ends. A
podcast or slides workflow streams its progress the same way, and at its end
the file is saved where `podcast` / `slides` save it; a prose workflow's text
is printed when it is done."""

from __future__ import annotations

import argparse

from temporalio.client import WorkflowFailureError

from client.commands.result import side_kind, side_result
from client.display import event_line, make_console
from client.errors import CliError, failure_message
from client.follow import progress_events
from client.options import connection
from client.talk import exit_code
from client.wording import usage_text
from infra.connection import Connection
from infra.errors import cli_name
from infra.temporal import connect
from workflows.models import ResearchResult


async def main(args: argparse.Namespace) -> int:
    """Follow the run's progress stream (every event since the start, then
    live) until the run ends; events survive worker crashes."""
    conn = connection(args)
    client = await connect(conn)
    handle = client.get_workflow_handle(args.workflow_id, result_type=ResearchResult)
    await handle.describe()  # an unknown id is one clear error, not a silent wait
    kind = await side_kind(client, handle.id)
    console = make_console()
    if kind == "prose":  # one model call: no progress stream to follow
        return await side_output_saved(conn, client, kind, handle.id)
    plans = 0  # plans shown so far: the version a review names (as `status` prints it)
    async for _, event in progress_events(client, handle.id):  # by query: nothing added to the run's history
        console.print(event_line(event), markup=False)
        plans += event.kind == "plan"
        if event.kind == "review_requested":
            version = f" --plan-version {plans}" if plans else ""
            console.print(
                f"review with `{cli_name()} review {handle.id}{version} --accept` or `--edit TEXT`", markup=False
            )
        elif event.kind == "question":
            console.print(f"answer with `{cli_name()} answer {handle.id} TEXT`", markup=False)
    if kind is not None:
        return await side_output_saved(conn, client, kind, handle.id)
    result = await handle.result()
    console.print(f"run {handle.id} finished: {result.status}; {usage_text(result.usage)}", markup=False)
    console.print(f"print the report with `{cli_name()} result {handle.id}`", markup=False)
    return exit_code(result)


async def side_output_saved(conn: Connection, client, kind: str, workflow_id: str) -> int:
    """The finished podcast or deck written to its default file (the line
    says where), or the rewritten prose printed; a failed one is one line."""
    try:
        return await side_result(conn, client, kind, workflow_id)
    except WorkflowFailureError as err:
        raise CliError(f"the {kind} {workflow_id} failed: {failure_message(err)}") from None
