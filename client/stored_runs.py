"""Reading runs when no Temporal server runs: `list`, `status` and `result`
start the embedded dev server on the data dir's SQLite file (where `run` and
`demo` keep their runs), headless on a free port, for the command's
duration, instead of failing with "cannot reach Temporal".

Only when no address was given (flag or TEMPORAL_ADDRESS), nothing answers
at the embedded server's address (localhost:7233 unless
DEEPRESEARCH_DEV_SERVER_PORT), and the data dir holds that file: otherwise
the command connects as always (and says so in one line if it cannot).
A server already serving that file on another port (a `server --port`, a
`run` or `worker --demo` told another port: its lock says where,
``client/embedded_db.py``) is read through instead; one that holds the file
and does not answer is named in one line. A second server is never started
on the file.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from client.options import dev_server_ports
from infra.connection import Connection
from infra.errors import cli_name


@dataclass
class Reading:
    conn: Connection
    embedded: bool  # the embedded server was started for this command: no worker serves any run


@contextmanager
def stored_runs(conn: Connection) -> Iterator[Reading]:
    """The connection to read runs through (see the module's doc)."""
    if conn.address_given:
        yield Reading(conn, False)
        return
    from client.devserver import DevServer, free_port, port_open, serving  # only when no address is given
    from client.embedded_db import DatabaseInUse

    port = dev_server_ports()[0]
    conn = dataclasses.replace(conn, address=f"localhost:{port}")
    db_file = conn.data_dir / "temporal.db"
    if port_open("127.0.0.1", port) or not db_file.is_file():
        yield Reading(conn, False)
        return
    for attempt in (1, 2):  # 2: another command started a server on it meanwhile
        if address := serving(db_file):
            say(
                f"no Temporal server at {conn.address}: reading the runs stored in {db_file} "
                f"through the server at {address}, which serves it"
            )
            yield Reading(dataclasses.replace(conn, address=address), False)
            return
        server = DevServer(db_file=db_file, port=free_port(), log_file=conn.data_dir / "temporal-server.log")
        try:
            server.start()
        except DatabaseInUse:
            if attempt == 2:
                raise
            continue
        break
    say(
        f"no Temporal server at {conn.address}: reading the runs stored in {db_file} "
        f"(the embedded server, started for this command; `{cli_name()} server` keeps it running)"
    )
    try:
        yield Reading(dataclasses.replace(conn, address=server.address), True)
    finally:
        server.stop()


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def no_worker_here(run_id: str, queue: str) -> str:
    """Why a run still going cannot be followed from the stored state alone."""
    from client.talk import worker_command
    from client.terminal_text import one_line

    return (
        f"run {one_line(run_id)} has not ended, and no server or worker runs now to take it on: start `{cli_name()} server` "
        f"and {worker_command(queue)}, and it goes on"
    )
