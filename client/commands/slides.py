"""`deepresearch slides ID`: a finished run's report as a slide deck
(workflow `Slides`, id `<ID>-slides`): a .pptx, or with `--format md` the
Marp markdown the model wrote."""

from __future__ import annotations

import argparse
import json

from client.ids import side_id
from client.options import connection
from client.side_outputs import default_path, finished_report, start_once, write_blob
from client.talk import write_file
from infra.temporal import connect
from workflows.side_models import SlidesResult


async def main(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = await connect(conn)
    source = await finished_report(client, args.workflow_id, conn.namespace)
    handle = await start_once(client, conn, "slides", source, side_id(args.workflow_id, "slides"))
    if not args.json:
        print(f"slides {handle.id}: writing the outline and building the deck")
    return await save(conn, await handle.result(), args.output, args.format, args.json, handle.id)


async def save(conn, result: SlidesResult, output, fmt: str | None, as_json: bool, workflow_id: str) -> int:
    fmt = fmt or ("md" if output and str(output).lower().endswith(".md") else "pptx")
    path = output or default_path(conn, result.run_id, f".{fmt}")
    if fmt == "md":
        path = write_file(path, result.markdown)
    else:
        path = await write_blob(conn, result.deck.blob, path)
    if as_json:
        shown = {
            "workflow_id": workflow_id,
            "status": result.status,
            "file": str(path),
            "format": fmt,
            "slides": result.deck.slides if result.deck else 0,
            "cut": result.deck.cut if result.deck else "",
            "usage": result.usage.model_dump(),
        }
        print(json.dumps(shown, ensure_ascii=False, indent=2))
    else:
        print(f"slides saved to {path} ({result.deck.slides if result.deck else 0} slides, {fmt})")
        if result.deck and result.deck.cut and fmt != "md":
            print(f"note: {result.deck.cut}")
    return 0
