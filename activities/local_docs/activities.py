"""The ``index_resources`` and ``local_search`` activities."""

from __future__ import annotations

import asyncio
import hashlib
import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.local_docs.index import LocalIndex, format_local_hits, fts5_available, query_terms
from activities.local_docs.sharing import SharedIndexes
from workflows.models import Citation
from workflows.tool_models import IndexRequest, LocalSearchRequest, ToolResult


class LocalDocsActivities:
    """``index_resources`` and ``local_search``; one instance per worker."""

    def __init__(self, data_dir: Path, shared: SharedIndexes | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.shared = shared
        # Run keys whose index in the data dir is current: built here, or
        # fetched from the shared store by this process (a copy left by an
        # earlier run with the same key is fetched again).
        self.current: set[str] = set()
        self._fetching: dict[str, asyncio.Lock] = {}
        self.indexing = ThreadPoolExecutor(max_workers=2, thread_name_prefix="index-resources")

    def index_for(self, run_key: str) -> LocalIndex:
        """The run's index file: ``<data dir>/indexes/<run key>.sqlite`` (the key
        made safe as a file name; a hash keeps altered keys distinct)."""
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", run_key)[:100].lstrip(".") or "run"
        if safe != run_key:
            safe += "-" + hashlib.sha256(run_key.encode("utf-8")).hexdigest()[:12]
        return LocalIndex(self.data_dir / "indexes" / f"{safe}.sqlite")

    @activity.defn(name="index_resources")
    async def index_resources(self, request: IndexRequest) -> str:
        """Index the run's resources; a short summary (files, sections, problems)."""
        _require_fts5()
        index = self.index_for(request.run_key)
        done = 0

        def progress(count: int) -> None:
            nonlocal done
            done = count

        # A thread of its own: a slow file system must not hold up the crawls
        # and DNS lookups of this worker, which share the default pool.
        task = asyncio.ensure_future(
            asyncio.get_running_loop().run_in_executor(self.indexing, index.index, request.paths, progress)
        )
        # Heartbeat from the event loop while the thread works (the SDK's
        # heartbeat is not thread-safe for async activities).
        while not task.done():
            await asyncio.wait({task}, timeout=2.0)
            if activity.in_activity():
                activity.heartbeat(done)
        report = task.result()
        if self.shared:
            await self.shared.upload(index)
        self.current.add(request.run_key)
        return report.summary()

    @activity.defn(name="local_search")
    async def local_search(self, request: LocalSearchRequest) -> ToolResult:
        """Search the run's local documents; hits cite file and section."""
        _require_fts5()
        index = self.index_for(request.run_key)
        if self.shared:
            await self._fetch(request.run_key, index)
        if not index.path.exists():
            return ToolResult(
                error=True,
                content="Error: no local documents were indexed for this run; use web_search.",
            )
        try:
            hits = await asyncio.to_thread(index.search, request.query, request.max_results)
        except sqlite3.Error as e:
            return ToolResult(error=True, content=f"Error: local search failed: {e}")
        sources = list({hit.url: Citation(title=hit.title, url=hit.url) for hit in hits}.values())
        return ToolResult(
            content=format_local_hits(request.query, hits, query_terms(request.query)),
            sources=sources,
        )

    async def _fetch(self, run_key: str, index: LocalIndex) -> None:
        """Once per process and run: the shared copy of the run's index, if
        there is one. Parallel searches of the run wait for one download."""
        assert self.shared
        async with self._fetching.setdefault(run_key, asyncio.Lock()):
            if run_key not in self.current and await self.shared.download(index):
                self.current.add(run_key)


def _require_fts5() -> None:
    if not fts5_available():
        raise ApplicationError(
            "this Python's SQLite has no FTS5 full-text search, which local documents need",
            type="FTS5Unavailable",
            non_retryable=True,
        )
