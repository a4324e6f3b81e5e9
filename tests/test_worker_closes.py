"""A worker that stops closes what it opened: its sandbox and the HTTP
clients of the model and speech endpoints (left open, the garbage collector
closed them later on whatever event loop ran then, a workflow's included)."""

from __future__ import annotations

from infra.settings import Settings
from worker import build_worker


async def test_closing_a_built_worker_closes_its_http_clients(temporal_client, worker_env):
    _, held = build_worker(temporal_client, Settings.from_env(worker_env), "closes")
    assert len(held.clients) == 2 and not any(c.is_closed() for c in held.clients)
    await held.close_all()
    assert all(c.is_closed() for c in held.clients)
