"""The coder agent's ``run_python`` tool: persistent Python sessions.

``LocalSandbox`` keeps one OS process per session id, like a notebook kernel:
variables survive between cells. Each process runs the worker's interpreter in
isolated mode with a clean environment, its own temporary working directory and
resource limits (memory, CPU time, file size, wall time per cell, output size).

Where the platform allows it, each session also gets (see ``Isolation``):

- its own network namespace (``unshare --net``, or ``--net --map-root-user``
  for an unprivileged worker) holding only a loopback interface, so code cannot
  open connections to anything outside its own process;
- when the worker runs as root: an unprivileged account (``nobody``) owning only
  the session's directory, so code cannot read the worker's environment
  (``/proc/<pid>/environ``) or write to the system; and a private mount
  namespace in which ``/tmp``, ``/var/tmp``, ``/run/lock`` and the directory
  holding the sessions' directories are empty and read-only but for the
  session's own directory, and ``/dev/shm`` is a private tmpfs, so code can
  write nowhere but its own directory and cannot see other sessions' files.

What is not available is logged once, as one warning, and the sandbox runs
without it. This is defence in depth for model-written code, not a boundary
for hostile code: use the E2B backend (``activities/sandbox/e2b.py``) for that.

A worker that does not hold a session (restart, another machine) rebuilds it by
replaying the cells the workflow says already ran (``CodeRequest.previous``).
Another backend (E2B) only has to implement the ``Sandbox`` protocol.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pwd
import shutil
import signal
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import IO

from activities.sandbox.base import CellResult, SandboxError, replay

log = logging.getLogger(__name__)


@cache
def driver() -> str:
    """The program a session process runs (``activities/sandbox/driver.py``)."""
    return (resources.files("activities.sandbox") / "driver.py").read_text(encoding="utf-8")


READY = b"ready\n"
SIGNAL_HINTS = {
    signal.SIGXCPU: "CPU time limit exceeded",
    signal.SIGKILL: "killed, perhaps out of memory",
    signal.SIGSEGV: "segmentation fault",
}


@dataclass
class _Session:
    proc: asyncio.subprocess.Process
    workdir: str
    log: IO[bytes]  # unnamed temp file holding the process's fd 1 and 2
    cells: list[str] = field(default_factory=list)  # cells run without error
    last_used: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class Isolation:
    """How session processes are confined beyond their resource limits."""

    command: tuple[str, ...] = ()  # prefix, e.g. ("/usr/bin/unshare", "--net")
    network: bool = False  # own network namespace: no connections out
    user: str | None = None  # account sessions run as (the worker runs as root)
    uid_gid: tuple[int, int] | None = None
    private_tmp: bool = False  # shared writable dirs read-only, private /dev/shm
    warning: str | None = None  # what is missing, as logged


class LocalSandbox:
    """Persistent Python sessions, one local process each."""

    def __init__(
        self,
        *,
        timeout: float = 60.0,
        memory_mb: int = 1024,
        cpu_seconds: int = 120,
        file_mb: int = 64,
        output_chars: int = 20_000,
        idle_timeout: float = 15 * 60,
        root: str | None = None,
        network: bool = False,
        user: str | None = "nobody",
        unshare: str = "unshare",
    ) -> None:
        """``network=True`` lets code use the network (no namespace). ``user`` is
        the account sessions run as when the worker runs as root (None: stay
        root). ``unshare`` is the util-linux tool used for the namespaces."""
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self.root = root
        self.network = network
        self.user = user
        self.unshare = unshare
        self.limits = {
            "memory_mb": memory_mb,
            "cpu_seconds": cpu_seconds,
            "file_mb": file_mb,
            "output_chars": output_chars,
        }
        self._sessions: dict[str, _Session] = {}
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._reaper: asyncio.Task[None] | None = None
        self._isolation: Isolation | None = None
        self._probing: asyncio.Lock | None = None

    async def isolation(self) -> Isolation:
        """What confines the sessions; probed once, on first use."""
        if self._isolation is None:
            if self._probing is None:
                self._probing = asyncio.Lock()
            async with self._probing:
                if self._isolation is None:
                    self._isolation = await self._probe()
                    if self._isolation.warning:
                        log.warning("%s", self._isolation.warning)
        return self._isolation

    async def run(self, session: str, code: str, previous: Sequence[str] = ()) -> CellResult:
        """Run ``code`` in ``session``; rebuild the session from ``previous`` if needed."""
        isolation = await self.isolation()
        lock = self._locks.setdefault(session, asyncio.Lock())
        async with lock:
            s = self._sessions.get(session)
            if s is not None and s.cells != list(previous):
                await self._drop(session, s)
                s = None
            note = ""
            if s is None:
                s = self._sessions[session] = await self._start(isolation)
                self._start_reaper()
                fresh = s
                note, failed = await replay(
                    previous,
                    lambda cell: self._exec(session, fresh, cell),
                    lambda: self._sessions.get(session) is fresh,
                )
                if failed:
                    return failed
                s.cells = list(previous)
            result = await self._exec(session, s, code)
            result.stderr = note + result.stderr
            s.last_used = time.monotonic()
            return result

    async def close(self, session: str) -> None:
        """Stop the session's process and delete its directory."""
        if session in self._sessions:
            await self._drop(session, self._sessions[session])

    async def close_all(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        sessions = list(self._sessions.values())
        self._sessions.clear()
        await asyncio.gather(*(self._stop(s) for s in sessions))

    async def _probe(self) -> Isolation:
        """Find the strongest isolation this machine allows, and check it works."""
        missing: list[str] = []
        net: list[str] = []
        unshare = shutil.which(self.unshare)
        if not self.network:
            problem = "the unshare tool is not installed"
            for flags in (["--net"], ["--net", "--map-root-user"]):
                if unshare and (problem := await _fails(unshare, *flags, "true")) is None:
                    net = flags
                    break
            if not net:
                missing.append(f"no network namespace ({problem}): code can open network connections")
        user = uid_gid = None
        mount: list[str] = []
        if os.geteuid() != 0 and self.user:
            missing.append(
                f"sessions run as the worker's own user (uid {os.geteuid()}): code can write "
                "wherever that user can (run the worker as root to drop sessions to 'nobody')"
            )
        elif self.user:
            try:
                entry = pwd.getpwnam(self.user)
            except KeyError:
                missing.append(f"no account {self.user!r}: sessions run as root")
            else:
                user, uid_gid = self.user, (entry.pw_uid, entry.pw_gid)
                if unshare and await _fails(unshare, "--mount", "true") is None:
                    mount = ["--mount"]

        def under(*flags: str) -> tuple[str, ...]:
            return (unshare, *flags) if flags else ()

        candidates = []  # strongest first
        if user:
            full = Isolation(under(*net, *mount), bool(net), user, uid_gid, private_tmp=bool(mount))
            candidates.append(full)
            if mount:
                candidates.append(replace(full, command=under(*net), private_tmp=False))
        if net:
            candidates.append(Isolation(under(*net), network=True))
        chosen, problems = Isolation(), []
        for candidate in candidates:
            problem = await self._try(candidate)
            if problem is None:
                chosen = candidate
                break
            problems.append(problem)
        if problems:
            best, why = candidates[0], problems[0]
            if best.network and not chosen.network:
                missing.append(f"no network namespace ({why}): code can open network connections")
            if best.user and not chosen.user:
                missing.append(f"cannot run sessions as {best.user!r} ({why}): they run as root")
            if best.private_tmp and not chosen.private_tmp:
                missing.append(f"no private mounts ({why}): code can write to /tmp")
        if missing:
            chosen = replace(chosen, warning="sandbox isolation is incomplete: " + "; ".join(missing))
        return chosen

    async def _try(self, isolation: Isolation) -> str | None:
        """Start a session with ``isolation`` and check it; None if it works."""
        try:
            s = await self._start(isolation)
        except SandboxError as e:
            return str(e)
        try:
            check = (  # it can write its directory and load the standard and installed libraries
                "import os, sys, socket, decimal, json, sysconfig\n"
                "open('probe', 'w').write('ok')\n"
                "[os.listdir(p) for p in sys.path if os.path.isdir(p)]\n"
                "print(os.geteuid())"
            )
            result = await self._exec("", s, check, timeout=max(self.timeout, 30))
            if result.error:
                return result.error.strip().splitlines()[-1]
            if isolation.uid_gid and result.stdout.strip() != str(isolation.uid_gid[0]):
                return f"the session runs as uid {result.stdout.strip()}"
            return None
        finally:
            if not s.log.closed:  # not already stopped by a timeout or crash
                await self._stop(s)

    async def _start(self, isolation: Isolation) -> _Session:
        workdir = tempfile.mkdtemp(prefix="sandbox-", dir=self.root)
        if isolation.uid_gid:
            try:
                os.chown(workdir, *isolation.uid_gid)
            except OSError as e:
                shutil.rmtree(workdir, ignore_errors=True)
                raise SandboxError(f"cannot hand {workdir} to {isolation.user}: {e}") from e
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
            "MPLBACKEND": "Agg",
            # Thread pools reserve address space per thread; keep them within the limit.
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        log = tempfile.TemporaryFile()
        try:
            limits = {
                **self.limits,
                "netns": isolation.network,
                "private_tmp": isolation.private_tmp,
                "user": isolation.uid_gid,
            }
            proc = await asyncio.create_subprocess_exec(
                *isolation.command,
                sys.executable,
                "-I",
                "-c",
                driver(),
                json.dumps(limits),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                cwd=workdir,
                env=env,
                start_new_session=True,  # its own process group, killed as a whole
                limit=1 << 24,
            )
        except OSError as e:
            log.close()
            shutil.rmtree(workdir, ignore_errors=True)
            raise SandboxError(f"cannot start {sys.executable}: {e}") from e
        s = _Session(proc, workdir, log)
        try:
            ready = await asyncio.wait_for(proc.stdout.readline(), 30)
        except TimeoutError:
            ready = b""
        except BaseException:
            await self._stop(s)
            raise
        if ready != READY:
            detail = _tail(s)
            await self._stop(s)
            raise SandboxError(f"the sandbox interpreter did not start: {detail}")
        return s

    async def _exec(self, session: str, s: _Session, code: str, timeout: float | None = None) -> CellResult:
        """Run one cell; on timeout or crash the session is stopped and dropped."""
        timeout = timeout or self.timeout
        try:
            s.proc.stdin.write(json.dumps({"code": code}).encode() + b"\n")
            await s.proc.stdin.drain()
            line = await asyncio.wait_for(s.proc.stdout.readline(), timeout)
        except TimeoutError:
            await self._drop(session, s)
            error = f"TimeoutError: the cell ran longer than {timeout:g} s and was stopped"
            return CellResult(error=error)
        except ConnectionError:
            line = b""
        except asyncio.CancelledError:  # the cell's state is unknown: start over next time
            await self._drop(session, s)
            raise
        if not line:
            rc = await s.proc.wait()
            error = f"the Python process died ({_describe(rc)}); its variables are lost\n{_tail(s)}"
            await self._drop(session, s)
            return CellResult(error=error.rstrip())
        reply = json.loads(line)
        if reply["error"] is None:
            s.cells.append(code)
        return CellResult(**reply)

    async def _drop(self, session: str, s: _Session) -> None:
        if self._sessions.get(session) is s:
            del self._sessions[session]
        await self._stop(s)

    async def _stop(self, s: _Session) -> None:
        with suppress(ProcessLookupError):
            os.killpg(s.proc.pid, signal.SIGKILL)
        await s.proc.wait()
        s.log.close()
        await asyncio.to_thread(shutil.rmtree, s.workdir, True)

    def _start_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap())

    async def _reap(self) -> None:
        """Close sessions idle longer than ``idle_timeout``; ends when none are left."""
        while self._sessions:
            await asyncio.sleep(min(60.0, self.idle_timeout / 2))
            now = time.monotonic()
            idle = [
                (sid, s)
                for sid, s in self._sessions.items()
                if now - s.last_used > self.idle_timeout and not ((lock := self._locks.get(sid)) and lock.locked())
            ]
            await asyncio.gather(*(self._drop(sid, s) for sid, s in idle))


async def _fails(*command: str) -> str | None:
    """Run a quick probe command; None if it succeeds, else why it failed."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as e:
        return str(e)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 10)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return f"`{' '.join(command)}` did not finish"
    if proc.returncode == 0:
        return None
    detail = err.decode("utf-8", "replace").strip().splitlines()
    return f"`{' '.join(command)}` failed: {detail[-1] if detail else _describe(proc.returncode)}"


def _describe(returncode: int) -> str:
    if returncode >= 0:
        return f"exit code {returncode}"
    sig = signal.Signals(-returncode)
    hint = SIGNAL_HINTS.get(sig)
    return f"{sig.name}: {hint}" if hint else sig.name


def _tail(s: _Session, chars: int = 2000) -> str:
    """The end of the process's own output (interpreter errors, fd-level prints)."""
    if s.log.closed:  # the session was closed meanwhile
        return ""
    s.log.seek(0, os.SEEK_END)
    s.log.seek(max(0, s.log.tell() - chars))
    return s.log.read().decode("utf-8", "replace").strip()
