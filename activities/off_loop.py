"""CPU-heavy reading of a model's reply (json-repair of tool-call arguments,
plans and podcast scripts, big stream events) off the worker's event loop,
with a time limit: the loop also answers every run's queries and polls for
work, so it must never wait for one reply to be read.

The threads are this module's own executor's (``REPLIES``), not the default
one: other work in threads (a page's conversion, a ranking of passages)
never makes a reply wait for a thread, and fail as unreadable after the
time limit (issue 36: six pages converting made a trivial reply fail so).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from temporalio.exceptions import ApplicationError

T = TypeVar("T")
READ_SECONDS = 30.0  # json-repair's input is bounded (MAX_REPAIR_CHARS): seconds at worst
REPLIES = ThreadPoolExecutor(max_workers=min(32, (os.cpu_count() or 1) + 4), thread_name_prefix="model-reply")


async def off_loop(fn: Callable[..., T], *args: object, seconds: float = READ_SECONDS) -> T:
    """``fn(*args)`` in a thread of ``REPLIES``, waited for at most
    ``seconds``; past that the call fails (retryable: the model is asked
    again) and the thread, whose input is bounded, ends on its own."""
    try:
        async with asyncio.timeout(seconds):
            return await in_pool(REPLIES, fn, *args)
    except TimeoutError:
        raise ApplicationError(
            f"reading the model's reply took longer than {seconds:g} s", type="ModelReplyUnreadable"
        ) from None


async def in_pool(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` in a thread of ``pool`` (a module's own: work of one kind
    never waits behind another's), the caller's context carried as
    ``asyncio.to_thread`` carries it; no time limit."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(pool, call)
