"""Errors a user can cause, as one line each."""

from __future__ import annotations

import argparse


class CliError(Exception):
    """A one-line error for the user."""


class UpdateRejected(Exception):
    """A workflow rejected an update (a review, an answer); the message is its
    reason. Raised by the quick way (client/quick.py) where the full client
    raises WorkflowUpdateFailedError."""


def error_line(err: Exception, args: argparse.Namespace) -> str | None:
    """The one line to show for an error the user can cause; None for a bug."""
    from temporalio.exceptions import WorkflowAlreadyStartedError
    from temporalio.service import RPCError, RPCStatusCode

    from infra.connection import Connection
    from infra.errors import ConfigError, ConnectionFailed, cli_name

    workflow_id = getattr(args, "workflow_id", None)
    if isinstance(err, CliError | ConnectionFailed | ConfigError):
        return str(err)
    if isinstance(err, UpdateRejected):
        return f"{args.command} rejected: {err}"
    if isinstance(err, WorkflowAlreadyStartedError):
        return f"a run with id {err.workflow_id} is already running"
    if isinstance(err, RPCError):
        if err.status == RPCStatusCode.NOT_FOUND and workflow_id and "namespace" not in err.message.lower():
            if "completed" in err.message:
                return f"run {workflow_id} has already finished (see `{cli_name()} result {workflow_id}`)"
            return (
                f"no run with id {workflow_id} in namespace {Connection.from_env(namespace=args.namespace).namespace}"
            )
        return f"Temporal: {err.message}"
    # The SDK's full client's own errors (loaded only now: the quick way does without it).
    from temporalio.client import WorkflowFailureError, WorkflowQueryFailedError, WorkflowUpdateFailedError

    if isinstance(err, WorkflowUpdateFailedError):
        return f"{args.command} rejected: {rejection_reason(err)}"
    if isinstance(err, WorkflowFailureError):
        from workflows.failures import partial_report

        where = f" (what it found: `{cli_name()} result {workflow_id}`)" if workflow_id and partial_report(err) else ""
        return f"the run failed: {failure_message(err)}{where}"
    if isinstance(err, WorkflowQueryFailedError):
        return f"the status query failed: {err.message}"
    return None


def rejection_reason(err) -> str:
    """The reason a workflow gave for rejecting an update."""
    return getattr(err.cause, "message", None) or str(err.cause)


def failure_message(err: BaseException) -> str:
    from temporalio.client import WorkflowFailureError

    messages: list[str] = []
    cause: BaseException | None = err.cause if isinstance(err, WorkflowFailureError) else err
    while cause is not None:
        text = getattr(cause, "message", None) or str(cause)
        if text and text not in messages:
            messages.append(text)
        cause = cause.__cause__
    # Temporal's wrappers ("Activity task failed") say less than what they wrap.
    said = [m for m in messages if m not in _WRAPPERS] or messages
    return ": ".join(said) or "unknown failure"


_WRAPPERS = ("Activity task failed", "Child workflow execution failed", "Workflow execution failed")
