"""Talking to a run from the CLI: its status, the reasons Temporal gives,
what to do next, and the exit code. Light to import (the SDK's client and
the models are loaded where used), so the quick `status` can use it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.service import RPCError, RPCStatusCode

from client.ids import thread_id
from infra.errors import cli_name

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

    from infra.connection import Connection
    from workflows.models import ResearchResult, RunStatus


POLL_SECONDS = 0.5
QUERY_TIMEOUT = timedelta(seconds=5)


async def query_status(handle: WorkflowHandle) -> RunStatus:
    from workflows.models import RunStatus

    return await handle.query("status", result_type=RunStatus, rpc_timeout=QUERY_TIMEOUT)


async def poll_status(handle: WorkflowHandle) -> RunStatus | None:
    """The status, or None while no worker answers (or the run is just starting)."""
    from temporalio.client import WorkflowQueryFailedError

    try:
        return await query_status(handle)
    except WorkflowQueryFailedError:
        return None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise
        return None


def next_action(status: RunStatus, workflow_id: str) -> str | None:
    if status.review_pending:
        # The version names the plan shown: if it is replaced before the
        # review arrives (another reviewer's edit), the review is refused.
        version = f" --plan-version {status.plan_version}" if status.plan_version else ""
        return f"review the plan: {cli_name()} review {workflow_id}{version} --accept  (or --edit TEXT)"
    if status.phase == "clarifying" and status.pending_question:
        return f"answer the question: {cli_name()} answer {workflow_id} TEXT"
    if status.phase == "completed" and getattr(status, "outcome", None) == "completed":
        # where follow-up questions go, asked or not yet (`status` of the thread shows them)
        return f"ask a follow-up: {cli_name()} ask {workflow_id} QUESTION  (its thread: {thread_id(workflow_id)})"
    if status.phase in ("investigating", "planning", "researching", "reporting"):
        return f'steer it while it runs: {cli_name()} steer {workflow_id} "NOTE"  (--url URL for a page to read)'
    return None


DEMO_TASK_QUEUE = "deep-research-demo"  # client/demo/backend.py: the demo's runs


def worker_command(queue: str) -> str:
    """The command that starts a worker for task queue ``queue``, quoted: the
    demo's queue takes the demo's worker (the scripted model, no key)."""
    from infra.connection import DEFAULT_TASK_QUEUE

    if queue == DEMO_TASK_QUEUE:
        return f"`{cli_name()} worker --demo` (the demo's scripted model, no key needed)"
    if queue == DEFAULT_TASK_QUEUE:
        return f"`{cli_name()} worker`"
    return f"`{cli_name()} worker --task-queue {queue}`"


def waiting_for_worker(conn: Connection) -> str:
    return (
        f"waiting for a worker on task queue {conn.task_queue!r}: start one with "
        f"{worker_command(conn.task_queue)} (or pass --worker)"
    )


def exit_code(result: ResearchResult) -> int:
    return 1 if result.status == "plan_failed" else 0


def save(path: Path, content: str | bytes, said: str = "saved to") -> None:
    """Write a file and say where; ``-`` writes it to standard output instead
    (``result ID --format pdf -o - | ...``), saying nothing."""
    if str(path) == "-":
        data = content if isinstance(content, bytes) else content.encode("utf-8")
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    print(f"{said} {write_file(path, content)}")


def write_file(path: Path, content: str | bytes) -> Path:
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@dataclass
class Stuck:
    """A run whose workflow task keeps failing (a bug, a bad deploy)."""

    attempts: int
    error: str
    phase: str | None  # the last phase the run reported

    def line(self, workflow_id: str) -> str:
        said = f"run {workflow_id} is stuck: its workflow task has failed {self.attempts} times ({self.error}); "
        if payload_gone(self.error):  # no worker can resume it, and a cancel never reaches its code
            return said + (
                "a stored input it needs is gone, so it cannot go on: end it with "
                f"`temporal workflow terminate --workflow-id {workflow_id}` or in the Temporal UI "
                "(see docs/operations.md)"
            )
        return said + (
            f"deploy a fixed worker and it resumes by itself, or end it with "
            f"`{cli_name()} cancel {workflow_id}` (see docs/operations.md)"
        )


def payload_gone(error: str) -> bool:
    """Whether a workflow task failed because an external payload file is
    missing (infra/payload_storage.py's message)."""
    from infra.payload_storage import MISSING_PAYLOAD

    return MISSING_PAYLOAD in error and " is missing under " in error


async def stuck(client: Client, handle: WorkflowHandle) -> Stuck | None:
    """Whether the run's workflow task keeps failing, from the workflow's
    description (attempts) and history (the failure's message)."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.enums.v1 import EventType
    from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
    from temporalio.client import WorkflowExecutionStatus

    from workflows.models import PHASE_ATTRIBUTE

    described = await handle.describe()
    if described.status != WorkflowExecutionStatus.RUNNING:
        return None
    attempts = described.raw_description.pending_workflow_task.attempt
    if attempts < 2:
        return None
    history = await client.workflow_service.get_workflow_execution_history_reverse(
        GetWorkflowExecutionHistoryReverseRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=handle.id),
            maximum_page_size=200,
        )
    )
    error = "no failure recorded"
    for event in history.history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            failure = event.workflow_task_failed_event_attributes.failure
            error = " ".join((failure.message or failure.cause.message or "unknown failure").split())[:300]
            break
    return Stuck(attempts, error, described.typed_search_attributes.get(PHASE_ATTRIBUTE))
