"""Errors a user can cause by configuration; each message is one line saying
what to set."""

from __future__ import annotations


class ConfigError(ValueError):
    """Missing or wrong configuration; the message is one line saying what to set."""


class ConnectionFailed(RuntimeError):
    """One line saying which server could not be reached and what to set."""


class PayloadStorageError(ConnectionFailed):
    """The external payload store is missing or unreachable (one line)."""
