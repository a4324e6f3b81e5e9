"""`deepresearch cancel`: cancel a run. The workflow catches the cancellation,
writes a report from what it found so far and ends with status `cancelled`.
A run that has already ended is refused with how it ended (exit code 1)."""

from __future__ import annotations

import argparse

from client.errors import CliError
from client.options import connection
from client.users import cancel_as, cli_user
from infra.errors import cli_name
from infra.temporal import connect


async def main(args: argparse.Namespace) -> int:
    client = await connect(connection(args))
    handle = client.get_workflow_handle(args.workflow_id)
    described = await handle.describe()  # an unknown id is one clear error
    if (how := ended(described)) is not None:
        raise CliError(
            f"run {args.workflow_id} has already ended ({how}): there is nothing to cancel; "
            f"see `{cli_name()} result {args.workflow_id}`"
        )
    await cancel_as(client, args.workflow_id, cli_user(), "deepresearch cancel")  # the history names who
    print(f"cancel requested for {args.workflow_id}: {what_follows(described.workflow_type, args.workflow_id)}")
    return 0


def what_follows(workflow_type: str | None, workflow_id: str) -> str:
    """What a cancel does to a workflow of this type, in the words of its user."""
    if workflow_type == "EvalSuite":
        return (
            "the suite stops; its research runs still going are cancelled "
            "(each writes a partial report) and no further task starts"
        )
    if workflow_type == "FollowUp":
        return "the thread ends; no further question is answered"
    if workflow_type in ("Podcast", "Slides", "Prose"):
        return f"the {workflow_type.lower()} stops unfinished; the report it came from is untouched"
    return f"it writes a partial report from what it found; get it with `{cli_name()} result {workflow_id}`"


def ended(described) -> str | None:
    """How a workflow ended (``cancelled`` for a research run ended by
    `cancel`: Temporal says completed), or None while it runs."""
    from temporalio.client import WorkflowExecutionStatus

    from workflows.models import PHASE_ATTRIBUTE

    if described.status in (None, WorkflowExecutionStatus.RUNNING):
        return None
    phase = described.typed_search_attributes.get(PHASE_ATTRIBUTE)
    if described.status == WorkflowExecutionStatus.COMPLETED and phase == "cancelled":
        return "cancelled"
    return described.status.name.lower()
