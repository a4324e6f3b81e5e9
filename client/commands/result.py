"""`deepresearch result`: wait for a run and print or save its report."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from client.display import make_console, print_report
from client.errors import CliError, failure_message
from client.ids import may_be_side_output
from client.options import BINARY_FORMATS, connection, output_format, report_path
from client.side_outputs import RESULT_TYPES, SIDE_TYPES
from client.talk import QUERY_TIMEOUT, exit_code, save
from infra.temporal import connect
from workflows.failures import partial_report
from workflows.models import ResearchResult

if TYPE_CHECKING:
    from pathlib import Path


async def main(args: argparse.Namespace) -> int:
    from client.stored_runs import stored_runs

    with stored_runs(connection(args)) as reading:  # no server: the runs stored in the data dir
        return await read(args, reading.conn, reading.embedded)


async def read(args: argparse.Namespace, conn, embedded: bool) -> int:
    """``embedded``: the server was started to read the stored runs; no
    worker serves them, so only an ended workflow has a result to show."""
    from temporalio.client import WorkflowExecutionStatus

    client = await connect(conn)
    described = await client.get_workflow_handle(args.workflow_id).describe()  # an unknown id is one line here
    kind = described.workflow_type
    if embedded and described.status == WorkflowExecutionStatus.RUNNING:
        from client.stored_runs import no_worker_here

        raise CliError(no_worker_here(args.workflow_id, described.task_queue))
    if kind == "FollowUp":
        return await thread_result(client, args)
    if kind in SIDE_KINDS:
        return await side_result(conn, client, SIDE_KINDS[kind], args.workflow_id, args.output, args.format)
    if kind != "DeepResearch":
        what = "an evaluation suite: run the same `eval` command again for its table"
        raise CliError(f"{args.workflow_id} is not a research run but {what if kind == 'EvalSuite' else kind}")
    handle = client.get_workflow_handle(args.workflow_id, result_type=ResearchResult)
    from temporalio.client import WorkflowFailureError

    try:
        result: ResearchResult = await handle.result()
    except WorkflowFailureError as err:
        if (report := partial_report(err)) is None:
            raise
        show_partial(report, args.output)
        raise CliError(f"the run failed: {failure_message(err)}") from None
    from client.report_files import render  # markdown-it: only when a report is rendered

    fmt = output_format(args)
    text = render(result, fmt)
    for warning in result.warnings:  # on stderr: what a reader must know, apart from the report itself
        print(f"warning: {warning}", file=sys.stderr)
    if args.output or fmt in BINARY_FORMATS:  # a PDF or Word file is never printed to the terminal
        path = args.output or report_path(args, conn.data_dir / "reports", args.workflow_id)[0]
        save(path, text)
    elif fmt == "md":
        print_report(make_console(), text)
    else:
        print(text, end="" if text.endswith("\n") else "\n")
    if fmt != "json":  # (--json holds them)
        for warning in result.warnings:  # e.g. the report is the findings: the reporter failed
            print(f"warning: {warning}", file=sys.stderr)
    return exit_code(result)


def show_partial(report: str, output: Path | None) -> None:
    if output:
        save(output, report, "partial report saved to")
    else:
        print_report(make_console(), report)


SIDE_KINDS = {workflow_type: kind for kind, workflow_type in SIDE_TYPES.items()}


async def workflow_type(client, workflow_id: str) -> str:
    return (await client.get_workflow_handle(workflow_id).describe()).workflow_type


async def side_kind(client, workflow_id: str) -> str | None:
    """ "podcast", "slides" or "prose" for a side output's id, else None."""
    if not may_be_side_output(workflow_id):
        return None
    return SIDE_KINDS.get(await workflow_type(client, workflow_id))


async def thread_result(client, args: argparse.Namespace) -> int:
    """A follow-up thread never ends by itself (it waits for the next
    question): its questions and answers so far, in full, without waiting."""
    import json

    from workflows.follow_up_models import ThreadStatus

    fmt = output_format(args)
    if fmt not in ("md", "json"):
        raise CliError(f"{args.workflow_id} is a follow-up thread: --format md or json (ask the run itself for {fmt})")
    handle = client.get_workflow_handle(args.workflow_id)
    status = await handle.query("status", result_type=ThreadStatus, rpc_timeout=QUERY_TIMEOUT)
    if fmt == "json":
        text = json.dumps({"workflow_id": handle.id} | status.model_dump(mode="json"), ensure_ascii=False, indent=2)
    else:
        text = thread_markdown(status)
    if args.output:
        save(args.output, text)
    elif fmt == "md":
        print_report(make_console(), text)
    else:
        print(text)
    return 0


def thread_markdown(status) -> str:
    parts = [f"# Follow-up questions on run {status.run_id}"]
    for turn in status.turns:
        parts += [f"## {' '.join(turn.question.split())}", turn.answer.strip()]
        if turn.researched:
            parts.append(f"*Researched more for this answer in run {turn.research_run}.*")
        parts += [f"{n}. [{c.title or c.url}]({c.url})" for n, c in enumerate(turn.citations, 1)]
    if not status.turns:
        parts.append("No question answered yet.")
    parts += [f"Waiting for an answer: {q}" for q in status.waiting]
    return "\n\n".join(parts) + "\n"


async def side_result(
    conn, client, kind: str, workflow_id: str, output: Path | None = None, fmt: str | None = None
) -> int:
    """A side output, once finished: its file written (to ``output``, else
    where `podcast` / `slides` save it), or its text printed. ``fmt``: "json"
    prints it as JSON, "md" writes slides as Marp markdown."""
    from client.commands import podcast, prose, slides

    handle = client.get_workflow_handle(workflow_id, result_type=RESULT_TYPES[SIDE_TYPES[kind]])
    result = await handle.result()
    as_json = fmt == "json"
    if kind == "podcast":
        return await podcast.save(conn, result, output, as_json, handle.id)
    if kind == "slides":
        return await slides.save(conn, result, output, "md" if fmt == "md" else None, as_json, handle.id)
    return prose.show(result, as_json, handle.id)
