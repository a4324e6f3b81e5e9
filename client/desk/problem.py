"""The desk's one error: a clear message for the page, with an HTTP status
(``app.Desk._answer`` turns it into the JSON answer)."""

from __future__ import annotations


class Problem(Exception):
    """One clear message for the page, with an HTTP status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
