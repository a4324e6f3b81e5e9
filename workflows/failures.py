"""A run that cannot go on because a stored file it needs is gone: how the
workflow tells, and where its partial report travels (the failure's
details), read by `deepresearch result`."""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ApplicationError

PARTIAL_REPORT = "partial_report"  # key in a failure's details: the report written before failing


def blob_missing(err: BaseException) -> bool:
    """Whether an activity failed because a stored blob is gone (the
    activity raised ``infra.blobs.BlobNotFound``, type ``BlobNotFound``)."""
    cause = err.__cause__ if isinstance(err, ActivityError) else None
    return isinstance(cause, ApplicationError) and cause.type == "BlobNotFound"


def partial_report(err: BaseException) -> str | None:
    """The report a failed run wrote from what it found before failing, if
    it wrote one (``err``: the client's WorkflowFailureError)."""
    cause = getattr(err, "cause", None)
    details = getattr(cause, "details", None) or ()
    found = details[0].get(PARTIAL_REPORT) if details and isinstance(details[0], dict) else None
    return found if isinstance(found, str) and found.strip() else None
