"""`deepresearch prose --option OPTION (TEXT | --run ID)`: the writing
assistant (workflow `Prose`): the text, or a finished run's report,
rewritten as asked; prints the result."""

from __future__ import annotations

import argparse
import json
import uuid

from pydantic import ValidationError

from client.errors import CliError
from client.ids import PROSE_PREFIX
from client.options import connection
from client.side_outputs import finished_report, start_once
from infra.temporal import connect
from workflows.side_models import ProseInput, ProseResult


async def main(args: argparse.Namespace) -> int:
    if (args.text is None) == (args.run is None):
        raise CliError("give the text to rewrite, or --run ID for a run's report (not both)")
    if args.option == "zap" and not (args.command or "").strip():
        raise CliError("--option zap needs --command TEXT saying what to do with the text")
    conn = connection(args)
    client = await connect(conn)
    text = args.text
    if args.run is not None:
        text = (await finished_report(client, args.run, conn.namespace)).report
    try:
        request = ProseInput(option=args.option, text=text, command=args.command or "", run_id=args.run)
    except ValidationError as err:
        raise CliError(f"invalid prose request: {err.errors()[0]['msg']}") from None
    handle = await start_once(client, conn, "prose", request, f"{PROSE_PREFIX}{uuid.uuid4().hex[:8]}")
    return show(await handle.result(), args.json, handle.id)


def show(result: ProseResult, as_json: bool, workflow_id: str) -> int:
    if as_json:
        shown = {"workflow_id": workflow_id, "status": result.status, "option": result.option, "text": result.text}
        print(json.dumps(shown | {"usage": result.usage.model_dump()}, ensure_ascii=False, indent=2))
    else:
        print(result.text)
    return 0
