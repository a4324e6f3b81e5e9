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
for hostile code: use the E2B backend (``activities.sandbox_e2b``) for that.

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
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Protocol

from temporalio import activity

from workflows.models import CodeRequest, ToolResult

if TYPE_CHECKING:
    from infra.settings import Settings

log = logging.getLogger(__name__)

# Runs inside the session process (``python -I -c DRIVER LIMITS``). Requests and
# replies are JSON lines on private copies of fds 0 and 1; user code gets an
# empty stdin, and anything it writes at the fd level goes to the log on fd 2.
DRIVER = r"""
import ast, builtins, io, json, linecache, os, resource, signal, sys, traceback, types

limits = json.loads(sys.argv[1])
CAP = limits["output_chars"]

def loopback_up():
    import fcntl, socket, struct
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))

def private_mounts(size_mb, reveal):
    # In our own mount namespace (unshare --mount, propagation private): each
    # shared scratch directory, the directory holding all sessions' directories
    # and, for ``reveal``, each directory the session user cannot enter (where
    # the interpreter may live, say /root/.pyenv) is covered by an empty
    # read-only tmpfs into which only what the session needs is bound back:
    # its own directory (writable) and the interpreter's paths (read-only).
    # /dev/shm becomes a private tmpfs. Everything dies with the session.
    import ctypes, stat
    libc = ctypes.CDLL(None, use_errno=True)
    MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
    def mount(source, target, fstype, flags, data=None):
        enc = lambda v: None if v is None else v.encode()
        if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount {target}: {os.strerror(err)}")
    def under(path, folder):
        return path.startswith(folder.rstrip("/") + "/")
    here = os.getcwd()
    wanted = {here}
    if reveal:
        paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *filter(None, sys.path)]
        wanted |= {os.path.normpath(f(p)) for p in paths for f in (os.path.abspath, os.path.realpath)}
    wanted = sorted(p for p in wanted if os.path.isdir(p))
    wanted = [p for i, p in enumerate(wanted) if not any(under(p, q) for q in wanted[:i])]
    covers = {os.path.realpath(d) for d in ("/tmp", "/var/tmp", "/run/lock") if os.path.isdir(d)}
    covers.add(os.path.dirname(here))
    if reveal:
        for p in wanted:
            parts = p.split("/")
            for i in range(2, len(parts)):
                above = "/".join(parts[:i])
                if not os.stat(above).st_mode & stat.S_IXOTH:
                    covers.add(above)
                    break
    covers = sorted(c for c in covers if c != "/" and c not in wanted)
    covers = [c for i, c in enumerate(covers) if not any(under(c, o) for o in covers[:i])]
    held = {p: os.open(p, os.O_PATH) for p in wanted if any(under(p, c) for c in covers)}
    mask = os.umask(0o022)
    for cover in covers:
        mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
        for p, fd in held.items():
            if under(p, cover):
                os.makedirs(p)
                mount(f"/proc/self/fd/{fd}", p, None, MS_BIND | MS_REC)
                if p != here:
                    mount(None, p, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        mount("tmpfs", cover, "tmpfs", MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=755")
    os.umask(mask)
    for fd in held.values():
        os.close(fd)
    if os.path.isdir("/dev/shm"):
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_mb}m,mode=1777")
    os.chdir(here)

if limits.get("netns"):
    try:
        loopback_up()  # code may still talk to itself over 127.0.0.1
    except OSError as e:
        print(f"[sandbox] loopback stays down: {e}", file=sys.stderr)
if limits.get("private_tmp"):
    private_mounts(limits["file_mb"], reveal=bool(limits.get("user")))
if limits.get("user"):
    uid, gid = limits["user"]
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)

def limit(name, value):
    _, hard = resource.getrlimit(name)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(name, (value, hard if name == resource.RLIMIT_CPU else value))

limit(resource.RLIMIT_AS, limits["memory_mb"] << 20)
limit(resource.RLIMIT_FSIZE, limits["file_mb"] << 20)
limit(resource.RLIMIT_CPU, limits["cpu_seconds"])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # too-big writes raise OSError instead

requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
os.dup2(2, 1)

main = types.ModuleType("__main__")
main.__builtins__ = builtins
sys.modules["__main__"] = main

def clip(text):
    return text if len(text) <= CAP else text[:CAP] + "\n... [output truncated]"

class Capped(io.StringIO):
    full = False
    def write(self, s):
        room = CAP - self.tell()
        if len(s) > room:
            self.full = True
        super().write(s[:max(room, 0)])
        return len(s)
    def text(self):
        return self.getvalue() + ("\n... [output truncated]" if self.full else "")

def run(code, name):
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    out, err = Capped(), Capped()
    sys.stdout, sys.stderr = out, err
    error = None
    try:
        tree = compile(code, name, "exec", ast.PyCF_ONLY_AST)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, name, "exec"), main.__dict__)
        if last is not None:  # echo the last expression, as a notebook does
            value = eval(compile(ast.Expression(last.value), name, "eval"), main.__dict__)
            if value is not None:
                print(repr(value))
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next  # drop the driver's own frames
        error = clip("".join(traceback.format_exception(type(e), e, tb)))
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    return {"stdout": out.text(), "stderr": err.text(), "error": error}

replies.write("ready\n")
replies.flush()
for n, line in enumerate(requests, 1):
    replies.write(json.dumps(run(json.loads(line)["code"], f"<cell {n}>")) + "\n")
    replies.flush()
"""

READY = b"ready\n"
SIGNAL_HINTS = {
    signal.SIGXCPU: "CPU time limit exceeded",
    signal.SIGKILL: "killed, perhaps out of memory",
    signal.SIGSEGV: "segmentation fault",
}


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the user's code); the activity retries."""


@dataclass
class CellResult:
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # traceback, time limit or crash; None on success


async def replay(
    previous: Sequence[str], run_cell: Callable[[str], Awaitable[CellResult]], alive: Callable[[], bool]
) -> tuple[str, CellResult | None]:
    """Re-run a session's earlier cells in a fresh session, silently (a new
    worker, or a session lost to a timeout). Returns a note for the new cell's
    stderr about cells that failed this time, or the error that ended the
    replay when the session died during it."""
    note = ""
    for i, cell in enumerate(previous, 1):
        replayed = await run_cell(cell)
        if not alive():
            return note, CellResult(error=f"restoring the session failed at earlier cell {i}:\n{replayed.error}")
        if replayed.error:
            note += f"[sandbox] earlier cell {i} failed when re-run:\n{replayed.error}\n"
    return note, None


class Sandbox(Protocol):
    """What a ``run_python`` backend provides."""

    async def run(self, session: str, code: str, previous: Sequence[str] = ()) -> CellResult: ...

    async def close(self, session: str) -> None: ...

    async def close_all(self) -> None: ...


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
                DRIVER,
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


def _describe_isolation(isolation: Isolation) -> str:
    parts = [" ".join(isolation.command) or "no namespaces"]
    if isolation.user:
        parts.append(f"as user {isolation.user}")
    return "sessions under " + " ".join(parts)


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


def make_sandbox(settings: Settings) -> Sandbox:
    """The backend the settings ask for: E2B (``DEEPRESEARCH_SANDBOX=e2b``) or local."""
    if settings.sandbox == "e2b":
        from activities.sandbox_e2b import E2BSandbox

        return E2BSandbox(api_key=settings.e2b_api_key)
    return LocalSandbox()


class SandboxActivities:
    """Temporal activities for the coder agent's ``run_python`` tool."""

    heartbeat_every = 2.0  # well inside the 10 s heartbeat timeout

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    @activity.defn(name="run_python")
    async def run_python(self, request: CodeRequest) -> ToolResult:
        """Run a cell; user-code errors and timeouts come back as ``error=True``."""
        beat = asyncio.create_task(self._heartbeat()) if activity.in_activity() else None
        try:
            cell = await self.sandbox.run(request.session, request.code, request.previous)
        finally:
            if beat is not None:
                beat.cancel()
        parts = [cell.stdout.rstrip("\n")] if cell.stdout else []
        if cell.stderr:
            parts.append("[stderr]\n" + cell.stderr.rstrip("\n"))
        if cell.error:
            parts.append("[error]\n" + cell.error.rstrip("\n"))
        content = "\n".join(parts) or "(no output; print() the values you want to see)"
        return ToolResult(content=content, error=cell.error is not None)

    @activity.defn(name="close_sandbox")
    async def close_sandbox(self, session: str) -> None:
        await self.sandbox.close(session)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_every)
            activity.heartbeat()
