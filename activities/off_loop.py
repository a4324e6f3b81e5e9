"""CPU-heavy reading of a model's reply (json-repair of tool-call arguments,
plans and podcast scripts) off the worker's event loop, with a time limit:
the loop also answers every run's queries and polls for work, so it must
never wait for one reply to be read."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from temporalio.exceptions import ApplicationError

T = TypeVar("T")
READ_SECONDS = 30.0  # json-repair's input is bounded (MAX_REPAIR_CHARS): seconds at worst


async def off_loop(fn: Callable[..., T], *args: object, seconds: float = READ_SECONDS) -> T:
    """``fn(*args)`` in a thread, waited for at most ``seconds``; past that the
    call fails (retryable: the model is asked again) and the thread, whose
    input is bounded, ends on its own."""
    try:
        async with asyncio.timeout(seconds):
            return await asyncio.to_thread(fn, *args)
    except TimeoutError:
        raise ApplicationError(
            f"reading the model's reply took longer than {seconds:g} s", type="ModelReplyUnreadable"
        ) from None
