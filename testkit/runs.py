"""Driving a run from a test: start it, wait for a phase, keep its history."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from client.runs import start_research
from infra.connection import Connection
from workflows.models import ResearchInput, RunStatus

HISTORIES = Path(__file__).parent.parent / "tests" / "histories"


async def start(client, task_queue: str, question: str, **options):
    conn = Connection(address="unused", task_queue=task_queue)
    request = ResearchInput(question=question, **options)
    return await start_research(client, conn, request, f"test-{uuid.uuid4().hex[:8]}")


async def wait_for_phase(handle, phase: str, timeout: float = 30.0) -> RunStatus:
    async with asyncio.timeout(timeout):
        while True:
            status = await handle.query("status", result_type=RunStatus)
            if status.phase == phase:
                return status
            await asyncio.sleep(0.1)


async def keep_history(handle, name: str) -> None:
    """With RECORD_HISTORIES=1, save the run's history for the replay suite."""
    if os.environ.get("RECORD_HISTORIES") == "1":
        history = await handle.fetch_history()
        HISTORIES.mkdir(exist_ok=True)
        (HISTORIES / f"{name}.json").write_text(history.to_json())
