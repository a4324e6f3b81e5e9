"""The coder agent's ``run_python`` tool as Temporal activities, over any
``Sandbox`` backend."""

from __future__ import annotations

import asyncio

from temporalio import activity

from activities.sandbox.base import Sandbox, SandboxRefused
from infra.blobs import BlobStore
from workflows.tool_models import CodeRequest, ToolResult

INLINE_CHARS = 4_000  # longer output goes to the blob store


class SandboxActivities:
    """Temporal activities for the coder agent's ``run_python`` tool."""

    heartbeat_every = 2.0  # well inside the 10 s heartbeat timeout

    def __init__(self, sandbox: Sandbox, blobs: BlobStore | None = None) -> None:
        self.sandbox = sandbox
        self.blobs = blobs  # cells travel as blob references when there is a store

    @activity.defn(name="run_python")
    async def run_python(self, request: CodeRequest) -> ToolResult:
        """Run a cell; user-code errors and timeouts come back as ``error=True``."""
        beat = asyncio.create_task(self._heartbeat()) if activity.in_activity() else None
        try:
            previous = list(request.previous)
            if request.previous_refs and self.blobs is not None:
                previous += await asyncio.gather(*(self.blobs.get(ref) for ref in request.previous_refs))
            cell = await self.sandbox.run(request.session, request.code, previous)
        except SandboxRefused as refused:
            return ToolResult(error=True, content=f"Error: Python cannot run here: {refused}")
        finally:
            if beat is not None:
                beat.cancel()
        parts = [cell.stdout.rstrip("\n")] if cell.stdout else []
        if cell.stderr:
            parts.append("[stderr]\n" + cell.stderr.rstrip("\n"))
        if cell.error:
            parts.append("[error]\n" + cell.error.rstrip("\n"))
        content = "\n".join(parts) or "(no output; print() the values you want to see)"
        ref = await self.blobs.put(request.code) if self.blobs is not None and cell.error is None else None
        if len(content) > INLINE_CHARS and self.blobs is not None:
            # Long output by reference: history stays small, and the model
            # reads it in parts that fit its window (read_page).
            output = await self.blobs.put(content)
            header = f"Output of run_python ({len(content):,} characters):\n"
            return ToolResult(content=header, blob=output, source=output, error=cell.error is not None, cell=ref)
        return ToolResult(content=content, error=cell.error is not None, cell=ref)

    @activity.defn(name="close_sandbox")
    async def close_sandbox(self, session: str) -> None:
        await self.sandbox.close(session)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_every)
            activity.heartbeat()
