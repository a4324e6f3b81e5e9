"""`deepresearch run`: start a run (and a local server and worker if none is
reachable), follow it, review at the terminal, print and save the report."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from client.devserver import DevServer, port_open
from client.display import make_console, print_report
from client.export import render
from client.interactive import follow_run
from client.options import connection, report_path, research_input
from client.runs import new_workflow_id, start_research
from client.talk import exit_code, write_file
from client.wording import usage_text
from infra.process import cancel_on_sigterm
from infra.settings import Settings, private_dir
from infra.temporal import Connection, cli_name, connect

DEV_SERVER_PORT = 7233
DEV_UI_PORT = 8233


@asynccontextmanager
async def in_process_worker(conn: Connection, settings: Settings) -> AsyncIterator[asyncio.Task]:
    from worker import run_worker

    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(conn, settings, stop=stop))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait({task})  # its failure, if any, was reported by follow_run


def resume_hint(workflow_id: str, conn: Connection, started_server: bool) -> str:
    where = (
        f" (its state is in {conn.data_dir / 'temporal.db'}; it goes on when `{cli_name()} server` "
        f"and `{cli_name()} worker` run)"
        if started_server
        else ""
    )
    return (
        f"\nThe run {workflow_id} continues durably{where}. Follow it with "
        f"`{cli_name()} watch {workflow_id}` or get the report with `{cli_name()} result {workflow_id}`."
    )


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "localhost", int(port or DEV_SERVER_PORT)


async def main(args: argparse.Namespace) -> int:
    request = research_input(args)
    conn = connection(args)
    host, port = split_address(conn.address)
    start_server = not conn.address_given and not port_open(host, port)
    with_worker = start_server if args.worker is None else args.worker
    settings = Settings.from_env() if with_worker else None
    if settings is not None:
        settings.check()
    console = make_console()
    private_dir(conn.data_dir)
    async with AsyncExitStack() as stack:
        stack.enter_context(cancel_on_sigterm())
        if start_server:
            server = DevServer(
                db_file=conn.data_dir / "temporal.db",
                port=port,
                ui_port=DEV_UI_PORT,
                log_file=conn.data_dir / "temporal-server.log",
            )
            console.print(f"starting the Temporal dev server (state in {server.db_file})", markup=False)
            stack.enter_context(server)
            conn = dataclasses.replace(conn, address=server.address)
            console.print(f"Temporal UI: {server.ui_url}", markup=False)
        client = await connect(conn)
        worker = await stack.enter_async_context(in_process_worker(conn, settings)) if settings else None
        handle = await start_research(client, conn, request, args.id or new_workflow_id())
        console.print(f"run {handle.id} started", markup=False)
        try:
            result = await follow_run(client, handle, conn, console, worker)
        except asyncio.CancelledError:
            console.print(resume_hint(handle.id, conn, start_server), markup=False)
            local = [name for name, ours in (("worker", worker), ("Temporal server", start_server)) if ours]
            if local:
                console.print(f"stopping the local {' and '.join(local)}…", markup=False)
            raise
    print_report(console, result.final_report)
    path, fmt = report_path(args, conn.data_dir / "reports", handle.id)
    path = write_file(path, render(result, fmt))
    console.print(f"run {handle.id}: {result.status}; {usage_text(result.usage)}", markup=False)
    console.print(f"report saved to {path}", markup=False)
    return exit_code(result)
