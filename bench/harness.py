"""The benchmark environment: a real Temporal dev server with its own temp
database, the scripted model / search / page servers on loopback, the
project's data converter, and a real worker (in this process, or a
subprocess when its memory is measured)."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client, WorkflowHandle

from bench.script import BenchScript
from client.devserver import DevServer
from client.runs import start_research
from infra.connection import Connection
from infra.errors import ConnectionFailed
from infra.settings import Settings
from infra.temporal import connect
from testkit.llm_server import ScriptedLLM
from testkit.pages import PageServer
from testkit.search_server import ScriptedTavily
from worker import build_worker
from workflows.models import ResearchInput, ResearchResult

# The stdlib servers listen with a backlog of 5; 150 clients connecting at
# once would see dropped SYNs (1 s retransmits) that no real API shows.
http.server.ThreadingHTTPServer.request_queue_size = 1024

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Latency:
    model: float = 0.0
    search: float = 0.0
    crawl: float = 0.0
    code: float = 0.0

    @classmethod
    def simulated(cls) -> Latency:
        return cls(model=2.0, search=1.5, crawl=1.0, code=0.5)


@dataclass
class RunRecord:
    workflow_id: str
    wall: float  # seconds from start request to result, seen by the client
    result: ResearchResult
    handle: WorkflowHandle


class BenchEnv:
    """Everything but the worker; ``worker()`` adds one."""

    def __init__(self, keep: bool = False, server_args: tuple[str, ...] = ()) -> None:
        self.keep = keep
        self.root = Path(tempfile.mkdtemp(prefix="dr-bench-"))
        self.data_dir = self.root / "data"
        self.data_dir.mkdir()
        # --server-args: extra dev-server flags, for what-if measurements
        self.server = DevServer(
            db_file=self.root / "temporal.db", log_file=self.root / "server.log", extra_args=list(server_args)
        )
        self.pages = PageServer()
        self.script = BenchScript(self.pages)
        self.llm = ScriptedLLM(self.script)
        self.tavily = ScriptedTavily(self.script.search)
        self.client: Client | None = None
        self.page_size = 3_000  # characters of each canonical page (bench.script.SHORT_PAGE)

    async def __aenter__(self) -> BenchEnv:
        try:
            self.server.start()
            self.pages.start()
            self.llm.start()
            self.tavily.start()
            deadline = time.monotonic() + 60
            while True:  # the port opens before the frontend is healthy
                try:
                    self.client = await connect(self.conn())
                    return self
                except ConnectionFailed:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
        except BaseException:
            await self.__aexit__()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self.tavily.stop()
        self.llm.stop()
        self.pages.stop()
        self.server.stop()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def conn(self, task_queue: str = "bench") -> Connection:
        return Connection(address=self.server.address, task_queue=task_queue, data_dir=self.data_dir)

    def env(self, task_queue: str) -> dict[str, str]:
        return os.environ | {
            "OPENAI_API_KEY": self.llm.api_key,
            "OPENAI_BASE_URL": self.llm.base_url,
            "TAVILY_API_KEY": self.tavily.api_key,
            "TAVILY_BASE_URL": self.tavily.base_url,
            "DEEPRESEARCH_SEARCH_ENGINE": "tavily",
            "DEEPRESEARCH_DATA_DIR": str(self.data_dir),
            "DEEPRESEARCH_ALLOW_PRIVATE_URLS": "1",
            "DEEPRESEARCH_SANDBOX": "local",
            "DEEPRESEARCH_MODEL": "bench-model",
            # Generous, so no request is trimmed (the loop sends ~2 MB at the end).
            "DEEPRESEARCH_CONTEXT_WINDOW": "2000000",
            "TEMPORAL_ADDRESS": self.server.address,
            "DEEPRESEARCH_TASK_QUEUE": task_queue,
        }

    # -- scenario ---------------------------------------------------------------

    def canonical(self, latency: Latency) -> None:
        from bench.script import add_canonical_pages

        self.script.mode = "canonical"
        self.script.code_seconds = latency.code
        self.llm.latency = latency.model
        self.tavily.latency = latency.search
        add_canonical_pages(self.pages, latency.crawl, self.page_size, self.script.results)

    def loop(self, latency: Latency) -> list[str]:
        from bench.script import add_loop_pages

        self.script.mode = "loop"
        self.llm.latency = latency.model
        self.tavily.latency = latency.search
        self.script.loop_paths = add_loop_pages(self.pages, latency.crawl)
        return self.script.loop_paths

    # -- workers ----------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def checkout(self, rev: str) -> AsyncIterator[Path]:
        """A git worktree of commit ``rev`` in the temp dir, for a worker of
        that commit (``worker_process(checkout=...)``): "before" beside "after"."""
        tree = self.root / f"checkout-{len(list(self.root.glob('checkout-*')))}"
        git = ["git", "-C", str(REPO)]
        await asyncio.to_thread(
            subprocess.run, [*git, "worktree", "add", "--detach", str(tree), rev], check=True, capture_output=True
        )
        try:
            yield tree
        finally:
            await asyncio.to_thread(
                subprocess.run, [*git, "worktree", "remove", "--force", str(tree)], capture_output=True
            )

    @contextlib.asynccontextmanager
    async def any_worker(self, task_queue: str, checkout: Path | None = None) -> AsyncIterator[int | None]:
        """This checkout's worker in this process, or a checkout's worker
        process (its pid)."""
        if checkout is None:
            async with self.worker(task_queue):
                yield None
        else:
            async with self.worker_process(task_queue, checkout=checkout) as pid:
                yield pid

    @contextlib.asynccontextmanager
    async def worker(self, task_queue: str, **options) -> AsyncIterator[None]:
        settings = Settings.from_env(self.env(task_queue))
        settings.check()
        assert self.client is not None
        options.setdefault("max_concurrent_activities", 300)
        worker, held = build_worker(self.client, settings, task_queue, **options)
        try:
            async with worker:
                yield
        finally:
            await held.close_all()

    @contextlib.asynccontextmanager
    async def worker_process(
        self,
        task_queue: str,
        max_concurrent_activities: int = 300,
        module: str = "bench.worker_proc",
        checkout: Path = REPO,
        extra_env: dict[str, str] | None = None,
    ):
        """``python -m bench.worker_proc`` in its own process; yields its pid.
        (``module``: another entry point with the same protocol, for
        experiments; ``checkout``: another checkout's code, e.g. a baseline
        commit's git worktree: its packages come first on the path;
        ``extra_env``: more of the worker's environment.)"""
        env = self.env(task_queue) | {"BENCH_MAX_ACTIVITIES": str(max_concurrent_activities)} | (extra_env or {})
        log = open(self.root / f"worker-{task_queue}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", module],
            cwd=checkout,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
        )
        try:
            line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
            if line.strip() != b"ready":
                raise RuntimeError(f"the worker process did not start; see {log.name}")
            yield proc.pid
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.to_thread(proc.wait, 30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log.close()

    # -- runs -------------------------------------------------------------------

    async def start(self, task_queue: str, *, parallel: bool = True, **options) -> WorkflowHandle:
        """Starts the canonical run (plan accepted automatically unless
        ``auto_accept_plan=False`` is given) and returns at once."""
        assert self.client is not None
        options.setdefault("auto_accept_plan", True)
        request = ResearchInput(
            question="How has the Aldous index developed?",
            enable_background_investigation=False,
            parallel_research=parallel,
            max_step_num=4,  # 3 research steps + 1 processing step
            **options,
        )
        workflow_id = f"bench-{uuid.uuid4().hex[:10]}"
        return await start_research(self.client, self.conn(task_queue), request, workflow_id)

    async def run_plain(self, task_queue: str) -> dict:
        """The canonical run started with plain JSON input that any version of
        the workflow reads (no fields added since), its result as JSON."""
        assert self.client is not None
        request = {
            "question": "How has the Aldous index developed?",
            "enable_background_investigation": False,
            "parallel_research": True,
            "max_step_num": 4,
            "auto_accept_plan": True,
        }
        handle = await self.client.start_workflow(
            "DeepResearch", request, id=f"bench-{uuid.uuid4().hex[:10]}", task_queue=task_queue, result_type=dict
        )
        return await handle.result()

    async def run(self, task_queue: str, *, parallel: bool = True, **options) -> RunRecord:
        begin = time.perf_counter()
        handle = await self.start(task_queue, parallel=parallel, **options)
        workflow_id = handle.id
        result = await handle.result()
        wall = time.perf_counter() - begin
        if result.status != "completed":
            raise RuntimeError(f"run {workflow_id} ended {result.status}: {result.final_report[:200]}")
        return RunRecord(workflow_id, wall, result, handle)
