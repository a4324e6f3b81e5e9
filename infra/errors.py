"""Errors a user can cause by configuration; each message is one line saying
what to set, naming the CLI as the user runs it (``cli_name``)."""

from __future__ import annotations

import os


def cli_name() -> str:
    """How the user runs the CLI: `./dr` when they came through it (it sets
    DEEPRESEARCH_CLI), else `deepresearch`, so every hint works as printed."""
    return os.environ.get("DEEPRESEARCH_CLI") or "deepresearch"


class ConfigError(ValueError):
    """Missing or wrong configuration; the message is one line saying what to set."""


class ConnectionFailed(RuntimeError):
    """One line saying which server could not be reached and what to set."""


class PayloadStorageError(ConnectionFailed):
    """The external payload store is missing or unreachable (one line)."""
