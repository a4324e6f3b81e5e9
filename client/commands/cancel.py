"""`deepresearch cancel`: cancel a run. The workflow catches the cancellation,
writes a report from what it found so far and ends with status `cancelled`,
within a bounded time (workflows/cancelling.py). A research run cancelled
already, still writing that report, is cancelled again: it ends at once with
its findings and sources as the report. A run that has already ended is
refused with how it ended (exit code 1)."""

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
    if await request_cancel(client, handle, described, cli_user(), "deepresearch cancel"):
        print(
            f"{handle.id} was cancelled already and is writing its partial report: cancelled again, it ends now "
            f"with its findings and sources as the report; get it with `{cli_name()} result {handle.id}`"
        )
    else:
        print(f"cancel requested for {handle.id}: {what_follows(described.workflow_type, handle.id)}")
    return 0


async def request_cancel(client, handle, described, user: str, via: str) -> bool:
    """Cancel the run naming who asked (the CLI and the desk: the history's
    cancel event says so); a research run whose cancel was asked already is
    told to end its partial report now (True)."""
    if described.workflow_type == "DeepResearch" and cancel_asked(described):
        from workflows.cancelling import CANCEL_AGAIN

        await handle.signal(CANCEL_AGAIN)
        return True
    await cancel_as(client, handle.id, user, via)
    return False


def cancel_asked(described) -> bool:
    """Whether a cancel of this running workflow was asked already (Temporal
    keeps one cancel request per run: asking again changes nothing)."""
    return bool(described.raw_description.workflow_extended_info.cancel_requested)


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
