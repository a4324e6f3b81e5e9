"""`deepresearch review` and `deepresearch answer`: plan feedback and
clarification answers, sent as Temporal updates (a rejection comes back as
its reason, exit code 1). The quick way (client/quick.py) answers most of
the time; the full client takes over, with the same update id, when it
cannot. The wait is bounded (client/updates.py): with no worker on the
run's task queue, one line says so."""

from __future__ import annotations

import argparse
import time
import uuid

from client import quick
from client.errors import CliError
from client.options import connection, review_feedback
from client.users import acting


async def send_update(args: argparse.Namespace, update: str, *arguments: object) -> int:
    conn = connection(args)
    update_id = str(uuid.uuid4())
    started = time.monotonic()
    try:
        print(await quick.update(conn, args.workflow_id, update, arguments, update_id))
        return 0
    except quick.NotQuick:
        pass
    from client.updates import execute_update
    from infra.temporal import connect

    # Waiting no longer than the bound of client/updates.py in all.
    client = await connect(conn)
    print(await execute_update(client, args.workflow_id, update, arguments, update_id, time.monotonic() - started))
    return 0


async def main(args: argparse.Namespace) -> int:
    review = acting({"feedback": review_feedback(args)})  # names who sent it (DEEPRESEARCH_USER)
    if args.plan_version is None:
        return await send_update(args, "submit_review", review)
    return await send_update(args, "submit_review", review, args.plan_version)


async def answer(args: argparse.Namespace) -> int:
    if not args.text.strip():
        raise CliError("the answer is empty")
    return await send_update(args, "answer_clarification", args.text.strip())
