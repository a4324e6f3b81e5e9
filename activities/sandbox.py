"""The coder agent's ``run_python`` tool: persistent Python sessions.

``LocalSandbox`` keeps one OS process per session id, like a notebook kernel:
variables survive between cells. Each process runs the worker's interpreter in
isolated mode with a clean environment, its own temporary working directory and
resource limits. It is a guard against runaway code, not a security boundary.

A worker that does not hold a session (restart, another machine) rebuilds it by
replaying the cells the workflow says already ran (``CodeRequest.previous``).
Another backend (E2B) only has to implement the ``Sandbox`` protocol.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import IO, Protocol

from temporalio import activity

from workflows.models import CodeRequest, ToolResult

# Runs inside the session process (``python -I -c DRIVER LIMITS``). Requests and
# replies are JSON lines on private copies of fds 0 and 1; user code gets an
# empty stdin, and anything it writes at the fd level goes to the log on fd 2.
DRIVER = r'''
import ast, builtins, io, json, linecache, os, resource, signal, sys, traceback, types

limits = json.loads(sys.argv[1])
CAP = limits["output_chars"]

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
'''

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
    ) -> None:
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self.root = root
        self.limits = {
            "memory_mb": memory_mb,
            "cpu_seconds": cpu_seconds,
            "file_mb": file_mb,
            "output_chars": output_chars,
        }
        self._sessions: dict[str, _Session] = {}
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._reaper: asyncio.Task[None] | None = None

    async def run(self, session: str, code: str, previous: Sequence[str] = ()) -> CellResult:
        """Run ``code`` in ``session``; rebuild the session from ``previous`` if needed."""
        lock = self._locks.setdefault(session, asyncio.Lock())
        async with lock:
            s = self._sessions.get(session)
            if s is not None and s.cells != list(previous):
                await self._drop(session, s)
                s = None
            note = ""
            if s is None:
                s = self._sessions[session] = await self._start()
                self._start_reaper()
                for i, cell in enumerate(previous, 1):
                    replayed = await self._exec(session, s, cell)
                    if self._sessions.get(session) is not s:  # timed out or crashed
                        error = f"restoring the session failed at earlier cell {i}:\n{replayed.error}"
                        return CellResult(error=error)
                    if replayed.error:
                        note += f"[sandbox] earlier cell {i} failed when re-run:\n{replayed.error}\n"
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

    async def _start(self) -> _Session:
        workdir = tempfile.mkdtemp(prefix="sandbox-", dir=self.root)
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
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-c", DRIVER, json.dumps(self.limits),
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

    async def _exec(self, session: str, s: _Session, code: str) -> CellResult:
        """Run one cell; on timeout or crash the session is stopped and dropped."""
        try:
            s.proc.stdin.write(json.dumps({"code": code}).encode() + b"\n")
            await s.proc.stdin.drain()
            line = await asyncio.wait_for(s.proc.stdout.readline(), self.timeout)
        except TimeoutError:
            await self._drop(session, s)
            error = f"TimeoutError: the cell ran longer than {self.timeout:g} s and was stopped"
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
                if now - s.last_used > self.idle_timeout
                and not ((lock := self._locks.get(sid)) and lock.locked())
            ]
            await asyncio.gather(*(self._drop(sid, s) for sid, s in idle))


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


class SandboxActivities:
    """Temporal activities for the coder agent's ``run_python`` tool."""

    heartbeat_every = 5.0

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
