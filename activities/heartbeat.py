"""Heartbeat on a timer while an activity waits on the network or a process,
so Temporal notices a dead worker within the heartbeat timeout (see
workflows/activity_calls.py) instead of the much longer start-to-close timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio import activity

EVERY_SECONDS = 2.0  # well inside the 10 s heartbeat timeouts


@asynccontextmanager
async def heartbeating(every: float = EVERY_SECONDS) -> AsyncIterator[None]:
    """No-op outside an activity (tests call activities directly)."""
    if not activity.in_activity():
        yield
        return

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
