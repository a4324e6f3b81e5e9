"""Failed activities as one line each ("chat failed (attempt 3 of 12): the
model provider is unreachable at …; Temporal retries it"): what `run` shows
on the terminal (client/terminal_log.py) and what a worker prints, its
tracebacks kept for the log file or for ``DEEPRESEARCH_LOG_TRACEBACKS=1``."""

from __future__ import annotations

import logging

from workflows.activity_calls import (
    BOUNDED_MODEL_ATTEMPTS,
    BOUNDED_MODEL_ERRORS,
    FILE_CALL,
    MODEL_CALL,
    SPEECH_CALL,
    TOOL_CALL,
)

# How many attempts each activity gets, read from the options the workflow
# calls it with (workflows/activity_calls.py, workflows/side_calls.py).
_OPTIONS = {**TOOL_CALL, "chat": MODEL_CALL, "speak": SPEECH_CALL, "join_audio": FILE_CALL, "build_deck": FILE_CALL}
ATTEMPTS = {name: options["retry_policy"].maximum_attempts for name, options in _OPTIONS.items()}


FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"  # a log file's lines


def failed_activity(record: logging.LogRecord) -> str | None:
    """The one line for a record of a failed activity attempt; None for any other record."""
    info = getattr(record, "temporal_activity", None)
    if not (isinstance(info, dict) and record.exc_info and record.exc_info[1] is not None):
        return None
    err = record.exc_info[1]
    name, attempt = info.get("activity_type", "activity"), info.get("attempt", 1)
    message = " ".join(str(getattr(err, "message", None) or err).split())[:300]
    limit = ATTEMPTS.get(name)
    if name == "chat" and getattr(err, "type", None) in BOUNDED_MODEL_ERRORS:
        limit = BOUNDED_MODEL_ATTEMPTS  # a timeout or a loop: the activity stops there, not at the policy's 12
    if getattr(err, "non_retryable", False):
        return f"{name} failed: {message}"
    if limit and attempt >= limit:
        return f"{name} failed (attempt {attempt} of {limit}, the last): {message}"
    shown = f"{attempt} of {limit}" if limit else str(attempt)
    return f"{name} failed (attempt {shown}): {message}; Temporal retries it"


def plain_message(record: logging.LogRecord) -> str:
    """The record's message as a reader wants it: the SDK's activity and
    workflow loggers append their context as a Python dict ("… ({'activity_id':
    '9', 'activity_type': 'chat', …})"); that becomes a few words in front
    ("chat, run research-1a2b: …")."""
    message = record.getMessage()
    for key in ("temporal_activity", "temporal_workflow"):
        info = getattr(record, key, None)
        if isinstance(info, dict) and message.endswith(f" ({info})"):
            message = message[: -len(f" ({info})")]
            kind = info.get("activity_type") or info.get("workflow_type") or ""
            run = info.get("workflow_id")
            where = ", ".join(str(part) for part in (kind, f"run {run}" if run else "") if part)
            return f"{where}: {message}" if where else message
    return message


class OneLine(logging.Formatter):
    """A failed activity as one line; anything else as its message."""

    def format(self, record: logging.LogRecord) -> str:
        return failed_activity(record) or (plain_message(record).splitlines() or [""])[0][:300]


class WorkerLines(logging.Formatter):
    """A worker's log: time, level and logger as usual; a failed activity as
    its one line instead of the message and a traceback."""

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = failed_activity(record)
        if line is None and record.exc_info:
            return super().format(record)
        line = line or plain_message(record)
        return f"{self.formatTime(record)} {record.levelname} {record.name}: {line}"


# What a slow, busy or weak model does, said in full by its one line: a reply
# that looped, a model that did not answer in time, a provider's rate limit.
EXPECTED_FAILURES = frozenset(("ModelRepetition", "ModelTimeout", "ModelRateLimited"))


def retried_as_expected(record: logging.LogRecord) -> bool:
    """A failed activity attempt that Temporal retries, whose error is what
    a model does (``EXPECTED_FAILURES``): its traceback says nothing more."""
    from temporalio.exceptions import ApplicationError

    info = getattr(record, "temporal_activity", None)
    err = record.exc_info[1] if record.exc_info else None
    if not (isinstance(info, dict) and isinstance(err, ApplicationError) and not err.non_retryable):
        return False
    if err.type not in EXPECTED_FAILURES:
        return False
    limit = ATTEMPTS.get(info.get("activity_type", ""))
    return not (limit and info.get("attempt", 1) >= limit)


class FileLines(logging.Formatter):
    """A log file's lines: as usual, with tracebacks, but an expected,
    retried failure (``retried_as_expected``) as its one line."""

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        if not retried_as_expected(record):
            return super().format(record)
        return f"{self.formatTime(record)} {record.levelname} {record.name}: {failed_activity(record)}"


def worker_logging(env: dict | None = None) -> None:
    """The worker's log on stderr: INFO and up, one line per failed activity
    (``DEEPRESEARCH_LOG_TRACEBACKS=1``: with its traceback, as before)."""
    import os

    env = os.environ if env is None else env
    handler = logging.StreamHandler()
    if env.get("DEEPRESEARCH_LOG_TRACEBACKS") == "1":
        handler.setFormatter(logging.Formatter(FORMAT))
    else:
        handler.setFormatter(WorkerLines())
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.handlers[:] = [handler]
