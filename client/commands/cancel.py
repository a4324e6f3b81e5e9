"""`deepresearch cancel`: cancel a run. The workflow catches the cancellation,
writes a report from what it found so far and ends with status `cancelled`."""

from __future__ import annotations

import argparse

from client.options import connection
from infra.errors import cli_name
from infra.temporal import connect


async def main(args: argparse.Namespace) -> int:
    client = await connect(connection(args))
    handle = client.get_workflow_handle(args.workflow_id)
    await handle.describe()  # an unknown id is one clear error
    await handle.cancel()
    print(
        f"cancel requested for {args.workflow_id}: it writes a partial report from what it found; "
        f"get it with `{cli_name()} result {args.workflow_id}`"
    )
    return 0
