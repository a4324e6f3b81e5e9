"""Shared fixtures: a real Temporal dev server, scripted OpenAI and Tavily
servers on loopback, and the environment a worker or CLI subprocess needs."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from client.connection import Connection, connect
from client.devserver import DevServer
from tests.harness.llm_server import ScriptedLLM
from tests.harness.search_server import ScriptedTavily


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
    return os.environ | {
        "OPENAI_API_KEY": llm.api_key,
        "OPENAI_BASE_URL": llm.base_url,
        "TAVILY_API_KEY": tavily.api_key,
        "TAVILY_BASE_URL": tavily.base_url,
        "DEEPRESEARCH_DATA_DIR": str(data_dir),
        "DEEPRESEARCH_ALLOW_PRIVATE_URLS": "1",
        "TEMPORAL_ADDRESS": dev_server.address,
        "DEEPRESEARCH_TASK_QUEUE": task_queue,
        "DEEPRESEARCH_MODEL": "scripted-model",
    }
