"""The coder agent's ``run_python`` tool: persistent Python sessions.

``LocalSandbox`` keeps one OS process per session id, like a notebook kernel:
variables survive between cells. Each process runs the worker's interpreter in
isolated mode with a clean environment (no keys), its own temporary working
directory and resource limits (memory, CPU time, file size, processes, disk,
wall time per cell, output size).

Model-written code never runs next to a key. Each session gets (see
``Isolation``, chosen once by probing the machine):

- its own network namespace with only a loopback interface: no connection
  leaves the session, the worker's loopback ports included;
- its own PID namespace: it sees only its own processes (not the worker's
  ``/proc/<pid>/environ``), and nothing it starts (``setsid`` or not)
  outlives it: when the session's first process dies, all do;
- its own user: as root, a user id of its own per session, claimed with a
  lock file in ``/run/deepresearch-sandbox-uids`` so that no two workers of
  the machine share one (so one session cannot signal another's processes,
  and ``RLIMIT_NPROC`` counts only its processes); unprivileged, a user
  namespace;
- a private mount namespace: ``/tmp``, ``/var/tmp``, ``/run/lock``, the other
  sessions' directories, the data dir and the worker's home are out of sight
  or read-only; its own directory is a tmpfs with a size limit;
- where cgroups are writable: a memory and a process limit for the session as
  a whole (otherwise per process, plus the directory's size checked after each
  cell).

The worker itself is made non-dumpable (``infra.process.protect_secrets``), so
even code running as its own user could not read its environment.

Without a network namespace, a PID namespace and a user of its own, the
sandbox refuses to run code (the run goes on; the coder is told) unless the
operator opts in with ``DEEPRESEARCH_SANDBOX=local-unisolated``. For hostile
code use E2B (``activities/sandbox/e2b.py``) or the sandbox service
(``activities/sandbox/remote.py``).

A worker that does not hold a session (restart, another machine) rebuilds it by
replaying the cells the workflow says already ran (``CodeRequest.previous``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
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

import activities.sandbox.confinement as confinement
from activities.sandbox.base import CellResult, SandboxError, SandboxRefused, replay

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
    replies: asyncio.StreamReader  # the driver's replies, on a pipe of our own (see ``_stop``)
    replies_pipe: asyncio.ReadTransport
    cells: list[str] = field(default_factory=list)  # cells run without error
    last_used: float = field(default_factory=time.monotonic)
    uid: int | None = None  # the session's own uid, when the worker is root
    cgroups: list[str] = field(default_factory=list)  # its cgroup folders


@dataclass(frozen=True)
class Isolation:
    """How session processes are confined beyond their resource limits."""

    command: tuple[str, ...] = ()  # prefix, e.g. ("/usr/bin/unshare", "--net", ...)
    network: bool = False  # own network namespace: no connections out
    pid: bool = False  # own PID namespace: sees only its own processes, none outlive it
    user: str | None = None  # "session uid" (root worker) or "user namespace"
    private_tmp: bool = False  # private mounts: shared dirs read-only, own dir a sized tmpfs
    cgroup: str | None = None  # "v1" or "v2": limits for the session as a whole
    warning: str | None = None  # what is missing, as logged
    refusal: str | None = None  # why code is not run at all (not isolated, not allowed to run so)

    @property
    def isolated(self) -> bool:
        return self.network and self.pid and self.user is not None


class LocalSandbox:
    """Persistent Python sessions, one local process each."""

    def __init__(
        self,
        *,
        timeout: float = 60.0,
        memory_mb: int = 1024,
        cpu_seconds: int = 120,
        file_mb: int = 64,
        disk_mb: int = 256,
        processes: int = 64,
        output_chars: int = 20_000,
        idle_timeout: float = 15 * 60,
        root: str | None = None,
        network: bool = False,
        allow_unisolated: bool = False,
        uid_base: int = 61_000,
        uid_locks: str | None = None,
        hidden: Sequence[str] = (),
        unshare: str = "unshare",
        cgroup_root: str = "/sys/fs/cgroup",
    ) -> None:
        """``network=True`` lets code use the network (no namespace).
        ``allow_unisolated`` runs code even where the machine cannot isolate
        it (``DEEPRESEARCH_SANDBOX=local-unisolated``). Sessions of a root
        worker run as uids ``uid_base`` and up, each claimed by a lock file
        in ``uid_locks`` (default: a folder in /run) so that no two workers
        on the machine give one uid to two sessions. ``hidden`` are folders the
        code must not see (the data dir); the worker's home and working
        directory are hidden too. ``unshare`` is the util-linux tool used for
        the namespaces."""
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self.root = root
        self.network = network
        self.allow_unisolated = allow_unisolated
        self.uid_base = uid_base
        self.uid_locks = uid_locks
        self.unshare = unshare
        self.cgroup_root = cgroup_root
        self.disk_mb = disk_mb
        self.limits = {
            "memory_mb": memory_mb,
            "cpu_seconds": cpu_seconds,
            "file_mb": file_mb,
            "disk_mb": disk_mb,
            "processes": processes,
            "output_chars": output_chars,
        }
        home = os.path.expanduser("~")
        self.hidden = sorted({os.path.realpath(p) for p in (*hidden, home, os.getcwd()) if p and p != "/"})
        self._sessions: dict[str, _Session] = {}
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._reaper: asyncio.Task[None] | None = None
        self._isolation: Isolation | None = None
        self._probing: asyncio.Lock | None = None
        self._uids: dict[int, int] = {}  # the session uids this sandbox holds, with their lock's fd

    async def isolation(self) -> Isolation:
        """What confines the sessions; probed once, on first use."""
        if self._isolation is None:
            if self._probing is None:
                self._probing = asyncio.Lock()
            async with self._probing:
                if self._isolation is None:
                    self._isolation = await self._probe()
                    if self._isolation.refusal:
                        log.error("%s", self._isolation.refusal)
                    elif self._isolation.warning:
                        log.warning("%s", self._isolation.warning)
        return self._isolation

    async def run(self, session: str, code: str, previous: Sequence[str] = ()) -> CellResult:
        """Run ``code`` in ``session``; rebuild the session from ``previous`` if needed."""
        isolation = await self.isolation()
        if isolation.refusal:
            raise SandboxRefused(isolation.refusal)
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
            if not isolation.private_tmp and session in self._sessions and await self._over_disk(s):
                await self._drop(session, s)
                result.error = (result.error or "") + (
                    f"the session wrote more than {self.disk_mb} MB to its directory and was stopped; "
                    "its variables are lost"
                )
            return result

    def open_sessions(self) -> set[str]:
        """The sessions that have a process now."""
        return set(self._sessions)

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
        """The strongest isolation this machine allows, checked by starting a
        session with it."""
        unshare = shutil.which(self.unshare)
        root = os.geteuid() == 0
        missing: list[str] = []
        cgroup = confinement.cgroup_kind(self.cgroup_root) if root else None
        if cgroup is None:
            missing.append("no writable cgroups: memory and processes are limited per process, disk by checking")
        candidates: list[Isolation] = []
        if unshare:
            net = () if self.network else ("--net",)
            user = ("--map-root-user",) if not root else ()
            who = "session uid" if root else "user namespace"
            everything = (unshare, *user, *net, "--pid", "--fork", "--mount", "--mount-proc")
            candidates.append(Isolation(everything, not self.network, True, who, True, cgroup))
            candidates.append(
                Isolation(
                    (unshare, *user, *net, "--pid", "--fork", "--mount-proc"),
                    not self.network,
                    True,
                    who,
                    False,
                    cgroup,
                )
            )
            if not self.network:
                candidates.append(
                    Isolation((unshare, *user, "--net"), True, False, who if not root else None, False, cgroup)
                )
        else:
            missing.append(f"the {self.unshare} tool (util-linux) is not installed")
        chosen, problems = None, []
        for candidate in candidates:
            problem = await self._try(candidate)
            if problem is None:
                chosen = candidate
                break
            problems.append(problem)
        if problems:
            missing.append(f"namespaces unavailable ({problems[0]})")
        if chosen is None:
            chosen = Isolation(cgroup=cgroup)
        if not chosen.private_tmp:
            missing.append("no private mounts: code can see /tmp and the worker's files its user may read")
        if chosen.isolated or (self.network and chosen.pid and chosen.user):
            warning = "sandbox isolation is incomplete: " + "; ".join(missing) if missing else None
            return replace(chosen, warning=warning)
        what = [
            w
            for w, ok in (
                ("a network namespace", chosen.network or self.network),
                ("a PID namespace", chosen.pid),
                ("a user of its own", chosen.user),
            )
            if not ok
        ]
        reason = (
            f"the local sandbox cannot isolate model-written code on this machine (no {', no '.join(what)}; "
            + "; ".join(missing)
            + "): set DEEPRESEARCH_SANDBOX=e2b, or DEEPRESEARCH_SANDBOX=local-unisolated to run it anyway "
            "next to the worker's files"
        )
        if not self.allow_unisolated:
            return replace(chosen, refusal=reason)
        return replace(chosen, warning="running model-written code without isolation (local-unisolated): " + reason)

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
                "print(os.geteuid(), os.getpid())"
            )
            result = await self._exec("", s, check, timeout=max(self.timeout, 30))
            if result.error:
                return result.error.strip().splitlines()[-1]
            uid, pid = (result.stdout.split() + ["?", "?"])[:2]
            if isolation.user == "session uid" and uid != str(s.uid):
                return f"the session runs as uid {uid}"
            if isolation.pid and pid not in ("1", "2"):
                return f"the session is not in a PID namespace of its own (pid {pid})"
            return None
        finally:
            if not s.log.closed:  # not already stopped by a timeout or crash
                await self._stop(s)

    async def _start(self, isolation: Isolation) -> _Session:
        uid = self._allocate_uid() if isolation.user == "session uid" else None
        workdir = tempfile.mkdtemp(prefix="sandbox-", dir=self.root)
        if uid is not None:
            try:
                os.chown(workdir, uid, uid)
                os.chmod(workdir, 0o700)
            except OSError as e:
                self._free_uid(uid)
                shutil.rmtree(workdir, ignore_errors=True)
                raise SandboxError(f"cannot hand {workdir} to uid {uid}: {e}") from e
        cgroups = confinement.make_cgroups(self.cgroup_root, isolation.cgroup, self.limits) if isolation.cgroup else []
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
        # The reply pipe is ours, not the subprocess transport's: waiting for
        # the process's exit then never waits for a process the cell forked,
        # which keeps the pipe's write end open (see ``_stop``).
        replies_fd, reply_fd = os.pipe()
        try:
            limits = {
                **self.limits,
                "netns": isolation.network,
                "pidns": isolation.pid,
                "private_tmp": isolation.private_tmp,
                "user": [uid, uid] if uid is not None else None,
                "hidden": self.hidden,
            }
            proc = await asyncio.create_subprocess_exec(
                *confinement.joining_cgroups(cgroups),
                *isolation.command,
                sys.executable,
                "-I",
                "-c",
                driver(),
                json.dumps(limits),
                stdin=asyncio.subprocess.PIPE,
                stdout=reply_fd,
                stderr=log,
                cwd=workdir,
                env=env,
                start_new_session=True,  # its own process group, killed as a whole
                limit=1 << 24,
            )
        except OSError as e:
            log.close()
            os.close(replies_fd)
            self._release(uid, workdir, cgroups)
            raise SandboxError(f"cannot start {sys.executable}: {e}") from e
        except BaseException:
            os.close(replies_fd)
            raise
        finally:
            os.close(reply_fd)
        replies = asyncio.StreamReader(limit=1 << 24)
        pipe, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(replies), os.fdopen(replies_fd, "rb", buffering=0)
        )
        s = _Session(proc, workdir, log, replies, pipe, uid=uid, cgroups=cgroups)
        try:
            ready = await asyncio.wait_for(replies.readline(), 30)
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

    def _allocate_uid(self) -> int:
        """A uid that no session of any worker on this machine holds (closing
        a session kills every process of its uid)."""
        folder = confinement.uid_lock_folder(self.uid_locks)
        for uid in range(self.uid_base, self.uid_base + 10_000):
            if uid not in self._uids and (lock := confinement.claim_uid(folder, uid)) is not None:
                self._uids[uid] = lock
                return uid
        raise SandboxError(f"no free session uid from {self.uid_base} on (see {folder})")

    def _free_uid(self, uid: int) -> None:
        lock = self._uids.pop(uid, None)
        if lock is not None:
            os.close(lock)

    def _release(self, uid: int | None, workdir: str, cgroups: list[str]) -> None:
        if uid is not None:
            confinement.kill_uid(uid)  # anything of this uid still alive (no PID namespace to do it)
            self._free_uid(uid)  # only then another session may have it
        confinement.kill_cgroups(cgroups)  # the same by cgroup (a setsid daemon escapes the process group)
        shutil.rmtree(workdir, ignore_errors=True)
        for path in cgroups:
            confinement.remove_cgroup(path)

    async def _over_disk(self, s: _Session) -> bool:
        return await asyncio.to_thread(confinement.size_over, s.workdir, self.disk_mb << 20)

    async def _exec(self, session: str, s: _Session, code: str, timeout: float | None = None) -> CellResult:
        """Run one cell; on timeout or crash the session is stopped and dropped."""
        timeout = timeout or self.timeout
        try:
            s.proc.stdin.write(json.dumps({"code": code}).encode() + b"\n")
            await s.proc.stdin.drain()
            line = await asyncio.wait_for(s.replies.readline(), timeout)
        except TimeoutError:
            await self._drop(session, s)
            error = f"TimeoutError: the cell ran longer than {timeout:g} s and was stopped"
            return CellResult(error=error)
        except ConnectionError:
            line = b""
        except asyncio.CancelledError:  # the cell's state is unknown: start over next time
            await self._drop(session, s)
            raise
        if not line:  # the process is ending: its end, whoever else holds its pipes
            tail = _tail(s)
            await self._drop(session, s)
            error = f"the Python process died ({_describe(s.proc.returncode)}); its variables are lost\n{tail}"
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
        # Our ends of the pipes: a daemon the cell forked may hold the other
        # ends (without a PID namespace it even outlives the kill, until
        # ``_release``), and the wait below must not wait for it.
        s.replies_pipe.close()
        s.proc.stdin.close()
        await s.proc.wait()
        s.log.close()
        await asyncio.to_thread(self._release, s.uid, s.workdir, s.cgroups)

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


# --- what a session's end looks like ------------------------------------------------


def _describe(returncode: int) -> str:
    """A process's end in words; 128 + n (from the PID namespace's first
    process) is signal n, as is -n."""
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if not number:
        return f"exit code {returncode}"
    try:
        sig = signal.Signals(number)
    except ValueError:
        return f"exit code {returncode}"
    hint = SIGNAL_HINTS.get(sig)
    return f"{sig.name}: {hint}" if hint else sig.name


def _tail(s: _Session, chars: int = 2000) -> str:
    """The end of the process's own output (interpreter errors, fd-level prints)."""
    if s.log.closed:  # the session was closed meanwhile
        return ""
    s.log.seek(0, os.SEEK_END)
    s.log.seek(max(0, s.log.tell() - chars))
    return s.log.read().decode("utf-8", "replace").strip()
