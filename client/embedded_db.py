"""The embedded Temporal server's database (``temporal.db`` in the data dir):
which server serves it now, and whether it is whole.

Two dev servers on one SQLite file fail each other ("Failed to lock shard",
SQLITE_BUSY), and that is how runs get lost. So the process that starts the
embedded server (``DevServer.start``) first takes an exclusive lock on
``temporal.db.lock`` beside the file (an flock) and writes there the address
the server serves and its own process id. The server process inherits the
lock: it is held until both have ended, however they end (the kernel drops
it). A command that would start a server asks the lock first and, when
another server serves the file, uses that one or refuses naming it
(``client/devserver.py``'s ``serving``): a second server is never started
on it, whatever port each was told to use.

A file damaged (cut short by a full disk or a copy, overwritten) made the
server fail at start ("exited with code 1") or, worse, start and fail every
read, and the SDK retried for 10-20 s before "database disk image is
malformed": ``damage`` checks the file before a server opens it, and
``DamagedDatabase`` says in one line which file and what to do.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from client.errors import CliError

try:
    import fcntl
except ImportError:  # not POSIX: no lock (the CLI's servers run on Linux and macOS)
    fcntl = None  # type: ignore[assignment]

LOCK_SUFFIX = ".lock"
SQLITE_MAGIC = b"SQLite format 3\x00"
# SQLite's own check of every page's structure reads the whole file (about
# 0.2 s for 120 MB from the page cache); larger files get the header checks only.
QUICK_CHECK_BYTES = 256 * 1024 * 1024
TAKE_ATTEMPTS = 20  # a reader holds the lock shared for a moment (``holder``): try again for a second
# What the server's log says when SQLite finds the file damaged.
DAMAGE_SIGNS = ("database disk image is malformed", "file is not a database", "SQLITE_CORRUPT", "SQLITE_NOTADB")


def lock_path(db_file: Path) -> Path:
    return db_file.with_name(db_file.name + LOCK_SUFFIX)


@dataclass(frozen=True)
class Holder:
    """The server that holds a database, as its lock file says."""

    address: str  # "" until the starting process has written it
    pid: int | None
    ready: bool  # it answered health checks

    def named(self) -> str:
        where = f"at {self.address}" if self.address else "that is starting"
        return f"the Temporal dev server {where}" + (f" (started by process {self.pid})" if self.pid else "")


def _parse(text: str) -> Holder:
    fields = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
    pid = fields.get("pid", "")
    return Holder(
        address=fields.get("address", "").strip(),
        pid=int(pid) if pid.isdigit() else None,
        ready=fields.get("state", "").strip() == "ready",
    )


def _read(fd: int) -> Holder:
    return _parse(os.pread(fd, 4096, 0).decode("utf-8", "replace"))


def holder(db_file: Path) -> Holder | None:
    """Who holds ``db_file`` now; None when no server does."""
    if fcntl is None:
        return None
    try:
        fd = os.open(lock_path(db_file), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no lock file: no server of ours ever served it
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class DatabaseInUse(CliError):
    """Another server serves the database (one line)."""

    def __init__(self, db_file: Path, by: Holder, why: str = "") -> None:
        self.db_file, self.by = db_file, by
        use = f"use it (TEMPORAL_ADDRESS={by.address}) or stop it first" if by.address and not why else ""
        why = why or "two servers on one database lose runs"
        super().__init__(f"{db_file} is in use by {by.named()}: {why}" + (f"; {use}" if use else ""))


class DatabaseLock:
    """The exclusive lock of one database, held from before its server
    starts until it has stopped (``DevServer`` takes and drops it)."""

    def __init__(self, db_file: Path) -> None:
        self.db_file = db_file
        self.fd: int | None = None

    def take(self, address: str) -> None:
        """Hold the lock, or raise ``DatabaseInUse`` naming its holder."""
        if fcntl is None:
            return
        path = lock_path(self.db_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        for attempt in range(TAKE_ATTEMPTS):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == TAKE_ATTEMPTS - 1:
                    by = _read(fd)
                    os.close(fd)
                    raise DatabaseInUse(self.db_file, by) from None
                time.sleep(0.05)
        self.fd = fd
        self.write(address, "starting")

    def write(self, address: str, state: str) -> None:
        if self.fd is not None:
            text = f"address={address}\npid={os.getpid()}\nstate={state}\n".encode()
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, text, 0)

    def release(self) -> None:
        """Drop this process's hold (the server's copy goes when it ends)."""
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


class DamagedDatabase(CliError):
    """The database file is damaged (one line: which file, what to do)."""

    def __init__(self, db_file: Path, problem: str) -> None:
        from shlex import quote

        aside = f"mv {quote(str(db_file))} {quote(str(db_file) + '.damaged')}"
        super().__init__(
            f"{db_file} is damaged ({problem}), so no Temporal server can read the runs in it: move it aside "
            f"(`{aside}`, and its -wal and -shm files if there are any) and the next "
            "command starts with an empty one (saved reports stay in the data dir's reports/)"
        )


def damage(db_file: Path) -> str | None:
    """What is wrong with an existing database file (None: nothing found):
    not SQLite, shorter than its header says, or pages SQLite's quick check
    finds broken (files up to ``QUICK_CHECK_BYTES``)."""
    try:
        size = db_file.stat().st_size
        with open(db_file, "rb") as f:
            head = f.read(100)
    except OSError:
        return None  # not there (a new database) or unreadable: the server says why
    if size == 0:
        return None  # SQLite's empty database
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        return "it is not an SQLite database"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    counted = pages > 0 and head[24:28] == head[92:96]  # the header's page count is current
    wal = db_file.with_name(db_file.name + "-wal")
    pending = wal.exists() and wal.stat().st_size > 0  # pages not yet written back may explain a short file
    if counted and not pending and size < pages * page_size:
        return f"cut short: {size:,} of its {pages * page_size:,} bytes"
    if size > QUICK_CHECK_BYTES:
        return None
    return _quick_check(db_file)


def _quick_check(db_file: Path) -> str | None:
    import sqlite3

    try:
        with_db = sqlite3.connect(db_file, timeout=5)
        try:
            rows = with_db.execute("PRAGMA quick_check(1)").fetchall()
        finally:
            with_db.close()
    except sqlite3.OperationalError:
        return None  # busy or locked: not a sign of damage
    except sqlite3.DatabaseError as err:
        return f"SQLite: {err}"
    said = str(rows[0][0]) if rows else "ok"
    return None if said == "ok" else f"SQLite: {' '.join(said.split())[:200]}"


def damage_in_log(log_text: str) -> str | None:
    """What the server's log says of a damaged file, if it does."""
    return next((sign for sign in DAMAGE_SIGNS if sign in log_text), None)
