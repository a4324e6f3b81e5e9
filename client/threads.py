"""Asking a finished run a follow-up question: shared by `deepresearch ask`
and the desk. The question goes to the run's thread (workflow ``FollowUp``,
id ``<run>-ask``) as the Update ``ask``, which starts the thread when it is
not there yet (update-with-start, so two first questions at once still make
one thread)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from client.errors import CliError
from client.ids import thread_id
from client.side_outputs import finished_report
from client.talk import worker_command
from infra.errors import cli_name
from workflows.follow_up_models import MAX_QUESTION, FollowUpAnswer, FollowUpInput

if TYPE_CHECKING:
    from temporalio.client import Client

    from infra.connection import Connection


async def ask(client: Client, conn: Connection, run_id: str, question: str, review: bool = False) -> asyncio.Task:
    """Send the question; returns the task that resolves to the
    ``FollowUpAnswer``. One line (CliError) when the run has no report, the
    question is empty or no worker serves the run's task queue."""
    from temporalio.client import WithStartWorkflowOperation
    from temporalio.common import TypedSearchAttributes, WorkflowIDConflictPolicy

    from client.commands.run import has_pollers
    from infra.search_attributes import OWNER_ATTRIBUTES, owner_pairs, search_attributes_ready

    question = question.strip()
    if not question:
        raise CliError("the question is empty")
    if len(question) > MAX_QUESTION:
        raise CliError(
            f"the question is {len(question):,} characters long; a follow-up question may have at most "
            f"{MAX_QUESTION:,}: shorten it (or start a run on it: `{cli_name()} run QUESTION --continue-from {run_id}`)"
        )
    source = await finished_report(client, run_id, conn.namespace)  # one line when there is no report
    await check_thread_id(client, run_id)
    queue = (await client.get_workflow_handle(run_id).describe()).task_queue or conn.task_queue
    if not await has_pollers(client, dataclasses.replace(conn, task_queue=queue)):
        raise CliError(
            f"no worker polls task queue {queue!r}, the queue of run {run_id}: start one with {worker_command(queue)}"
        )
    ready = await search_attributes_ready(client.service_client, conn.namespace)
    given = FollowUpInput(
        run_id=run_id,
        search_attributes=bool(ready),
        owner=source.owner,  # the run's: the thread and its research runs inherit them
        shared_with=source.shared_with,
        owner_attributes=OWNER_ATTRIBUTES <= ready,
    )
    start = WithStartWorkflowOperation(
        "FollowUp",
        given,
        id=thread_id(run_id),
        task_queue=queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        memo={"run": run_id, "questions": 0},
        static_summary=f"follow-up questions on run {run_id}"[:200],
        search_attributes=TypedSearchAttributes(owner_pairs(ready, source.owner, source.shared_with)),
    )
    return asyncio.create_task(
        client.execute_update_with_start_workflow(
            "ask", args=[question, bool(review)], start_workflow_operation=start, result_type=FollowUpAnswer
        )
    )


async def check_thread_id(client: Client, run_id: str) -> None:
    """One line when the thread's id (``<run>-ask``) is taken by a workflow
    that is not a follow-up thread (a run started with that id): Temporal
    would answer only "Update handler for 'ask' expected but not found"."""
    from temporalio.service import RPCError, RPCStatusCode

    taken = thread_id(run_id)
    try:
        described = await client.get_workflow_handle(taken).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return
        raise
    if described.workflow_type != "FollowUp":
        raise CliError(
            f"run {run_id}'s follow-up questions go to the workflow {taken}, but that id is taken by a "
            f"{described.workflow_type} workflow (a run started with that id), so it cannot take questions; "
            f"ask in a new run instead: `{cli_name()} run QUESTION --continue-from {run_id}`"
        )
