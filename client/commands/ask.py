"""`deepresearch ask ID QUESTION`: a follow-up question on a finished run.

The question goes to the run's thread (workflow ``FollowUp``, id
``<ID>-ask``) through the Update ``ask``, starting the thread when it is not
there yet (update-with-start): one thread per run, which remembers the
earlier questions and answers. The answer comes from the run's findings and
sources; when they do not suffice, the thread researches more (a small run,
plan auto-accepted unless ``--review``) and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from client import threads
from client.display import make_console, print_report
from client.ids import thread_id
from client.options import connection
from infra.errors import cli_name
from infra.temporal import connect
from workflows.follow_up_models import FollowUpAnswer, ThreadStatus

POLL_SECONDS = 1.0


async def main(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = await connect(conn)
    asking = await threads.ask(client, conn, args.workflow_id, args.question, args.review)
    thread = thread_id(args.workflow_id)
    if not args.json:
        print(f"asking thread {thread}…", flush=True)
    await _tell_about_research(client, thread, asking, args)
    answer: FollowUpAnswer = await asking
    if args.json:
        shown = {
            "workflow_id": answer.workflow_id,
            "answer": answer.answer,
            "citations": [c.model_dump() for c in answer.citations],
            "researched": answer.researched,
            "research_run": answer.research_run,
        }
        print(json.dumps(shown, ensure_ascii=False, indent=2))
        return 0
    console = make_console()
    print_report(console, answer.answer)
    if answer.researched:
        console.print(f"(the run's findings did not suffice: researched more in run {answer.research_run})")
    for n, citation in enumerate(answer.citations, 1):
        console.print(f"[{n}] {citation.title or citation.url} {citation.url}", markup=False)
    console.print(f"ask more with `{cli_name()} ask {args.workflow_id} QUESTION` (same thread: {thread})")
    return 0


async def _tell_about_research(client, thread: str, asking: asyncio.Task, args) -> None:
    """While the answer is on its way, say when the thread researches more
    (and, with --review, that its plan waits for the user's review)."""
    told: set[str] = set()
    handle = client.get_workflow_handle(thread)
    while not asking.done():
        await asyncio.wait({asking}, timeout=POLL_SECONDS)
        if asking.done() or args.json:
            continue
        try:
            status = await handle.query("status", result_type=ThreadStatus)
        except Exception:  # noqa: BLE001 - not started yet, or between runs: look again
            continue
        run = status.research_run
        if run and run not in told:
            told.add(run)
            hint = (
                f"; review its plan with `{cli_name()} review {run} --accept` (or --edit)"
                if args.review
                else f"; follow it with `{cli_name()} watch {run}`"
            )
            print(f"the run's findings do not answer this: researching more in run {run}{hint}", flush=True)
