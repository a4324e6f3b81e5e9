"""`deepresearch worker`: run a worker until Ctrl-C (same as `python worker.py`)."""

from __future__ import annotations

import argparse
import asyncio

from client.options import connection
from infra.local_models import local_settings
from infra.process import stop_on_signals


async def main(args: argparse.Namespace) -> int:
    from infra.log_lines import worker_logging
    from worker import run_worker

    worker_logging()  # a failed activity is one line; DEEPRESEARCH_LOG_TRACEBACKS=1 for the traceback
    conn = connection(args)
    stop = asyncio.Event()
    print(f"worker for task queue {conn.task_queue!r} on {conn.address}; Ctrl-C to stop", flush=True)
    settings, local_line = await local_settings()
    if local_line:
        print(local_line, flush=True)
    with stop_on_signals(stop):
        await run_worker(conn, settings, stop=stop)
    print("worker stopped")
    return 0
