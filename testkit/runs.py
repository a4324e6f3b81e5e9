"""Driving a run from a test: start it, wait for a phase, keep its history."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from client.runs import start_research
from infra.connection import Connection
from workflows.models import ResearchInput, RunStatus

T = TypeVar("T")
HISTORIES = Path(__file__).parent.parent / "tests" / "histories"


async def start(client, task_queue: str, question: str, **options):
    conn = Connection(address="unused", task_queue=task_queue)
    request = ResearchInput(question=question, **options)
    return await start_research(client, conn, request, f"test-{uuid.uuid4().hex[:8]}")


async def finished(handle, seconds: float = 90):
    """The run's result, failing the test if it takes longer than ``seconds``."""
    async with asyncio.timeout(seconds):
        return await handle.result()


async def wait_for_phase(
    handle, phase: str, timeout: float = 90.0, *, plan_version: int | None = None, answers: int | None = None
) -> RunStatus:
    """The run's status once it is in ``phase`` and, when given, shows plan
    ``plan_version`` / has taken ``answers`` clarification answers. Right after
    an edit or an answer, a query can still see the phase it ended
    (``awaiting_review``, ``clarifying``), so a test that waits for the next
    one names which."""
    async with asyncio.timeout(timeout):
        while True:
            status = await handle.query("status", result_type=RunStatus)
            if (
                status.phase == phase
                and plan_version in (None, status.plan_version)
                and answers in (None, len(status.clarifications))
            ):
                return status
            await asyncio.sleep(0.1)


async def keep_history(handle, name: str) -> None:
    """With RECORD_HISTORIES=1, save the run's history for the replay suite."""
    if os.environ.get("RECORD_HISTORIES") == "1":
        history = await handle.fetch_history()
        HISTORIES.mkdir(exist_ok=True)
        (HISTORIES / f"{name}.json").write_text(history.to_json())


async def polled(probe: Callable[[], Awaitable[T]], done: Callable[[T], bool], seconds: float = 60.0) -> T:
    """``probe()`` again every 0.2 s until ``done`` holds of what it gave, or
    ``seconds`` have passed; the last answer either way (the caller asserts
    on it). For what Temporal's visibility store learns a moment late: a
    run just started or ended, a schedule just deleted."""
    deadline = time.monotonic() + seconds
    while not done(answer := await probe()) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    return answer
