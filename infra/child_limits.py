"""The limits of helper processes: the worker's (PDF text, slide decks) and
the CLI's (PDF and Word exports).

Each child sets them on itself, first thing in its ``main``: a ``preexec_fn``
would run Python between fork and exec in the multi-threaded worker, where a
lock another thread held at the fork is never released in the child, which
then never execs, and the worker waits for it for ever (seen in CI).
"""

from __future__ import annotations

import resource

CHILD_MEMORY = 2 << 30  # bytes of address space


def _lower(kind: int, soft: int, hard: int) -> None:
    """Never above a limit already set (a process may not raise its hard limit)."""
    _, current = resource.getrlimit(kind)
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    resource.setrlimit(kind, (soft, hard))


def limit_memory(limit: int = CHILD_MEMORY) -> None:
    _lower(resource.RLIMIT_AS, limit, limit)


def limit_cpu(seconds: int) -> None:
    """The kernel stops the process (SIGXCPU, then SIGKILL) after ``seconds``
    of CPU time, even when the parent that should have stopped it is gone."""
    _lower(resource.RLIMIT_CPU, seconds, seconds + 5)
