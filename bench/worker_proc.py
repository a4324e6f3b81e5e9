"""A worker in its own process, so its memory can be measured alone:

    python -m bench.worker_proc

Like ``python worker.py`` (configured from the environment), with
``max_concurrent_activities`` from ``BENCH_MAX_ACTIVITIES``. Prints
``ready`` once polling, and stops on SIGTERM or when stdin closes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from infra.connection import Connection
from infra.settings import Settings
from infra.temporal import connect
from worker import build_worker


async def main() -> None:
    conn = Connection.from_env()
    settings = Settings.from_env()
    settings.check()
    client = await connect(conn)
    slots = int(os.environ.get("BENCH_MAX_ACTIVITIES", "300"))
    worker, held = build_worker(client, settings, conn.task_queue, max_concurrent_activities=slots)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not sys.stdin.buffer.read1(1) else None)
    try:
        async with worker:
            print("ready", flush=True)
            await stop.wait()
    finally:
        await held.close_all()


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)  # sdk-python #300: skip interpreter teardown of the client
