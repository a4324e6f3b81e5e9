"""`deepresearch worker`: run a worker until Ctrl-C (same as `python worker.py`)."""

from __future__ import annotations

import argparse
import asyncio

from client.options import connection
from infra.process import stop_on_signals
from infra.settings import Settings


async def main(args: argparse.Namespace) -> int:
    from worker import run_worker

    conn = connection(args)
    stop = asyncio.Event()
    print(f"worker for task queue {conn.task_queue!r} on {conn.address}; Ctrl-C to stop", flush=True)
    with stop_on_signals(stop):
        await run_worker(conn, Settings.from_env(), stop=stop)
    print("worker stopped")
    return 0
