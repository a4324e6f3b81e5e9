"""`deepresearch server`: the embedded Temporal dev server with its UI, until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
from contextlib import suppress

from client.devserver import DevServer, port_open
from client.errors import CliError
from client.options import dev_server_ports
from infra.process import stop_on_signals
from infra.settings import data_dir, private_dir


async def main(args: argparse.Namespace) -> int:
    configured_port, configured_ui = dev_server_ports()
    port = args.port or configured_port
    if port_open("127.0.0.1", port):
        raise CliError(f"port {port} is in use: is a Temporal server already running? (see --port)")
    folder = private_dir(data_dir())
    server = DevServer(
        db_file=args.db or folder / "temporal.db",
        port=port,
        ui_port=args.ui_port or configured_ui,
        log_file=folder / "temporal-server.log",
    )
    stop = asyncio.Event()
    with stop_on_signals(stop), server:  # a signal while it starts stops it too
        print(f"Temporal dev server at {server.address}, UI at {server.ui_url}", flush=True)
        print(f"state in {server.db_file}, log in {server.log_file}; Ctrl-C to stop", flush=True)
        while not stop.is_set():
            if server.process is None or server.process.poll() is not None:
                raise CliError(f"the Temporal dev server exited; see {server.log_file}")
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    print("server stopped")
    return 0
