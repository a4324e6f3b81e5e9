"""The E2B backend of the coder agent's ``run_python`` tool.

``E2BSandbox`` implements the same ``Sandbox`` protocol as ``LocalSandbox`` on
the ``e2b-code-interpreter`` SDK: one cloud sandbox (a Jupyter kernel in a
micro-VM) per session, created on the session's first cell and reused for the
rest of the step, killed when the step closes its session. A worker that does
not hold the session (restart, another machine, the sandbox expired) creates a
new one and replays the cells the workflow says already ran, as the local
sandbox does.

Limits match the local sandbox: wall time per cell, output size; the sandbox
has no internet access unless ``network=True``, and gets no environment
variables from the worker. The sandbox's own lifetime is ``idle_timeout``,
renewed after every cell, so E2B disposes of the sandboxes of steps that were
abandoned (a crashed worker never closes them). Images, charts and other rich
results are not copied into the workflow history: the tool output notes them,
e.g. ``[chart: image/png, 18234 bytes]``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from e2b_code_interpreter import (
    AsyncSandbox,
    AuthenticationException,
    NotFoundException,
    SandboxException,
    TimeoutException,
)
from temporalio.exceptions import ApplicationError

from activities.sandbox.base import CellResult, SandboxError, replay

try:  # newer SDKs tell "the sandbox is gone" apart from other timeouts
    from e2b import SandboxNotRunningException
except ImportError:  # pragma: no cover - older SDKs
    SandboxNotRunningException = NotFoundException  # type: ignore[misc,assignment]

log = logging.getLogger(__name__)

TRUNCATED = "\n... [output truncated]"
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
BINARY = {"png": "image/png", "jpeg": "image/jpeg", "pdf": "application/pdf"}
TEXTUAL = {
    "svg": "image/svg+xml",
    "html": "text/html",
    "markdown": "text/markdown",
    "latex": "text/latex",
    "javascript": "application/javascript",
}


class _Gone(SandboxError):
    """The remote sandbox no longer exists (expired or killed)."""


@dataclass
class _Remote:
    sandbox: Any  # an e2b_code_interpreter.AsyncSandbox
    cells: list[str] = field(default_factory=list)  # cells run without error
    last_used: float = field(default_factory=time.monotonic)


class E2BSandbox:
    """Persistent Python sessions, one E2B code-interpreter sandbox each."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        output_chars: int = 20_000,
        idle_timeout: float = 15 * 60,
        request_timeout: float = 30.0,
        template: str | None = None,
        network: bool = False,
        create: Callable[..., Awaitable[Any]] = AsyncSandbox.create,
    ) -> None:
        """``api_key`` defaults to the SDK's own ``E2B_API_KEY`` lookup; ``create``
        is the sandbox factory (``AsyncSandbox.create``), replaceable in tests."""
        self.api_key = api_key
        self.timeout = timeout
        self.output_chars = output_chars
        self.idle_timeout = idle_timeout
        self.request_timeout = request_timeout
        self.template = template
        self.network = network
        self._create = create
        self._sessions: dict[str, _Remote] = {}
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._killing: set[asyncio.Task[None]] = set()

    async def run(self, session: str, code: str, previous: Sequence[str] = ()) -> CellResult:
        """Run ``code`` in ``session``; rebuild the session from ``previous`` if needed."""
        self._forget_expired()
        lock = self._locks.setdefault(session, asyncio.Lock())
        async with lock:
            reused = session in self._sessions
            try:
                return await self._run(session, code, previous)
            except _Gone:
                if not reused:
                    raise
                # It expired on E2B's side since the last cell: start over once.
                return await self._run(session, code, previous)

    async def close(self, session: str) -> None:
        """Kill the session's sandbox."""
        remote = self._sessions.pop(session, None)
        if remote is not None:
            await self._kill(remote)

    async def close_all(self) -> None:
        remotes = list(self._sessions.values())
        self._sessions.clear()
        await asyncio.gather(*(self._kill(r) for r in remotes), *self._killing)

    async def _run(self, session: str, code: str, previous: Sequence[str]) -> CellResult:
        remote = self._sessions.get(session)
        if remote is not None and remote.cells != list(previous):
            await self._drop(session, remote)
            remote = None
        note = ""
        if remote is None:
            remote = fresh = self._sessions[session] = _Remote(await self._open(session))
            note, failed = await replay(
                previous,
                lambda cell: self._exec(session, fresh, cell),
                lambda: self._sessions.get(session) is fresh,
            )
            if failed:
                return failed
            remote.cells = list(previous)
        result = await self._exec(session, remote, code)
        result.stderr = note + result.stderr
        remote.last_used = time.monotonic()
        if self._sessions.get(session) is remote:
            await self._extend(remote)
        return result

    async def _open(self, session: str) -> Any:
        options: dict[str, Any] = {
            "timeout": max(int(self.idle_timeout), 60),
            "metadata": {"app": "deepresearch", "session": session},
            "allow_internet_access": self.network,
            "request_timeout": self.request_timeout,
        }
        if self.template:
            options["template"] = self.template
        if self.api_key:
            options["api_key"] = self.api_key
        try:
            return await self._create(**options)
        except AuthenticationException as e:
            raise _auth_error(e) from None
        except (SandboxException, httpx.HTTPError, OSError) as e:
            raise SandboxError(f"cannot create an E2B sandbox: {_reason(e)}") from e

    async def _exec(self, session: str, remote: _Remote, code: str) -> CellResult:
        """Run one cell. A timed-out session is killed and dropped; a failure of
        E2B itself drops the session and raises ``SandboxError`` (retried)."""
        started = time.monotonic()
        try:
            execution = await asyncio.wait_for(
                remote.sandbox.run_code(code, timeout=self.timeout, request_timeout=self.request_timeout),
                self.timeout + self.request_timeout,
            )
        except asyncio.CancelledError:  # the cell's state is unknown: start over next time
            await asyncio.shield(self._drop(session, remote))
            raise
        except AuthenticationException as e:
            await self._drop(session, remote)
            raise _auth_error(e) from None
        except (SandboxNotRunningException, NotFoundException) as e:
            await self._drop(session, remote)
            raise _Gone(f"the E2B sandbox is gone: {_reason(e)}") from e
        except (TimeoutError, TimeoutException) as e:
            await self._drop(session, remote)
            ran = time.monotonic() - started
            if isinstance(e, TimeoutError) or "execution timed out" in str(e).lower() or ran >= self.timeout:
                error = f"TimeoutError: the cell ran longer than {self.timeout:g} s and was stopped"
                return CellResult(error=error)
            raise SandboxError(f"E2B did not answer: {_reason(e)}") from e
        except (SandboxException, httpx.HTTPError, OSError) as e:
            await self._drop(session, remote)
            raise SandboxError(f"running the cell on E2B failed: {_reason(e)}") from e
        result = self._convert(execution)
        if result.error is None:
            remote.cells.append(code)
        return result

    def _convert(self, execution: Any) -> CellResult:
        """An SDK ``Execution`` as a ``CellResult``, capped like the local sandbox."""
        stdout = "".join(execution.logs.stdout)
        for item in execution.results:
            if stdout and not stdout.endswith("\n"):
                stdout += "\n"
            stdout += _describe_result(item)
        error = None
        if execution.error is not None:
            err = execution.error
            error = ANSI.sub("", err.traceback or "").rstrip()
            headline = f"{err.name}: {err.value}"
            if headline not in error:
                error = f"{error}\n{headline}".strip()
        stderr = "".join(execution.logs.stderr)
        return CellResult(
            stdout=self._clip(stdout),
            stderr=self._clip(stderr),
            error=None if error is None else self._clip(error),
        )

    def _clip(self, text: str) -> str:
        return text if len(text) <= self.output_chars else text[: self.output_chars] + TRUNCATED

    async def _extend(self, remote: _Remote) -> None:
        """Keep the sandbox alive for another ``idle_timeout``."""
        try:
            await remote.sandbox.set_timeout(max(int(self.idle_timeout), 60))
        except Exception as e:  # it is only a lease: the next cell recreates it if needed
            log.debug("extending E2B sandbox lifetime failed: %s", e)

    async def _drop(self, session: str, remote: _Remote) -> None:
        if self._sessions.get(session) is remote:
            del self._sessions[session]
        await self._kill(remote)

    async def _kill(self, remote: _Remote) -> None:
        try:
            await remote.sandbox.kill()
        except Exception as e:  # it expires by itself after idle_timeout
            log.warning("killing E2B sandbox %s failed: %s", getattr(remote.sandbox, "sandbox_id", "?"), e)

    def _forget_expired(self) -> None:
        """Drop sessions idle past their lease (E2B has killed them by now)."""
        limit = time.monotonic() - self.idle_timeout * 0.8
        for sid, remote in list(self._sessions.items()):
            lock = self._locks.get(sid)
            if remote.last_used < limit and not (lock and lock.locked()):
                del self._sessions[sid]
                task = asyncio.create_task(self._kill(remote))
                self._killing.add(task)
                task.add_done_callback(self._killing.discard)


def _describe_result(item: Any) -> str:
    """A display result as text: its text, and a note for each rich artifact."""
    lines = []
    if item.text:
        lines.append(item.text)
    for key, mime in BINARY.items():
        data = getattr(item, key, None)
        if data:
            kind = "chart" if mime.startswith("image/") else "file"
            lines.append(f"[{kind}: {mime}, {_base64_size(data)} bytes]")
    for key, mime in TEXTUAL.items():
        data = getattr(item, key, None)
        if data and (key == "svg" or not item.text):
            kind = "chart" if key == "svg" else "result"
            lines.append(f"[{kind}: {mime}, {len(data.encode())} bytes]")
    if item.json is not None and not item.text:
        lines.append(f"[result: application/json, {len(str(item.json))} chars]")
    chart = getattr(item, "chart", None)
    if chart is not None:
        kind = getattr(chart.type, "value", chart.type)
        title = f" {chart.title!r}" if chart.title else ""
        lines.append(f"[chart data: {kind}{title}, {len(chart.elements or [])} elements]")
    if not lines:
        lines.append(f"[result: {', '.join(item.formats()) or 'empty'}]")
    return "".join(line + "\n" for line in lines)


def _base64_size(data: str) -> int:
    data = data.strip()
    return len(data) * 3 // 4 - data[-2:].count("=")


def _reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _auth_error(e: BaseException) -> ApplicationError:
    return ApplicationError(
        f"E2B rejected the API key ({e}): set E2B_API_KEY to a valid key, "
        "or DEEPRESEARCH_SANDBOX=local to run code locally",
        type="SandboxAuthError",
        non_retryable=True,
    )
