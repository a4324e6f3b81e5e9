"""The embedded server's database is served by one server at a time, and a
damaged one is named at once (issue 36, items 6 and 7a).

Before: with a server on the data dir's ``temporal.db`` listening on another
port than the one `list`, `status` and `result` probe, they started a second
server on the same file ("Failed to lock shard", SQLITE_BUSY, and the false
"no server or worker runs now"); and a truncated ``temporal.db`` gave "the
Temporal dev server exited with code 1" or 10-20 s of the SDK's retry
warnings, then "database disk image is malformed", naming neither the file
nor what to do. Each command runs as a user runs it: a subprocess with a
data dir of its own and the embedded server's port set to a free one.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from client.commands.run import server_to_use
from client.devserver import DevServer, free_port
from client.embedded_db import DatabaseInUse, DatabaseLock, Holder, damage, holder
from infra.connection import Connection

ROOT = Path(__file__).resolve().parent.parent


def keyless_env(data: Path, **extra: str) -> dict[str, str]:
    """The CLI's environment with no address given: the data dir ``data``,
    the embedded server's port a free one where nothing listens."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DEEPRESEARCH_"))}
    return (
        env
        | {
            "PYTHONPATH": str(ROOT),
            "DEEPRESEARCH_DATA_DIR": str(data),
            "DEEPRESEARCH_DEV_SERVER_PORT": str(free_port()),
            "DEEPRESEARCH_DEV_UI_PORT": str(free_port()),
            "COLUMNS": "200",
        }
        | extra
    )


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


async def visible(client: Client, workflow_id: str) -> None:
    """The visibility store learns of a new run a moment after it starts."""
    deadline = time.monotonic() + 30
    while not [w async for w in client.list_workflows(f'WorkflowId="{workflow_id}"')]:
        assert time.monotonic() < deadline, f"{workflow_id} never showed in a listing"
        await asyncio.sleep(0.2)


async def test_commands_read_through_the_server_that_serves_the_database_and_never_start_a_second(tmp_path):
    data = tmp_path / "data"
    db = data / "temporal.db"
    with DevServer(db_file=db, log_file=data / "server.log") as server:  # on a port the commands are not told
        assert holder(db) == Holder(address=server.address, pid=os.getpid(), ready=True)
        client = await Client.connect(server.address)
        run_id = f"held-{uuid.uuid4().hex[:8]}"
        await client.start_workflow("DeepResearch", {"question": "x"}, id=run_id, task_queue="nobody-polls")
        await visible(client, run_id)
        env = keyless_env(data)

        listed = await asyncio.to_thread(cli, env, "list")
        assert listed.returncode == 0, listed.stderr
        assert run_id in listed.stdout
        assert f"through the server at {server.address}, which serves it" in listed.stderr, listed.stderr
        assert "Failed to lock shard" not in server.logged_since(0)

        second = await asyncio.to_thread(cli, env, "server", "--port", env["DEEPRESEARCH_DEV_SERVER_PORT"])
        assert second.returncode == 1 and second.stdout == ""
        assert second.stderr.count("\n") == 1, second.stderr
        assert second.stderr.startswith(
            f"error: {db} is in use by the Temporal dev server at {server.address} (started by process {os.getpid()})"
        )
        with pytest.raises(DatabaseInUse):
            DevServer(db_file=db).start()  # any other start: refused too

        # `run`, `demo`, `eval` and the --demo commands send their runs there
        port = int(env["DEEPRESEARCH_DEV_SERVER_PORT"])
        conn, start = server_to_use(Connection.from_env({"DEEPRESEARCH_DATA_DIR": str(data)}), port)
        assert (conn.address, start) == (server.address, False)
        await client.get_workflow_handle(run_id).terminate("test over")
    assert holder(db) is None  # let go when the server stopped


def test_a_database_held_by_a_server_that_does_not_answer_is_refused_naming_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    db = data / "temporal.db"
    db.write_bytes(b"")
    lock = DatabaseLock(db)
    silent = f"127.0.0.1:{free_port()}"
    lock.take(silent)
    lock.write(silent, "ready")
    try:
        listed = cli(keyless_env(data), "list")
    finally:
        lock.release()
    assert listed.returncode == 1 and listed.stdout == ""
    (line,) = listed.stderr.splitlines()
    assert line.startswith(f"error: {db} is in use by the Temporal dev server at {silent} (started by process ")
    assert "does not answer" in line
    assert not (data / "temporal-server.log").exists()  # no server was started on it


def sqlite_file(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, body BLOB)")
        db.executemany("INSERT INTO runs (body) VALUES (?)", [(os.urandom(300),) for _ in range(2000)])
    return path


@pytest.mark.parametrize("how", ["cut short", "not sqlite"])
def test_a_damaged_database_is_named_in_one_line_with_what_to_do(how, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    db = sqlite_file(data / "temporal.db")
    whole = db.read_bytes()
    db.write_bytes(whole[: len(whole) // 2] if how == "cut short" else b"not a database at all" * 10)
    for command in (["list"], ["status", "some-run"], ["result", "some-run"]):
        done = cli(keyless_env(data), *command)
        assert done.returncode == 1 and done.stdout == "", done.stdout
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"error: {db} is damaged ({how if how == 'cut short' else 'it is not an SQLite'}")
        assert f"move it aside (`mv {db} {db}.damaged`" in line
    assert not (data / "temporal-server.log").exists()  # found before a server was started


def test_pages_sqlite_finds_broken_are_damage_too(tmp_path):
    db = sqlite_file(tmp_path / "temporal.db")
    assert damage(db) is None
    with open(db, "r+b") as f:  # a block in the middle overwritten: the length and header still look right
        f.seek(200_000)
        f.write(b"\xff" * 100_000)
    assert "SQLite" in (damage(db) or "")
