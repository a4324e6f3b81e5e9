"""The memory limit of the worker's helper processes (PDF text, slide decks).

Each child sets it on itself, first thing in its ``main``: a ``preexec_fn``
would run Python between fork and exec in the multi-threaded worker, where a
lock another thread held at the fork is never released in the child, which
then never execs, and the worker waits for it for ever (seen in CI).
"""

from __future__ import annotations

import resource

CHILD_MEMORY = 2 << 30  # bytes of address space


def limit_memory(limit: int = CHILD_MEMORY) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
