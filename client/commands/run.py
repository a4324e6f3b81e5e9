"""`deepresearch run`: start a run (and a local server and worker if none is
reachable), follow it, review at the terminal, print and save the report."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from urllib.parse import urlsplit

from client import terminal_log
from client.devserver import DevServer, free_port, port_open, serving
from client.display import make_console, print_report
from client.interactive import follow_run
from client.options import DEV_SERVER_PORT, connection, dev_server_ports, report_path, research_input
from client.report_files import render
from client.runs import check_continue_from, new_workflow_id, start_research
from client.talk import exit_code, worker_command, write_file
from client.wording import usage_text
from infra.connection import Connection
from infra.errors import ConfigError, cli_name
from infra.local_models import local_settings
from infra.process import cancel_on_sigterm
from infra.settings import Settings, check_model_endpoint, private_dir
from infra.temporal import connect


def dev_ports() -> tuple[int, int]:
    """The embedded dev server's gRPC and UI ports as configured
    (client/options.py), with a free UI port if that one is taken."""
    port, ui = dev_server_ports()
    return port, ui if not port_open("127.0.0.1", ui) else free_port()


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


def embedded_server(conn: Connection, port: int, ui_port: int | None) -> DevServer:
    """The embedded dev server, its state and log in the data dir (not started yet)."""
    return DevServer(
        db_file=conn.data_dir / "temporal.db",
        port=port,
        ui_port=ui_port,
        log_file=conn.data_dir / "temporal-server.log",
    )


def server_to_use(conn: Connection, port: int) -> tuple[Connection, bool]:
    """Where the command's runs go, and whether to start the embedded
    server there (True): the address given; else the server at the embedded
    server's port; else the server that serves the data dir's ``temporal.db``
    on another port (its lock says where, client/embedded_db.py: a second
    server on the file is never started); else the embedded one, on ``port``."""
    if conn.address_given:
        return conn, False
    conn = dataclasses.replace(conn, address=f"localhost:{port}")
    if port_open(*split_address(conn.address)):
        return conn, False
    if address := serving(conn.data_dir / "temporal.db"):
        return dataclasses.replace(conn, address=address), False
    return conn, True


@contextmanager
def own_server(conn: Connection, console) -> Iterator[tuple[Connection, str | None]]:
    """The connection to use and the Temporal UI's address (None: not known):
    the embedded dev server, started for the block, when no address was given
    and none answers at its address or serves its database (as `run` does);
    else the server there."""
    port, ui_port = dev_ports()
    given = conn.address_given
    conn, start = server_to_use(conn, port)
    if not start:
        if not given:
            console.print(f"using the Temporal server at {conn.address} (not started by this command)", markup=False)
        yield conn, None
        return
    with embedded_server(conn, port, ui_port) as server:
        console.print(
            f"started the embedded Temporal dev server at {server.address} (state in {server.db_file}); "
            f"Temporal UI: {server.ui_url}",
            markup=False,
        )
        yield dataclasses.replace(conn, address=server.address), server.ui_url


def resume_hint(workflow_id: str, conn: Connection, started_server: bool) -> str:
    where = (
        f" (its state is in {conn.data_dir / 'temporal.db'}; it goes on when `{cli_name()} server` "
        f"and {worker_command(conn.task_queue)} run)"
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
    if args.attach:
        from client.commands import attach

        args.workflow_id = args.attach
        return await attach.main(args)
    request = research_input(args)
    dev_port, ui_port = dev_ports()
    conn, start_server = server_to_use(connection(args), dev_port)
    port = split_address(conn.address)[1]
    with_worker = start_server if args.worker is None else args.worker
    settings, local_line = await local_settings() if with_worker else (None, None)
    if settings is not None:
        try:
            settings.check()
            await check_model_endpoint(settings)  # a wrong OPENAI_BASE_URL fails now, not after retries
        except ConfigError as err:
            keyless = not settings.openai_api_key and not settings.openai_base_url
            line = no_model_line() if keyless else str(err)
            raise ConfigError(f"{line} (`{cli_name()} doctor` checks the whole setup)") from None
    console = make_console()
    if local_line:
        console.print(local_line, markup=False)
    private_dir(conn.data_dir)
    log_file = terminal_log.setup(conn.data_dir)
    server = None
    async with AsyncExitStack() as stack:
        stack.enter_context(cancel_on_sigterm())
        if start_server:
            server = stack.enter_context(embedded_server(conn, port, ui_port))
            conn = dataclasses.replace(conn, address=server.address)
            console.print(
                f"started the embedded Temporal dev server at {server.address} (state in {server.db_file}); "
                f"Temporal UI: {server.ui_url}",
                markup=False,
            )
        else:
            console.print(f"using the Temporal server at {conn.address} (not started by this command)", markup=False)
        client = await connect(conn)
        worker = await stack.enter_async_context(in_process_worker(conn, settings)) if settings else None
        if worker is None and not await has_pollers(client, conn):
            console.print(
                f"no worker polls task queue {conn.task_queue!r} on {conn.address}: start one with "
                f"{worker_command(conn.task_queue)} in another terminal, or run again with --worker",
                style="yellow",
                markup=False,
            )
        if note := await check_continue_from(client, conn, request):
            console.print(note, style="yellow", markup=False)
        handle = await start_research(client, conn, request, args.id or new_workflow_id())
        console.print(f"run {handle.id} started; details in {log_file}", markup=False)
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
    if server is not None:
        console.print(
            f"The Temporal UI stopped with the embedded server. To see this run there again: `{cli_name()} server` "
            f"(same data), then open http://localhost:{dev_server_ports()[1]}",
            markup=False,
        )
    return exit_code(result)


def no_model_line() -> str:
    import os

    from infra.local_models import candidates

    probed = ", ".join(urlsplit(url).netloc for _, url in candidates(os.environ))
    return (
        f"OPENAI_API_KEY is not set and no local model server answers ({probed}): export your key, "
        "start a local model server (docs/local-models.md), or set OPENAI_BASE_URL"
    )


async def has_pollers(client, conn: Connection) -> bool:
    """Whether any worker polls the run's task queue on this server now."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    try:
        described = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=conn.namespace,
                task_queue=TaskQueue(name=conn.task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
    except Exception:  # noqa: BLE001 - no rights to ask: do not warn
        return True
    return bool(described.pollers)
