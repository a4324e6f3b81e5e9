"""`deepresearch review` and `deepresearch answer`: plan feedback and
clarification answers, sent as Temporal updates (a rejection comes back as
its reason, exit code 1)."""

from __future__ import annotations

import argparse

from client.errors import CliError
from client.options import connection, review_feedback
from infra.temporal import connect


async def send_update(args: argparse.Namespace, update: str, *arguments: object) -> int:
    client = await connect(connection(args))
    handle = client.get_workflow_handle(args.workflow_id)
    print(await handle.execute_update(update, args=list(arguments), result_type=str))
    return 0


async def main(args: argparse.Namespace) -> int:
    feedback = review_feedback(args)
    if args.plan_version is None:
        return await send_update(args, "submit_review", feedback)
    return await send_update(args, "submit_review", feedback, args.plan_version)


async def answer(args: argparse.Namespace) -> int:
    if not args.text.strip():
        raise CliError("the answer is empty")
    return await send_update(args, "answer_clarification", args.text.strip())
