"""`deepresearch podcast ID`: a finished run's report as a two-host audio
conversation (workflow `Podcast`, id `<ID>-podcast`; asking again fetches
the same podcast)."""

from __future__ import annotations

import argparse
import json

from client.ids import side_id
from client.options import connection
from client.side_outputs import default_path, finished_report, start_once, write_blob
from infra.errors import cli_name
from infra.temporal import connect
from workflows.side_models import PodcastResult


async def main(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = await connect(conn)
    source = await finished_report(client, args.workflow_id, conn.namespace)
    handle = await start_once(client, conn, "podcast", source, side_id(args.workflow_id, "podcast"))
    if not args.json:
        print(f"podcast {handle.id}: writing the script and speaking it (follow with `{cli_name()} watch {handle.id}`)")
    return await save(conn, await handle.result(), args.output, args.json, handle.id)


async def save(conn, result: PodcastResult, output, as_json: bool, workflow_id: str) -> int:
    """Write the podcast's audio file and say where it went."""
    audio = result.audio
    path = output or default_path(conn, result.run_id, f".{audio.format}")
    path = await write_blob(conn, audio.blob, path)
    if as_json:
        shown = {
            "workflow_id": workflow_id,
            "status": result.status,
            "file": str(path),
            "format": audio.format,
            "seconds": round(audio.seconds, 2),
            "script": result.script,
            "usage": result.usage.model_dump(),
        }
        print(json.dumps(shown, ensure_ascii=False, indent=2))
    else:
        print(f"podcast saved to {path} ({audio.seconds:.0f} s, {len(result.script)} lines, {audio.format})")
    return 0
