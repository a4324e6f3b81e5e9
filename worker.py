"""The research worker: runs the DeepResearch workflow and its activities.

    python worker.py          # or: deepresearch worker

Configuration comes from the environment (see README, "Configuration").
"""

from __future__ import annotations

import asyncio
import logging
import sys

from temporalio.client import Client
from temporalio.worker import Worker

from activities.blobs import BlobStore
from activities.crawl import CrawlActivities
from activities.llm import ModelActivities
from activities.local_docs import LocalDocsActivities
from activities.sandbox import Sandbox, SandboxActivities, make_sandbox
from activities.search import SearchActivities
from activities.settings import ConfigError, Settings
from client.connection import Connection, ConnectionFailed, connect
from workflows.deep_research import DeepResearch


def build_worker(
    client: Client,
    settings: Settings,
    task_queue: str,
    *,
    max_cached_workflows: int = 1000,
    max_concurrent_activities: int = 100,
) -> tuple[Worker, Sandbox]:
    """A worker with every activity; the caller closes the sandbox."""
    blobs = BlobStore(settings.data_dir / "blobs")
    sandbox = make_sandbox(settings)
    model = ModelActivities(settings, blobs)
    search = SearchActivities(settings)
    crawl = CrawlActivities(blobs, allow_private=settings.allow_private_urls)
    code = SandboxActivities(sandbox)
    docs = LocalDocsActivities(settings.data_dir)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[DeepResearch],
        activities=[
            model.chat, search.web_search, crawl.crawl, code.run_python, code.close_sandbox,
            docs.index_resources, docs.local_search,
        ],  # fmt: skip
        max_cached_workflows=max_cached_workflows,
        max_concurrent_activities=max_concurrent_activities,
    )
    return worker, sandbox


async def run_worker(
    conn: Connection, settings: Settings, *, stop: asyncio.Event | None = None, **options
) -> None:
    """Run until ``stop`` is set or the task is cancelled."""
    settings.check()
    client = await connect(conn)
    worker, sandbox = build_worker(client, settings, conn.task_queue, **options)
    try:
        async with worker:
            await (stop.wait() if stop else asyncio.Future())
    finally:
        await sandbox.close_all()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    conn = Connection.from_env()
    try:
        settings = Settings.from_env()
        print(f"worker on {conn.address}, task queue {conn.task_queue}", flush=True)
        asyncio.run(run_worker(conn, settings))
    except (ConfigError, ConnectionFailed) as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        sys.exit(2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
