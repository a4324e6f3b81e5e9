"""The research worker: runs the DeepResearch workflow and its activities.

    python worker.py          # or: deepresearch worker

Configuration comes from the environment (see README, "Configuration").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import (
    FixedSizeSlotSupplier,
    Interceptor,
    PollerBehaviorSimpleMaximum,
    Worker,
    WorkerTuner,
    _workflow_instance,  # one_batch: the SDK has no public switch yet
)

from activities.crawl import CrawlActivities
from activities.deck import DeckActivities
from activities.earlier_runs import EarlierRuns
from activities.evaluation import EvalActivities
from activities.evidence import EvidenceActivities
from activities.learnt_pace import LearntPace, endpoint_name
from activities.llm import ModelActivities
from activities.local_docs.activities import LocalDocsActivities
from activities.local_docs.sharing import SharedIndexes
from activities.mcp.activities import McpActivities
from activities.mcp.config import load_mcp_config
from activities.owners import OwnerActivities
from activities.pacing import PacedSlots, Pacer
from activities.probes import audio_format, probe_chat  # noqa: F401 - for `doctor` (client/commands/doctor.py)
from activities.recheck import RecheckActivities
from activities.sandbox import make_sandbox
from activities.sandbox.activities import SandboxActivities
from activities.sandbox.base import Sandbox
from activities.search.activities import SearchActivities
from activities.speech import SpeechActivities
from infra.blobs import blob_store
from infra.connection import Connection
from infra.errors import ConfigError, ConnectionFailed
from infra.local_models import local_settings
from infra.log_lines import worker_logging
from infra.payload_storage import payload_storage_location as payload_storage
from infra.process import exit_now, protect_secrets, stop_on_signals
from infra.s3 import S3Config, s3_client
from infra.settings import Settings, check_model_endpoint, private_dir
from infra.temporal import connect
from infra.tracing import tracing_enabled
from workflows.deep_research import DeepResearch
from workflows.eval_suite import EvalSuite
from workflows.follow_up import FollowUp
from workflows.models import build_schemas
from workflows.podcast import Podcast
from workflows.prose import Prose
from workflows.rate_limits import model_queue
from workflows.slides import Slides


def shared_indexes(env: Mapping[str, str] | None = None) -> SharedIndexes | None:
    """Where the worker that indexed a run's local documents leaves a copy of
    the index for the others: the payload bucket, if set."""
    s3 = S3Config.from_env(env)
    return SharedIndexes(s3_client(s3), s3.bucket) if s3 else None


class Held:
    """What a built worker holds open besides its Temporal client: the code
    sandbox and the HTTP clients of the model and speech endpoints.
    ``close_all`` closes them all, so a worker that stops leaves no client
    for the garbage collector to close on some other event loop."""

    def __init__(self, sandbox: Sandbox, *clients: Any) -> None:
        self.sandbox, self.clients = sandbox, clients

    async def close_all(self) -> None:
        try:
            await self.sandbox.close_all()
        finally:
            for http_client in self.clients:
                await http_client.close()


class Workers:
    """The research worker and its model worker (``<task queue>-model``),
    run together: ``async with``, ``run()``, ``shutdown()``. ``learnt``, the
    model calls' learnt pace, reads the server's setting before they poll."""

    def __init__(self, *workers: Worker, learnt: LearntPace | None = None) -> None:
        self.workers = workers
        self.learnt = learnt
        self._stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> Workers:
        stack = contextlib.AsyncExitStack()
        try:
            if self.learnt:
                await self.learnt.start()
                stack.push_async_callback(self.learnt.close)
            for one in self.workers:
                await stack.enter_async_context(one)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc: object) -> None:
        stack, self._stack = self._stack, None
        if stack:
            await stack.__aexit__(*exc)

    async def run(self) -> None:
        await asyncio.gather(*(one.run() for one in self.workers))

    async def shutdown(self) -> None:
        await asyncio.gather(*(one.shutdown() for one in self.workers))


MODEL_POLLERS = 5  # the SDK's default; the pacer's slots bound the polls that wait


def model_worker(
    client: Client,
    settings: Settings,
    task_queue: str,
    model: ModelActivities,
    most: int,
    graceful_shutdown: timedelta,
    interceptors: Sequence[Interceptor],
) -> Worker:
    """The worker of the model calls (``workflows/rate_limits.py``): on a task
    queue of their own, paced by the server to ``DEEPRESEARCH_MODEL_RPS``
    across every worker of the deployment (unset: to the rate learnt from the
    provider's 429s, ``activities/learnt_pace.py``, set on the server), and by
    this worker's pacer (``activities/pacing.py``) when the provider answers
    429."""
    fixed = FixedSizeSlotSupplier(1)  # no workflows, local activities or Nexus here
    tuner = WorkerTuner.create_composite(
        workflow_supplier=fixed,
        activity_supplier=PacedSlots(model.pacer),
        local_activity_supplier=fixed,
        nexus_supplier=fixed,
    )
    return Worker(
        client,
        task_queue=model_queue(task_queue),
        activities=[model.chat],
        tuner=tuner,
        activity_task_poller_behavior=PollerBehaviorSimpleMaximum(MODEL_POLLERS),
        max_task_queue_activities_per_second=settings.model_rps,
        graceful_shutdown_timeout=graceful_shutdown,
        interceptors=interceptors,
    )


def build_worker(
    client: Client,
    settings: Settings,
    task_queue: str,
    *,
    max_cached_workflows: int = 1000,
    max_concurrent_activities: int = 100,
    max_activities_per_second: float | None = None,
    graceful_shutdown_seconds: float = 0,
    interceptors: Sequence[Interceptor] = (),
) -> tuple[Workers, Held]:
    """The workers with every activity (the model calls on their own task
    queue, ``<task queue>-model``), and what they hold open (the sandbox and
    HTTP clients): the caller closes that with ``close_all()``.

    ``max_concurrent_activities`` bounds the activities this worker runs at
    once (and its model calls, apart); ``max_activities_per_second`` is the
    task queue's rate limit, shared by every worker on the queue (the server
    enforces it; the value the workers last set wins), as
    ``settings.model_rps`` is the model queue's. Interceptors of the client
    (e.g. tracing, see infra/tracing.py) apply already; ``interceptors`` adds
    more."""
    build_schemas()
    blobs = blob_store(settings.data_dir)
    sandbox = make_sandbox(settings)
    # With no rate configured, the rate the provider's 429s teach, for the fleet (activities/learnt_pace.py).
    learnt = LearntPace(
        client, model_queue(task_queue), endpoint_name(settings.openai_base_url), learn=settings.model_rps is None
    )
    model = ModelActivities(settings, blobs, Pacer(most=max_concurrent_activities, learnt=learnt))
    search = SearchActivities(settings)
    crawl = CrawlActivities(blobs, allow_private=settings.allow_private_urls, only=settings.crawl_only)
    code = SandboxActivities(sandbox, blobs)
    docs = LocalDocsActivities(settings.data_dir, shared_indexes())
    mcp_config = load_mcp_config(data_dir=settings.data_dir) if settings.mcp else None  # ConfigError: one line
    mcp = McpActivities(mcp_config, blobs)
    speech = SpeechActivities(settings, blobs)
    deck = DeckActivities(blobs)
    evidence = EvidenceActivities(blobs)
    grace = timedelta(seconds=graceful_shutdown_seconds)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[DeepResearch, Podcast, Slides, Prose, FollowUp, EvalSuite],
        activities=[
            model.chat,  # runs recorded before model calls had their own queue (workflows/rate_limits.py)
            search.web_search,
            crawl.crawl,
            RecheckActivities(crawl, blobs).recheck_page,
            code.run_python,
            code.close_sandbox,
            docs.index_resources,
            docs.local_search,
            mcp.list_tools,
            mcp.call_tool,
            speech.speak,
            speech.join_audio,
            deck.build_deck,
            EarlierRuns(client).prior_run,
            OwnerActivities(client, settings.user_limits).owner_usage,  # per-user limits (infra/user_limits.py)
            EvalActivities(blobs).score_task,
            evidence.rank_evidence,
            evidence.support_findings,
            evidence.join_evidence,
            evidence.evidence_text,
        ],
        max_cached_workflows=max_cached_workflows,
        max_concurrent_activities=max_concurrent_activities,
        max_task_queue_activities_per_second=max_activities_per_second,
        graceful_shutdown_timeout=grace,
        interceptors=interceptors,
    )
    one_batch(worker)
    models = model_worker(client, settings, task_queue, model, max_concurrent_activities, grace, interceptors)
    return Workers(worker, models, learnt=learnt), Held(sandbox, model.client, speech.client)


def one_batch(worker: Worker) -> None:
    """Each workflow activation's jobs applied together before any workflow
    code runs (the SDK's PROCESS_WORKFLOW_ACTIVATION_JOBS_AS_SINGLE_BATCH,
    off by default in temporalio 1.35). Without it an update runs before the
    activity results of its activation, and a worker replaying a run without
    its cache may get an update in an earlier activation than the one its
    history gives it: a review that came as a step's reading finished made
    the worker take the step's passages for unread while a replay found
    them read, and the run stopped on a nondeterminism error
    (docs/changing-workflows.md). The choice is recorded in each run's
    history, so runs recorded before replay as they were."""
    flags = getattr(_workflow_instance, "_WorkflowLogicFlag", None)
    flag = getattr(flags, "PROCESS_WORKFLOW_ACTIVATION_JOBS_AS_SINGLE_BATCH", None)
    enable = getattr(worker, "_set_default_workflow_logic_flag", None)
    if flag is None or enable is None:
        raise RuntimeError(
            "this temporalio has no single-batch activations (PROCESS_WORKFLOW_ACTIVATION_JOBS_AS_SINGLE_BATCH): "
            "install the version pyproject.toml names"
        )
    enable(flag, enabled=True)


def worker_options(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``build_worker`` options from the environment (unset: the defaults).

    DEEPRESEARCH_MAX_CONCURRENT_ACTIVITIES   activities one worker runs at once
    DEEPRESEARCH_ACTIVITIES_PER_SECOND       task-queue rate limit (all workers)
    DEEPRESEARCH_SHUTDOWN_GRACE_SECONDS      on SIGTERM, let running activities
                                             finish this long before cancelling
    """
    env = os.environ if env is None else env
    options: dict[str, Any] = {}
    value = (env.get("DEEPRESEARCH_MAX_CONCURRENT_ACTIVITIES") or "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ConfigError(f"DEEPRESEARCH_MAX_CONCURRENT_ACTIVITIES must be a whole number >= 1, got {value!r}")
        options["max_concurrent_activities"] = int(value)
    for name, key in (
        ("DEEPRESEARCH_ACTIVITIES_PER_SECOND", "max_activities_per_second"),
        ("DEEPRESEARCH_SHUTDOWN_GRACE_SECONDS", "graceful_shutdown_seconds"),
    ):
        value = (env.get(name) or "").strip()
        if not value:
            continue
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not number > 0 or number == float("inf"):
            raise ConfigError(f"{name} must be a positive number, got {value!r}")
        options[key] = number
    return options


async def run_worker(
    conn: Connection,
    settings: Settings,
    *,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[], None] = lambda: None,
    **options,
) -> None:
    """Run until ``stop`` is set or the task is cancelled; ``on_ready`` once
    it polls (a command says it serves only then). Options not given come
    from the environment (see ``worker_options``)."""
    settings.check()
    await check_model_endpoint(settings)
    private_dir(settings.data_dir)
    protect_secrets()  # the keys in this process's environment: not readable by its own user's processes
    options = worker_options() | options
    client = await connect(conn)
    worker, held = build_worker(client, settings, conn.task_queue, **options)
    try:
        if hasattr(held.sandbox, "isolation"):  # the local sandbox: say now if it will not run code
            await held.sandbox.isolation()
        async with worker:
            on_ready()
            await (stop.wait() if stop else asyncio.Future())
    finally:
        await held.close_all()


async def serve(conn: Connection, settings: Settings) -> None:
    """Run the worker until SIGTERM or SIGINT, then shut it down gracefully."""
    stop = asyncio.Event()
    with stop_on_signals(stop):
        await run_worker(conn, settings, stop=stop)


def model_pace(settings: Settings) -> str:
    rps = settings.model_rps
    if rps:
        return f"{rps:g} a second for the deployment"
    return "paced by what the provider's 429s teach (DEEPRESEARCH_MODEL_RPS unset)"


def main() -> None:
    worker_logging()  # a failed activity is one line; DEEPRESEARCH_LOG_TRACEBACKS=1 for the traceback
    try:
        conn = Connection.from_env()
        settings, local_line = asyncio.run(local_settings())
        if local_line:
            print(local_line, flush=True)
        print(
            f"worker on {conn.address} (namespace {conn.namespace}), task queue {conn.task_queue} "
            f"(model calls: {model_queue(conn.task_queue)}, {model_pace(settings)}); "
            f"large payloads: {payload_storage(conn.data_dir)}; "
            f"blobs: {blob_store(settings.data_dir).where}; "
            f"tracing: {'on' if tracing_enabled() else 'off'}",
            flush=True,
        )
        asyncio.run(serve(conn, settings))
        code = 0
    except (ConfigError, ConnectionFailed) as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        code = 2
    except KeyboardInterrupt:
        code = 0
    exit_now(code)


if __name__ == "__main__":
    main()
