"""Shared fixtures: a real Temporal dev server, scripted OpenAI and Tavily
servers on loopback, and the environment a worker or CLI subprocess needs."""

from __future__ import annotations

import os
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from temporalio.client import Client

from client.devserver import DevServer
from infra.connection import Connection
from infra.settings import Settings
from infra.temporal import connect
from testkit.crash import worker_env as worker_environment
from testkit.llm_server import ScriptedLLM
from testkit.pages import PageServer, article
from testkit.research_script import FACT, ResearchScript
from testkit.search_server import ScriptedTavily
from worker import build_worker


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("temporal")
    with DevServer(db_file=folder / "temporal.db", ui_port=None, log_file=folder / "server.log") as server:
        yield server


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("DEEPRESEARCH_DATA_DIR", str(folder))
    return folder


@pytest.fixture
def llm():
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def tavily():
    with ScriptedTavily() as server:
        yield server


@pytest.fixture
async def temporal_client(dev_server: DevServer, data_dir: Path) -> Client:
    return await connect(Connection(address=dev_server.address, data_dir=data_dir))


@pytest.fixture
def task_queue() -> str:
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture
def worker_env(
    llm: ScriptedLLM, tavily: ScriptedTavily, data_dir: Path, dev_server: DevServer, task_queue: str
) -> dict[str, str]:
    return worker_environment(
        dict(os.environ),
        llm=llm,
        tavily=tavily,
        data_dir=data_dir,
        address=dev_server.address,
        task_queue=task_queue,
    )


@pytest.fixture
def pages():
    """A loopback site whose article holds a fact found nowhere else."""
    with PageServer() as server:
        server.add("/lighthouse", article("Lantern Rock history", ["Some history first.", FACT + ".", "More."]))
        yield server


@pytest.fixture
def script(llm: ScriptedLLM, tavily: ScriptedTavily, pages: PageServer) -> ResearchScript:
    """The scripted model plays every role; search finds the loopback article."""
    script = ResearchScript()
    llm.handler = script
    tavily.handler = lambda query, n: [
        {"title": "Lantern Rock history", "url": pages.url("/lighthouse"), "content": "A lighthouse.", "score": 0.9}
    ]
    return script


@pytest.fixture
def research_worker(temporal_client: Client, worker_env: dict[str, str], task_queue: str, script):
    """Start an in-process worker, optionally with extra environment. It caches
    no workflows, so every workflow task replays the history from the start:
    non-determinism fails the tests. ``cached``: a worker that keeps its
    workflows, as a deployed one does (the SDK's zero-size cache sometimes
    leaves a workflow task unanswered until its 10 s timeout: a test that
    times a page's progress runs on a cached worker)."""

    @asynccontextmanager
    async def start(cached: bool = False, **env: str):
        settings = Settings.from_env(worker_env | env)
        settings.check()
        worker, held = build_worker(temporal_client, settings, task_queue, max_cached_workflows=100 if cached else 0)
        try:
            async with worker:
                yield worker
        finally:
            await held.close_all()

    return start


@pytest.fixture
async def worker(research_worker):
    async with research_worker() as worker:
        yield worker
