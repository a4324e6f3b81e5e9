"""PDF and Word exports in a child process with a time and memory limit.

Laying out a report can take long and much memory (a huge table, an image
of 10,000 x 10,000 pixels), and a thread cannot be stopped: so the CLI and
the desk render documents in a child,

    python -m client.export_child pdf|docx MEMORY_BYTES CPU_SECONDS < result.json

which writes the document's bytes on standard output (exit code 0), or one
JSON line ``{"error": …, "kind": …}`` (exit code 3). The child limits its own
memory and CPU time first thing (``infra.child_limits``: no ``preexec_fn``);
the parent kills it after ``EXPORT_MAX_SECONDS``, or as soon as the desk's
client has gone (``render_document_async``).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Awaitable
from contextlib import suppress
from typing import TYPE_CHECKING, NoReturn

from client.errors import CliError

if TYPE_CHECKING:
    from workflows.models import ResearchResult

EXPORT_MAX_SECONDS = 120.0
EXPORT_MEMORY = 3 << 29  # 1.5 GiB of address space (a 1000 x 20 table's PDF peaks under 0.7)
NAMES = {"pdf": "PDF", "docx": "Word document"}
REFUSED = 3  # the child's exit code when it says why in one line


class ExportFailed(CliError):
    """The document could not be made within the limits (one line)."""


def _command(fmt: str, max_seconds: float, memory: int) -> list[str]:
    return [sys.executable, "-m", "client.export_child", fmt, str(memory), str(int(max_seconds) + 10)]


def _too_slow(fmt: str, seconds: float) -> ExportFailed:
    return ExportFailed(
        f"making the {NAMES[fmt]} took longer than {seconds:g} s and was stopped: "
        "export the report as md or html instead"
    )


def render_document(
    result: ResearchResult, fmt: str, max_seconds: float = EXPORT_MAX_SECONDS, memory: int = EXPORT_MEMORY
) -> bytes:
    """The report as a PDF or Word document, made in a child (see above)."""
    try:
        done = subprocess.run(
            _command(fmt, max_seconds, memory),
            input=result.model_dump_json().encode(),
            capture_output=True,
            timeout=max_seconds,
        )
    except subprocess.TimeoutExpired:  # run() has killed the child
        raise _too_slow(fmt, max_seconds) from None
    return _answer(fmt, done.returncode, done.stdout, done.stderr, max_seconds, memory)


async def render_document_async(
    result: ResearchResult,
    fmt: str,
    gone: Awaitable[object],
    max_seconds: float = EXPORT_MAX_SECONDS,
    memory: int = EXPORT_MEMORY,
) -> bytes | None:
    """``render_document`` without blocking the event loop; None, and the
    child killed at once, when ``gone`` completes first (the client left)."""
    child = await asyncio.create_subprocess_exec(
        *_command(fmt, max_seconds, memory),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    talk = asyncio.ensure_future(child.communicate(result.model_dump_json().encode()))
    left = asyncio.ensure_future(gone)
    try:
        await asyncio.wait({talk, left}, timeout=max_seconds, return_when=asyncio.FIRST_COMPLETED)
        if not talk.done():
            if left.done():
                return None
            raise _too_slow(fmt, max_seconds)
        out, err = talk.result()
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
        for task in (talk, left):
            task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await task
    return _answer(fmt, child.returncode or 0, out, err, max_seconds, memory)


def _answer(fmt: str, code: int, out: bytes, err: bytes, max_seconds: float, memory: int) -> bytes:
    if code == 0:
        return out
    if code == REFUSED:
        with suppress(ValueError):
            answer = json.loads(out)
            if answer.get("kind") == "unavailable":
                from client.export_pdf import PdfUnavailable

                raise PdfUnavailable(answer["error"])
            raise ExportFailed(answer["error"])
    if code == -signal.SIGXCPU:  # its CPU time limit
        raise _too_slow(fmt, max_seconds)
    last = err.decode("utf-8", "replace").strip().split("\n")[-1][-200:]
    if code < 0:  # a library that could not allocate crashes rather than raising
        why = f"{signal.Signals(-code).name}, perhaps past its memory limit of {memory >> 20} MB"
        raise ExportFailed(f"making the {NAMES[fmt]} failed ({why}): {last or 'no message'}")
    raise ExportFailed(f"making the {NAMES[fmt]} failed: {last or f'exit code {code}'}")


def _render(result: ResearchResult, fmt: str) -> bytes:
    if fmt == "pdf":
        from client.export_pdf import render_pdf

        return render_pdf(result)
    from client.export_docx import render_docx

    return render_docx(result)


def main() -> None:
    from infra.child_limits import limit_cpu, limit_memory

    fmt, memory, cpu_seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    limit_memory(memory)  # before reading what may be huge
    limit_cpu(cpu_seconds)  # stops it even if the parent has gone
    from workflows.models import ResearchResult

    try:
        data = _render(ResearchResult.model_validate_json(sys.stdin.buffer.read()), fmt)
    except MemoryError:
        _refuse(
            f"making the {NAMES[fmt]} needs more than {memory >> 20} MB of memory and was stopped: "
            "export the report as md or html instead",
            "memory",
        )
    except CliError as err:
        from client.export_pdf import PdfUnavailable

        _refuse(str(err), "unavailable" if isinstance(err, PdfUnavailable) else "failed")
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _refuse(message: str, kind: str) -> NoReturn:
    print(json.dumps({"error": message, "kind": kind}), flush=True)
    raise SystemExit(REFUSED)


if __name__ == "__main__":
    main()
