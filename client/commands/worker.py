"""`deepresearch worker`: run a worker until Ctrl-C (same as `python worker.py`).

`worker --demo` serves the demo's task queue with the demo's scripted model
and offline web (client/demo/backend.py): no key, nothing outside loopback;
it starts the embedded Temporal dev server when none runs (as `run` does),
so `ask`, `list`, `status` and a schedule work on the demo's runs."""

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
    if getattr(args, "demo", False):
        return await demo_worker(args)
    conn = connection(args)
    stop = asyncio.Event()
    settings, local_line = await local_settings()  # a bad setting: one line, before anything is said or started
    settings.check()
    print(f"worker for task queue {conn.task_queue!r} on {conn.address}; Ctrl-C to stop", flush=True)
    if local_line:
        print(local_line, flush=True)
    with stop_on_signals(stop):
        await run_worker(conn, settings, stop=stop)
    print("worker stopped")
    return 0


async def demo_worker(args: argparse.Namespace) -> int:
    from client.commands.run import own_server
    from client.demo.backend import DEMO_TASK_QUEUE, SCRIPTED, demo_backend, ignored_pace
    from client.display import make_console
    from infra.errors import cli_name
    from infra.settings import Settings
    from worker import run_worker

    ignored = ignored_pace()  # not a rate: refused before anything starts
    console = make_console()
    args.task_queue = getattr(args, "task_queue", None) or DEMO_TASK_QUEUE
    console.print(f"DEMO worker: {SCRIPTED}", style="bold yellow", markup=False)
    if ignored:
        console.print(ignored, markup=False)
    stop = asyncio.Event()
    with demo_backend() as backend, own_server(connection(args), console) as (conn, _):
        ready = (
            f"demo worker for task queue {conn.task_queue!r} on {conn.address} (offline web at {backend.web_url}); "
            f"in another terminal: `{cli_name()} ask ID QUESTION` on a demo run, `{cli_name()} list`; Ctrl-C to stop"
        )
        with stop_on_signals(stop):  # said once it polls: a question asked then finds it
            await run_worker(conn, Settings.from_env(), stop=stop, on_ready=lambda: console.print(ready, markup=False))
    print("worker stopped")
    return 0
