"""Helper processes that do one job at a time under a time limit: the
conversion of HTML pages (``activities/html_text.py``), whose time grows
faster than the page (trafilatura: 100,000 ``<p>`` take 25 s) and which a
thread could not stop.

Children are started on demand and a few kept for the next jobs (starting
one costs ~0.3 s of CPU, its imports); at most ``size`` work at once, the
other jobs wait for one. A job that runs past its limit is killed with its
child (SIGKILL, reaped): nothing of it runs on, and the next job gets a new
child. A child also stops itself (SIGALRM) a little after the limit, in
case its parent is gone, and ends when its parent does (end of input).

The threads that wait for the children are their own executor's
(``PAGE_WORK``): page work never takes a thread another part of the worker
waits for, such as the reading of model replies (``activities/off_loop.py``).

Protocol: a request is one line of JSON (the job, ``length`` of the body,
``seconds``) and the body; an answer is its length on a line, then JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

MAX_CHILDREN = 4  # children working at once, per pool
MAX_IDLE = 2  # children kept waiting for the next job (each holds ~60 MB); the others end
MAX_JOBS = 200  # jobs one child does before a new one replaces it (what a converter keeps in memory)
ALARM_MARGIN = 2  # seconds past its limit a child stops itself
START_SECONDS = 60.0  # for a child's imports, however busy the machine

# Page work waits here (for a child, or decodes a text page), never in the
# default executor. Cancelled, a job's child is killed (``Job.abandon``).
PAGE_WORK = ThreadPoolExecutor(max_workers=2 * MAX_CHILDREN, thread_name_prefix="page-work")


class ChildTimeout(Exception):
    """The job ran past its time limit; its child was killed."""


class ChildFailed(Exception):
    """The child died or answered something unreadable; the message says how."""


class Job:
    """A job that can be abandoned from another thread (its crawl was
    cancelled): its child, if it has one, is killed at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self.abandoned = False

    def attach(self, child: _Child | None) -> bool:
        """Whether the job may go on with ``child`` (None: it is done with it)."""
        with self._lock:
            self._child = None if self.abandoned else child
            return not self.abandoned

    def abandon(self) -> None:
        with self._lock:
            self.abandoned = True
            if self._child is not None:
                self._child.signal_kill()


class _Child:
    def __init__(self, module: str) -> None:
        # No preexec_fn (infra/child_limits.py): the child sets its own limits.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdin and self.proc.stdout
        self.stdin, self.stdout = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self.stdin, False)
        self.jobs = 0

    def start(self) -> None:
        """Wait for the child's imports (its "ready" line): a job's time
        counts from then. Raises ``ChildFailed``."""
        line = b""
        deadline = time.monotonic() + START_SECONDS
        try:
            while not line.endswith(b"\n") and len(line) < 16:
                _wait(self.stdout, select.POLLIN, deadline)
                if not (chunk := os.read(self.stdout, 16 - len(line))):
                    break
                line += chunk
        except TimeoutError:
            self.end()
            raise ChildFailed(f"it did not start within {START_SECONDS:g} s") from None
        if line != b"ready\n":
            self.end()
            raise ChildFailed(f"it did not start ({self._ended()})")

    def signal_kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    def end(self) -> None:
        """Kill the child and reap it: nothing of it is left."""
        self.signal_kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()  # type: ignore[union-attr]

    def ask(self, request: bytes, deadline: float) -> bytes:
        """Send ``request``; the answer's JSON. Raises ``TimeoutError`` past
        ``deadline`` and ``ChildFailed`` when the child ends first."""
        self.jobs += 1
        view = memoryview(request)
        while view:
            _wait(self.stdin, select.POLLOUT, deadline)
            try:
                view = view[os.write(self.stdin, view) :]
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                raise ChildFailed(self._ended()) from None
        answer = bytearray()
        while True:
            if (line_end := answer.find(b"\n", 0, 24)) >= 0:
                if not answer[:line_end].isdigit():
                    raise ChildFailed(f"unreadable answer: {bytes(answer[:200])!r}")
                if len(answer) >= line_end + 1 + int(answer[:line_end]):
                    return bytes(answer[line_end + 1 :])
            elif len(answer) >= 24:
                raise ChildFailed(f"unreadable answer: {bytes(answer[:200])!r}")
            _wait(self.stdout, select.POLLIN, deadline)
            chunk = os.read(self.stdout, 1 << 20)
            if not chunk:
                raise ChildFailed(self._ended())
            answer += chunk

    def _ended(self) -> str:
        code = self.proc.wait()
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


def _wait(fd: int, event: int, deadline: float) -> None:
    poller = select.poll()  # (not select.select: a worker's descriptors can pass 1024)
    poller.register(fd, event | select.POLLHUP | select.POLLERR)
    left = deadline - time.monotonic()
    if left <= 0 or not poller.poll(left * 1000):
        raise TimeoutError


class ChildPool:
    """Children running ``python -m <module>``, one job each at a time."""

    def __init__(self, module: str, size: int = MAX_CHILDREN) -> None:
        self.module = module
        self._idle: list[_Child] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)

    def run(self, job: dict[str, Any], body: bytes, seconds: float, handle: Job | None = None) -> dict[str, Any]:
        """``job`` and ``body`` done by a child within ``seconds`` (from when a
        child takes it): its answer. Raises ``ChildTimeout`` or ``ChildFailed``."""
        request = json.dumps({**job, "length": len(body), "seconds": seconds}).encode() + b"\n" + body
        with self._slots:
            child = self._take()
            if handle is not None and not handle.attach(child):
                self._give_back(child)
                raise ChildFailed("abandoned")
            try:
                answer = child.ask(request, time.monotonic() + seconds)
            except TimeoutError:
                child.end()
                raise ChildTimeout(f"took longer than {seconds:g} s") from None
            except BaseException:
                child.end()
                raise
            finally:
                kept = handle is None or handle.attach(None)  # (abandoned: its child may be dying)
            if kept:
                self._give_back(child)
            else:
                child.end()
        try:
            return json.loads(answer)
        except ValueError:
            raise ChildFailed(f"unreadable answer: {answer[:200]!r}") from None

    def _take(self) -> _Child:
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.proc.poll() is None:
                    return child
                child.end()  # died while idle (killed from outside)
        child = _Child(self.module)
        child.start()
        return child

    def _give_back(self, child: _Child) -> None:
        with self._lock:
            kept = child.jobs < MAX_JOBS and len(self._idle) < MAX_IDLE
            if kept:
                self._idle.append(child)
        if not kept:
            child.end()

    def close(self) -> None:
        """End the idle children (busy ones end with their job's limit)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            child.end()

    def children(self) -> list[int]:
        """The process ids of the idle children."""
        with self._lock:
            return [c.proc.pid for c in self._idle]


async def page_work(fn: Callable[..., T], *args: object, job: Job | None = None) -> T:
    """``fn(*args)`` in a page-work thread; cancelled, ``job``'s child is
    killed, so the thread ends at once."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    try:
        return await asyncio.get_running_loop().run_in_executor(PAGE_WORK, call)
    except asyncio.CancelledError:
        if job is not None:
            job.abandon()
        raise
