"""Sending a run an update (a plan review, a clarification answer) with a
bounded wait, for the CLI (`review`, `answer`) and the desk alike.

Temporal holds an update until a worker runs the workflow: with no worker
on the run's task queue, the SDK's ``execute_update`` waits for ever. So
after ``FIRST_LOOK`` seconds without an answer, the run's own task queue
(from its description: the one it was started on, not the CLI's) is
asked whether any worker has polled it lately; if none has, that is said
at once. With a worker, the wait ends after ``WAIT`` seconds all the same,
with one line saying so. Either line says that Temporal keeps the update:
a worker that starts later hands it to the run (a review sent while the
run's worker was down is applied when it comes back), so look at the run
before sending it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from client.errors import CliError
from client.talk import worker_command
from infra.errors import cli_name

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.service import WorkflowService

FIRST_LOOK = 20.0  # seconds before looking for a worker (Temporal itself answers "not yet" after ~20 s)
WAIT = 60.0  # seconds in all
# A worker long-polls its task queue for up to about a minute at a time, so
# one that has not polled for longer than this is gone.
POLLED_LATELY = timedelta(seconds=90)
WHAT = {"submit_review": "review", "answer_clarification": "answer", "steer": "steer"}


async def run_task_queue(service: WorkflowService, namespace: str, workflow_id: str) -> tuple[str, bool]:
    """The run's task queue (from its description), and whether a worker has polled it lately."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, DescribeWorkflowExecutionRequest

    described = await service.describe_workflow_execution(
        DescribeWorkflowExecutionRequest(namespace=namespace, execution=WorkflowExecution(workflow_id=workflow_id)),
        retry=True,
    )
    queue = described.execution_config.task_queue.name
    pollers = await service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ),
        retry=True,
    )
    now = datetime.now(UTC)
    return queue, any(now - p.last_access_time.ToDatetime(tzinfo=UTC) < POLLED_LATELY for p in pollers.pollers)


def no_worker_line(workflow_id: str, queue: str, update: str) -> str:
    what = WHAT.get(update, update)
    return (
        f"no worker polls task queue {queue!r} (run {workflow_id}'s): the {what} has not reached the run yet "
        f"and may still reach it when a worker starts ({worker_command(queue)}); "
        f"see `{cli_name()} status {workflow_id}` before sending it again"
    )


async def execute_update(
    client: Client,
    workflow_id: str,
    update: str,
    args: Sequence[object],
    update_id: str | None = None,
    waited=0.0,
    result_type: type = str,
) -> Any:
    """The update's result, through the SDK's full client (a rejection raises
    ``WorkflowUpdateFailedError``); CliError when no worker polls the run's
    task queue, or none answered within ``WAIT`` seconds. ``waited``: seconds
    already spent waiting (the quick way's try)."""
    handle = client.get_workflow_handle(workflow_id)
    task = asyncio.ensure_future(handle.execute_update(update, args=list(args), id=update_id, result_type=result_type))
    try:
        first = max(FIRST_LOOK - waited, 0.0)
        if first and (await asyncio.wait({task}, timeout=first))[0]:
            return task.result()
        queue, polled = await run_task_queue(client.workflow_service, client.namespace, workflow_id)
        if not polled:
            raise CliError(no_worker_line(workflow_id, queue, update))
        if (await asyncio.wait({task}, timeout=max(WAIT - max(waited, FIRST_LOOK), 1.0)))[0]:
            return task.result()
        raise CliError(
            f"run {workflow_id} did not take the {WHAT.get(update, update)} within {int(WAIT)} s, though a worker polled "
            f"its task queue {queue!r} lately (it may have stopped, and the run may still take the "
            f"{WHAT.get(update, update)} when a worker comes back; see `{cli_name()} status {workflow_id}` "
            "before sending it again)"
        )
    finally:
        task.cancel()
