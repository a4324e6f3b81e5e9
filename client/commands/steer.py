"""`deepresearch steer ID "note" [--url URL]... [--file F]`: a note for a
running research run, sent as the ``steer`` update (workflows/steering.py).
The run takes it at once and says where it will apply (the plan, the
running steps' next turn, the steps not started yet, the report); it is
applied at that safe point and shown by `status`. A refusal (an empty or
oversized note, a plan waiting for review, a run that has ended) is one line
and exit code 1; a run that has ended points to `ask`.

The quick way (client/quick.py) sends it; the full client takes over with the
same update id when it cannot, its wait bounded (client/updates.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

from client import quick
from client.errors import CliError
from client.options import connection
from client.users import acting
from infra.errors import cli_name

MAX_FILE_BYTES = 64_000  # a note read from a file (the run takes at most 4,000 characters of note)


def note_of(args: argparse.Namespace) -> str:
    """The note: the argument, and the text of ``--file`` after it (``-``:
    standard input)."""
    parts = [args.note or ""]
    if args.file:
        if args.file == "-":
            text = sys.stdin.read(MAX_FILE_BYTES + 1)
        else:
            try:
                with open(args.file, encoding="utf-8", errors="replace") as handle:
                    text = handle.read(MAX_FILE_BYTES + 1)
            except OSError as err:
                raise CliError(f"cannot read the note's file {args.file}: {err.strerror or err}") from None
        if len(text) > MAX_FILE_BYTES:
            raise CliError(f"the note's file {args.file} is longer than a note can be (a steer holds 4,000 characters)")
        parts.append(text)
    note = "\n\n".join(p.strip() for p in parts if p.strip())
    if not note:
        raise CliError('the note is empty: say what the research should do differently, e.g. "only EU sources"')
    return note


async def main(args: argparse.Namespace) -> int:
    steer = acting({"note": note_of(args), "urls": list(args.url or [])})  # names who steers
    conn = connection(args)
    update_id = str(uuid.uuid4())
    started = time.monotonic()
    try:
        try:
            reply = await quick.update(conn, args.workflow_id, "steer", [steer], update_id)
        except quick.NotQuick:
            from client.updates import execute_update
            from infra.temporal import connect

            client = await connect(conn)
            waited = time.monotonic() - started
            reply = await execute_update(client, args.workflow_id, "steer", [steer], update_id, waited, dict)
    except Exception as err:
        if ended(err):
            raise CliError(ended_line(args.workflow_id)) from None
        raise
    if args.json:
        print(json.dumps(reply, ensure_ascii=False, indent=2))
    else:
        print(f"{reply.get('message', 'steer taken')}; see `{cli_name()} status {args.workflow_id}`")
    return 0


def ended(err: Exception) -> bool:
    """Whether Temporal refused the update because the run has ended."""
    from temporalio.service import RPCError, RPCStatusCode

    return isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND and "completed" in err.message


def ended_line(workflow_id: str) -> str:
    return (
        f"run {workflow_id} has already ended: a steer can no longer reach it. Ask about its report instead: "
        f'`{cli_name()} ask {workflow_id} "your question"`, or start a new run building on it: '
        f'`{cli_name()} run "your question" --continue-from {workflow_id}`'
    )
