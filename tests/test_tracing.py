"""Tracing: the SDK's OpenTelemetry interceptor, off by default, on with the
standard OTEL_* variables.

A real research run on the dev server with tracing on exports spans for the
workflow and its activities (in-memory exporter); a client configured only
through OTEL_EXPORTER_OTLP_ENDPOINT sends its spans over OTLP/HTTP to a
collector on loopback.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from temporalio.client import Client

from client.devserver import temporal_binary
from infra.converter import data_converter
from infra.errors import ConfigError
from infra.settings import Settings
from infra.tracing import exporter_names, tracing_enabled, tracing_interceptors
from testkit.runs import start
from worker import build_worker

pytest.importorskip("opentelemetry.sdk", reason="the tracing extra is not installed")
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def test_off_by_default_and_on_with_standard_variables():
    assert exporter_names({}) == [] and tracing_interceptors({}) == []
    assert exporter_names({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}) == ["otlp"]
    assert exporter_names({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}) == ["otlp"]
    assert exporter_names({"OTEL_TRACES_EXPORTER": "console"}) == ["console"]
    assert exporter_names({"OTEL_TRACES_EXPORTER": "otlp,console"}) == ["otlp", "console"]
    assert not tracing_enabled({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert not tracing_enabled({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert not tracing_enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": ""})  # compose's empty pass-through


def test_unknown_exporter_is_a_clear_error():
    # A subprocess: configuring the global provider is once per process.
    code = (
        "from infra.tracing import tracing_interceptors\n"
        "from infra.settings import ConfigError\n"
        "try:\n"
        "    tracing_interceptors({'OTEL_TRACES_EXPORTER': 'zipkin'})\n"
        "except ConfigError as err:\n"
        "    print('ConfigError:', err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "ConfigError: OTEL_TRACES_EXPORTER='zipkin' is not supported" in out.stdout, out.stderr
    assert ConfigError  # imported for the reader: that is the error type


async def ready_client(address: str, **kwargs) -> Client:
    for _ in range(150):  # the dev server's frontend may still be starting
        try:
            return await Client.connect(address, **kwargs)
        except RuntimeError as err:
            if "not healthy" not in str(err):
                raise
            await asyncio.sleep(0.1)
    return await Client.connect(address, **kwargs)


async def test_run_with_tracing_emits_workflow_and_activity_spans(
    dev_server, data_dir, worker_env, task_queue, script, pages
):
    exporter = InMemorySpanExporter()
    client = await ready_client(
        dev_server.address,
        data_converter=data_converter(data_dir),
        interceptors=tracing_interceptors(exporter=exporter),
    )
    settings = Settings.from_env(worker_env)
    settings.check()
    # The worker inherits the client's interceptor: nothing tracing-specific here.
    worker, held = build_worker(client, settings, task_queue, max_cached_workflows=0)
    try:
        async with worker:
            handle = await start(client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
            result = await handle.result()
    finally:
        await held.close_all()
    assert result.status == "completed"

    spans = exporter.get_finished_spans()
    names = [span.name for span in spans]
    for expected in (
        "StartWorkflow:DeepResearch",
        "RunWorkflow:DeepResearch",
        "RunActivity:chat",
        "RunActivity:web_search",
        "RunActivity:crawl",
        "RunActivity:run_python",
    ):
        assert expected in names, f"no {expected} span in {sorted(set(names))}"
    # One trace per run: everything hangs under the client's StartWorkflow span.
    root = next(s for s in spans if s.name == "StartWorkflow:DeepResearch")
    assert root.attributes["temporalWorkflowID"] == handle.id
    run_spans = [s for s in spans if s.name.startswith(("RunWorkflow:", "RunActivity:", "StartActivity:"))]
    assert {s.context.trace_id for s in run_spans} == {root.context.trace_id}
    by_id = {s.context.span_id: s for s in spans}
    crawl = next(s for s in spans if s.name == "RunActivity:crawl")
    chain = []
    node = crawl
    while node.parent is not None and node.parent.span_id in by_id:
        node = by_id[node.parent.span_id]
        chain.append(node.name)
    # RunActivity:crawl <- StartActivity:crawl (scheduled by the workflow) <- StartWorkflow
    assert chain[0] == "StartActivity:crawl" and chain[-1] == "StartWorkflow:DeepResearch"
    # Counts match the run's own accounting (the worker replays every task:
    # replays must not add spans).
    assert names.count("RunActivity:chat") == result.usage.llm_calls
    assert names.count("RunActivity:web_search") == result.usage.searches
    assert names.count("RunWorkflow:DeepResearch") == 1
    assert root.resource.attributes["service.name"] == "deepresearch"


class Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, bytes]] = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Collector.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def collector():
    Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


CLIENT_SCRIPT = """
import asyncio, os, sys
from pathlib import Path
from client.runs import WORKFLOW_TYPE
from infra.connection import Connection
from infra.temporal import connect
from infra.tracing import flush_tracing
from workflows.models import ResearchInput

async def main():
    for _ in range(150):
        try:
            client = await connect(Connection(address=sys.argv[1], data_dir=Path(sys.argv[2])))
            break
        except Exception as err:
            if "not healthy" not in str(err):
                raise
            await asyncio.sleep(0.1)
    handle = await client.start_workflow(
        WORKFLOW_TYPE, ResearchInput(question="traced"), id=sys.argv[3], task_queue=sys.argv[3]
    )
    await handle.terminate("tracing test")

asyncio.run(main())
flush_tracing()
print("done", flush=True)
os._exit(0)  # as the CLI ends: a process that opened a temporalio client can abort at exit
"""


def test_otlp_endpoint_from_the_environment_exports_client_spans(dev_server, data_dir, collector):
    """connect() alone, configured by OTEL_* only: the CLI's StartWorkflow span
    reaches an OTLP/HTTP collector."""
    import os
    import uuid

    env = os.environ | {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
        "OTEL_SERVICE_NAME": "deepresearch-cli-test",
        "DEEPRESEARCH_DATA_DIR": str(data_dir),
    }
    workflow_id = f"traced-{uuid.uuid4().hex[:8]}"
    out = subprocess.run(
        [sys.executable, "-c", CLIENT_SCRIPT, dev_server.address, str(data_dir), workflow_id],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "done" in out.stdout, out.stderr[-3000:]
    paths = {path for path, _ in Collector.received}
    assert paths == {"/v1/traces"}
    body = b"".join(b for _, b in Collector.received)
    assert b"StartWorkflow:DeepResearch" in body
    assert b"deepresearch-cli-test" in body and workflow_id.encode() in body

    # `review` normally skips the SDK's full client (client/quick.py); with
    # tracing on it takes it, so its update is traced too.
    Collector.received = []
    review = subprocess.run(
        [str(Path(sys.executable).parent / "deepresearch"), "review", workflow_id, "--accept"],
        env=env | {"TEMPORAL_ADDRESS": dev_server.address},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert review.returncode == 1 and "has already finished" in review.stderr, review.stderr[-3000:]
    assert b"StartWorkflowUpdate:submit_review" in b"".join(b for _, b in Collector.received)

    # So does `start` (a run on a queue no worker polls, ended at once).
    Collector.received = []
    cli_env = env | {"TEMPORAL_ADDRESS": dev_server.address, "DEEPRESEARCH_TASK_QUEUE": workflow_id}
    started = subprocess.run(
        [str(Path(sys.executable).parent / "deepresearch"), "start", "traced", "--id", f"{workflow_id}-cli"],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr[-3000:]
    subprocess.run(
        [temporal_binary(), "workflow", "terminate", "--address", dev_server.address, "-w", f"{workflow_id}-cli"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    body = b"".join(b for _, b in Collector.received)
    assert b"StartWorkflow:DeepResearch" in body and f"{workflow_id}-cli".encode() in body
