"""What every ``run_python`` backend shares: the ``Sandbox`` protocol, a
cell's result, and replaying a session's earlier cells in a fresh session
(a worker that does not hold a session rebuilds it from the cells the
workflow says already ran)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the user's code); the activity retries."""


class SandboxRefused(SandboxError):
    """The sandbox will not run code here (it cannot isolate it); the message
    says what to set. The coder is told; the run goes on."""


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
