"""Research runs of the built-in suite's tasks with fixture writers behind
some roles (``testkit/fixture_model.py``): the real workflow, a real worker
per reporter variant (in this process), the corpus web with its search
engine on loopback, every other role on the demo model.

    async with fixture_workers(client, model, web, data_dir, ["full", "concise"]) as queues:
        runs = await run_cases(client, queues, [Case("ferry-average", "full")])

Used by ``tests/test_strong_outputs.py`` and ``testkit/fixture_capture.py``
(which captures what each role was shown, to write fixtures from).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from client.demo.model import MODEL_NAME
from client.evaluation.web import CorpusWeb
from infra.settings import Settings
from testkit.fixture_model import BUILTIN, FixtureModel, tasks
from testkit.runs import start
from workflows.models import ResearchResult

RUN_SECONDS = 240  # a run that takes longer has hung: the test fails rather than waits
AT_ONCE = 6  # runs at once: more starve the in-process worker's heartbeats on a busy 2-core machine


@dataclass(frozen=True)
class Case:
    """One run: a task of the built-in suite, the reporter variant that
    writes its report, and the run's locale (None: the coordinator's)."""

    task: str
    variant: str
    locale: str | None = None

    @property
    def name(self) -> str:
        return f"{self.task}-{self.variant}" + (f"-{self.locale}" if self.locale else "")


@dataclass
class Ran:
    case: Case
    run_id: str
    result: ResearchResult


def worker_env(model: FixtureModel, web: CorpusWeb, data_dir: Path, variant: str) -> dict[str, str]:
    """A worker's settings: the demo model for every role, fixture writers
    for the planner, the researcher and the reporter (variant ``variant``)."""
    return {
        "OPENAI_API_KEY": "fixture-key-never-leaves-loopback",
        "OPENAI_BASE_URL": model.base_url,
        "DEEPRESEARCH_MODEL": MODEL_NAME,
        "DEEPRESEARCH_MODEL_PLANNER": f"fixture-planner-{variant}",
        "DEEPRESEARCH_MODEL_RESEARCHER": f"fixture-researcher-{variant}",
        "DEEPRESEARCH_MODEL_REPORTER": f"fixture-reporter-{variant}",
        "DEEPRESEARCH_SEARCH_ENGINE": "tavily",
        "TAVILY_API_KEY": "fixture",
        "TAVILY_BASE_URL": web.base_url,
        "DEEPRESEARCH_ALLOW_PRIVATE_URLS": "1",
        "DEEPRESEARCH_SANDBOX": "local",
        "DEEPRESEARCH_DATA_DIR": str(data_dir),
        "DEEPRESEARCH_MCP_CONFIG": str(_no_mcp(data_dir)),
    }


def _no_mcp(data_dir: Path) -> Path:
    config = data_dir / "mcp-none.json"
    config.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    return config


@asynccontextmanager
async def fixture_workers(
    client: Client, model: FixtureModel, web: CorpusWeb, data_dir: Path, variants: list[str]
) -> AsyncIterator[dict[str, str]]:
    """One worker per reporter variant, each on its own task queue; yields
    {variant: task queue}."""
    from worker import build_worker

    queues: dict[str, str] = {}
    async with AsyncExitStack() as stack:
        for variant in variants:
            settings = Settings.from_env(worker_env(model, web, data_dir, variant))
            settings.check()
            queue = f"fixtures-{variant}-{uuid.uuid4().hex[:8]}"
            worker, held = build_worker(client, settings, queue)
            stack.push_async_callback(held.close_all)
            await stack.enter_async_context(worker)
            queues[variant] = queue
        yield queues


async def run_cases(client: Client, queues: dict[str, str], cases: list[Case], suite: Path = BUILTIN) -> list[Ran]:
    """Every case (a task of ``suite``) run to its end, ``AT_ONCE`` at a
    time (plan accepted as written, the task's own options), in the order
    given."""
    suite_tasks = tasks(suite)
    slots = asyncio.Semaphore(AT_ONCE)

    async def one(case: Case) -> Ran:
        async with slots:
            return await _run(case)

    async def _run(case: Case) -> Ran:
        task = suite_tasks[case.task]
        options = dict(task.get("options") or {})
        if case.locale:
            options["locale"] = case.locale
        handle = await start(client, queues[case.variant], task["question"], auto_accept_plan=True, **options)
        async with asyncio.timeout(RUN_SECONDS):
            result = await handle.result()
        return Ran(case, handle.id, result)

    return list(await asyncio.gather(*(one(case) for case in cases)))
