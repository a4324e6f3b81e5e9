"""Crash-test machinery: scripted servers that timestamp what they receive, a
gate that holds a model call open until the test has killed the worker, the
repeated-work check, and ``CrashRun`` (one research run with its own servers,
data dir and worker process).

Repeated work, defined strictly: a request that reaches a scripted server
counts as *repeated* when the workflow history shows that an activity doing
that same call had already COMPLETED before the request arrived (and, for
tools, that no activity doing that call was still in flight). Retries of an
activity that never completed (the worker died mid-call) are not repeats:
they are the point of durability. See ``repeated_calls``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle, WorkflowHistory

from client.runs import start_research
from infra.connection import Connection
from infra.temporal import connect
from testkit.llm_server import ScriptedLLM, role_of
from testkit.pages import PageServer, article
from testkit.research_script import EXPECTED_SUM, ResearchScript
from testkit.search_server import ScriptedTavily
from testkit.worker_process import WorkerProcess
from workflows.models import ResearchInput, ResearchResult, RunStatus

FACT = "FACT: the Lantern Rock lighthouse keeper logged 4417 ships in 1911"
COMPUTED = f"SUM_OF_SQUARES={EXPECTED_SUM}"
QUESTION = "Tell me about Lantern Rock"

# --- servers that remember when each request arrived --------------------------


class RecordingLLM(ScriptedLLM):
    """ScriptedLLM whose records also carry ``_request_id`` (the
    X-Client-Request-Id header: ``<workflow_id>/<activity_id>``) and ``_time``
    (arrival, epoch seconds)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._local = threading.local()

    def _respond(self, path: str, headers, raw: bytes, method: str = "POST"):
        self._local.headers = headers
        return super()._respond(path, headers, raw, method)

    def _record(self, body: dict) -> dict:
        headers = getattr(self._local, "headers", None)
        request_id = headers.get("X-Client-Request-Id") if headers is not None else None
        return {**super()._record(body), "_request_id": request_id, "_time": time.time()}


class TimedTavily(ScriptedTavily):
    def _record(self, body: dict) -> dict:
        return {**super()._record(body), "_time": time.time()}


class _TimedHits(list):
    """``PageServer.hits`` that also keeps each hit's arrival time."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, path: str) -> None:  # called under the server's lock
        self.times.append(time.time())
        super().append(path)


class TimedPageServer(PageServer):
    def __init__(self) -> None:
        super().__init__()
        self.hits = _TimedHits()
        self.netloc = ""

    def start(self) -> TimedPageServer:
        super().start()
        self.netloc = urlsplit(self.url("/")).netloc
        return self

    @property
    def timed_hits(self) -> list[tuple[float, str]]:
        with self._lock:
            return list(zip(self.hits.times, self.hits))


class Gate:
    """Wraps a model handler: the ``n``-th request (1-based) of ``role`` is
    held until ``release()`` (then answered normally, if anyone is still
    listening). Later requests, e.g. the retry, pass straight through."""

    def __init__(self, handler: Callable[[dict], Any], role: str, n: int = 1, hold: float = 120.0) -> None:
        self.handler, self.role, self.n, self.hold = handler, role, n, hold
        self.seen = 0
        self.reached = threading.Event()
        self._released = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, request: dict) -> Any:
        if role_of(request) == self.role:
            with self._lock:
                self.seen += 1
                mine = self.seen == self.n
            if mine:
                self.reached.set()
                self._released.wait(self.hold)
        return self.handler(request)

    def release(self) -> None:
        self._released.set()

    async def wait_reached(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.reached.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {self.role} request #{self.n} within {timeout} s")
            await asyncio.sleep(0.02)


# --- the repeated-work check ----------------------------------------------------


@dataclass
class Activity:
    activity_id: str
    name: str
    input: Any  # first argument, decoded from JSON (None when not JSON)
    scheduled_at: float
    completed_at: float | None = None
    attempts: int = 0  # attempt number of the ActivityTaskStarted event (the last attempt)


def _seconds(timestamp) -> float:
    return timestamp.seconds + timestamp.nanos / 1e9


def _decode(payloads) -> Any:
    if not payloads.payloads:
        return None
    try:
        return json.loads(payloads.payloads[0].data)
    except ValueError:
        return None


def activities(history: WorkflowHistory) -> list[Activity]:
    """Every activity of the history, with when it was scheduled and completed."""
    by_event: dict[int, Activity] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            by_event[event.event_id] = Activity(
                attrs.activity_id, attrs.activity_type.name, _decode(attrs.input), _seconds(event.event_time)
            )
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = event.activity_task_started_event_attributes
            by_event[attrs.scheduled_event_id].attempts = attrs.attempt
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            by_event[attrs.scheduled_event_id].completed_at = _seconds(event.event_time)
    return list(by_event.values())


def _body_key(record: dict) -> str:
    return json.dumps({k: v for k, v in record.items() if not k.startswith("_")}, sort_keys=True)


def _tool_repeats(
    kind: str, requests: Iterable[tuple[float, str]], done: list[Activity], key: Callable[[Activity], str | None]
) -> list[str]:
    """A tool request for ``k`` at ``t`` repeats work when an activity for
    ``k`` had completed before ``t`` and none for ``k`` was still in flight
    at ``t`` (scheduled before ``t``, not completed before ``t``)."""
    found = []
    for t, k in requests:
        same = [a for a in done if key(a) == k]
        completed = [a for a in same if a.completed_at is not None and a.completed_at < t]
        in_flight = [a for a in same if a.scheduled_at <= t and (a.completed_at is None or a.completed_at >= t)]
        if completed and not in_flight:
            first = min(a.completed_at for a in completed)
            found.append(
                f"{kind} {k!r} requested at {t:.3f}, after activity {completed[0].activity_id} "
                f"had completed at {first:.3f} ({t - first:.3f} s earlier)"
            )
    return found


def repeated_calls(history: WorkflowHistory, llm, tavily, pages) -> list[str]:
    """Model calls, searches and crawls the scripted servers received again
    after the activity that made them had completed (empty list: none).

    - model: each request names its activity (X-Client-Request-Id); it is a
      repeat when that activity had completed before the request arrived, or
      when its body is identical to the request of another activity that had
      completed before it arrived;
    - search: Tavily requests by query vs completed ``web_search`` activities
      by (whitespace-normalised) query;
    - crawl: page-server hits by path vs completed ``crawl`` activities by URL.

    ``llm.requests`` need ``_request_id`` and ``_time`` (``RecordingLLM``),
    ``tavily.requests`` ``query`` and ``_time`` (``TimedTavily``), ``pages``
    ``timed_hits`` and ``netloc`` (``TimedPageServer``). Clocks: the server's
    event times and the test's ``time.time()`` on the same machine.
    """
    acts = activities(history)
    by_id = {a.activity_id: a for a in acts}
    workflow_id = history.workflow_id
    repeats: list[str] = []

    # Model calls: the request's own activity, then identical bodies.
    mine = [r for r in llm.requests if (r.get("_request_id") or "").rsplit("/", 1)[0] == workflow_id]
    body_done: dict[str, tuple[str, float]] = {}  # body -> (activity id, earliest completion)
    for r in mine:
        a = by_id.get(r["_request_id"].rsplit("/", 1)[1])
        if a and a.completed_at is not None:
            key = _body_key(r)
            if key not in body_done or a.completed_at < body_done[key][1]:
                body_done[key] = (a.activity_id, a.completed_at)
    for r in sorted(mine, key=lambda r: r["_time"]):
        activity_id = r["_request_id"].rsplit("/", 1)[1]
        a = by_id.get(activity_id)
        role = r.get("_role", "?")
        if a is None:
            repeats.append(f"model call ({role}) from activity {activity_id}, which is not in the history")
        elif a.completed_at is not None and a.completed_at < r["_time"]:
            repeats.append(
                f"model call ({role}) of activity {activity_id} sent at {r['_time']:.3f}, "
                f"after the activity had completed at {a.completed_at:.3f}"
            )
        elif (other := body_done.get(_body_key(r))) and other[0] != activity_id and other[1] < r["_time"]:
            repeats.append(
                f"model call ({role}) of activity {activity_id} at {r['_time']:.3f} is identical to "
                f"the call of activity {other[0]}, completed at {other[1]:.3f}"
            )

    # Searches by query, crawls by URL.
    norm = lambda q: " ".join(str(q).split())  # noqa: E731  (as the web_search activity does)
    searches = [a for a in acts if a.name == "web_search"]
    repeats += _tool_repeats(
        "search",
        [(r["_time"], norm(r["query"])) for r in tavily.requests],
        searches,
        lambda a: norm(a.input.get("query", "")) if isinstance(a.input, dict) else None,
    )

    def crawl_path(a: Activity) -> str | None:
        url = a.input.get("url") if isinstance(a.input, dict) else None
        if not url:
            return None
        parts = urlsplit(url)
        if parts.netloc != pages.netloc:
            return None
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    crawls = [a for a in acts if a.name == "crawl"]
    repeats += _tool_repeats("crawl", list(pages.timed_hits), crawls, crawl_path)
    return repeats


def unattributed_calls(history: WorkflowHistory, llm, tavily, pages) -> list[str]:
    """Requests no activity of this run accounts for: without attribution
    ``repeated_calls`` would be blind to them, so a run must have none."""
    acts = activities(history)
    ids = {f"{history.workflow_id}/{a.activity_id}" for a in acts if a.name == "chat"}
    queries = {" ".join(a.input["query"].split()) for a in acts if a.name == "web_search" and isinstance(a.input, dict)}
    urls = {a.input["url"] for a in acts if a.name == "crawl" and isinstance(a.input, dict)}
    found = [
        f"model call ({r.get('_role')}) with request id {r.get('_request_id')!r}"
        for r in llm.requests
        if r.get("_request_id") not in ids
    ]
    found += [f"search {r['query']!r}" for r in tavily.requests if " ".join(r["query"].split()) not in queries]
    found += [f"page {path!r}" for _, path in pages.timed_hits if f"http://{pages.netloc}{path}" not in urls]
    return found


# --- one research run with its own servers and worker process ------------------


def worker_env(base: dict[str, str], *, llm, tavily, data_dir: Path, address: str, task_queue: str) -> dict[str, str]:
    return base | {
        "OPENAI_API_KEY": llm.api_key,
        "OPENAI_BASE_URL": llm.base_url,
        "TAVILY_API_KEY": tavily.api_key,
        "TAVILY_BASE_URL": tavily.base_url,
        "DEEPRESEARCH_DATA_DIR": str(data_dir),
        "DEEPRESEARCH_ALLOW_PRIVATE_URLS": "1",
        "TEMPORAL_ADDRESS": address,
        "DEEPRESEARCH_TASK_QUEUE": task_queue,
        "DEEPRESEARCH_MODEL": "scripted-model",
    }


class CrashRun:
    """One research run: scripted model (playing every role), Tavily and page
    servers, a data dir, a client and the real worker as a process.

        async with CrashRun(address, folder, "name") as run:
            handle = await run.start()
            ... await run.restart_worker() ...
            result = await run.finish(handle)      # waits; checks repeats
    """

    def __init__(
        self,
        address: str,
        folder: Path,
        name: str,
        *,
        llm_latency: float = 0.3,
        page_delay: float = 0.0,
        env: dict[str, str] | None = None,
    ) -> None:
        import os

        self.address, self.folder, self.name = address, Path(folder), name
        self.llm, self.tavily, self.pages = RecordingLLM(), TimedTavily(), TimedPageServer()
        self.script = ResearchScript()
        self.llm.handler = self.script
        self.llm.latency = llm_latency
        self.page_delay = page_delay
        self.task_queue = f"crash-{name}-{uuid.uuid4().hex[:8]}"
        self.data_dir = self.folder / "data"
        self.base_env = dict(os.environ if env is None else env)
        self.client: Client | None = None
        self.worker: WorkerProcess | None = None
        self.kill_times: list[float] = []
        self.recoveries: list[float] = []  # seconds from each kill to the run's next completed activity

    def gate(self, role: str, n: int = 1) -> Gate:
        gate = Gate(self.llm.handler, role, n)
        self.llm.handler = gate
        return gate

    async def __aenter__(self) -> CrashRun:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.llm.start(), self.tavily.start(), self.pages.start()
        self.pages.add(
            "/lighthouse",
            article("Lantern Rock history", ["Some history first.", FACT + ".", "More text."]),
            delay=self.page_delay,
        )
        url = self.pages.url("/lighthouse")
        self.tavily.handler = lambda query, n: [
            {"title": "Lantern Rock history", "url": url, "content": "A lighthouse.", "score": 0.9}
        ]
        env = worker_env(
            self.base_env,
            llm=self.llm,
            tavily=self.tavily,
            data_dir=self.data_dir,
            address=self.address,
            task_queue=self.task_queue,
        )
        self.client = await connect(Connection(address=self.address, data_dir=self.data_dir))
        self.worker = WorkerProcess(env, self.folder / "worker.log")
        self.worker.start()
        await self.worker.ready(self.client)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.worker:
            self.worker.stop()
        self.llm.stop(), self.tavily.stop(), self.pages.stop()

    async def start(self, question: str = QUESTION, **options: Any) -> WorkflowHandle:
        conn = Connection(address=self.address, task_queue=self.task_queue, data_dir=self.data_dir)
        request = ResearchInput(question=question, **options)
        return await start_research(self.client, conn, request, f"{self.task_queue}-run")

    def kill_worker(self) -> None:
        self.kill_times.append(time.time())
        self.worker.kill()

    async def restart_worker(self) -> None:
        self.kill_worker()
        self.worker.start()
        await self.worker.ready(self.client)

    async def status(self, handle: WorkflowHandle) -> RunStatus:
        return await handle.query("status", result_type=RunStatus)

    async def wait_for_phase(self, handle: WorkflowHandle, phase: str, timeout: float = 60.0) -> RunStatus:
        async with asyncio.timeout(timeout):
            while True:
                try:
                    status = await self.status(handle)
                    if status.phase == phase:
                        return status
                except Exception:  # no worker to answer the query right now
                    pass
                await asyncio.sleep(0.1)

    async def is_running(self, handle: WorkflowHandle) -> bool:
        return (await handle.describe()).status == WorkflowExecutionStatus.RUNNING

    async def finish(self, handle: WorkflowHandle, timeout: float = 240.0) -> RunOutcome:
        async with asyncio.timeout(timeout):
            result: ResearchResult = await handle.result()
        history = await handle.fetch_history()
        acts = activities(history)
        for killed in self.kill_times:
            later = [a.completed_at for a in acts if a.completed_at and a.completed_at > killed]
            if later:
                self.recoveries.append(min(later) - killed)
        servers = (self.llm, self.tavily, self.pages)
        return RunOutcome(
            result, history, repeated_calls(history, *servers), acts, unattributed_calls(history, *servers)
        )


@dataclass
class RunOutcome:
    result: ResearchResult
    history: WorkflowHistory
    repeats: list[str]
    activities: list[Activity]
    unattributed: list[str]

    def problems(self) -> list[str]:
        """Everything wrong with a crashed-and-recovered run (empty: all good)."""
        found = []
        r = self.result
        if r.status != "completed":
            found.append(f"status {r.status!r}: {r.final_report[:300]}")
        if FACT not in r.final_report:
            found.append("the crawled fact is not in the report")
        if COMPUTED not in r.final_report:
            found.append(f"the computed value is not in the report; the findings: {r.observations!r:.600}")
        found += [f"not made by any activity of the run: {x}" for x in self.unattributed]
        return found + [f"repeated: {x}" for x in self.repeats]

    def retried(self) -> list[Activity]:
        """Activities that needed more than one attempt (the calls a kill interrupted)."""
        return [a for a in self.activities if a.attempts > 1]


# --- a run killed at a random point ----------------------------------------------

MODEL_CALLS_PER_RUN = 8  # coordinator, planner, researcher x3, coder x2, reporter


@dataclass
class RandomKill:
    index: int
    after_request: int  # the kill comes this many model requests into the run...
    delay: float  # ...plus this many seconds
    review: bool  # the plan waits for a human review (sent by update) instead of auto-accept
    seconds: float = 0.0  # wall time of the whole run
    killed_at: float = 0.0  # seconds after the start
    killed_during: str = ""  # the calls in flight at the kill, per the history
    problems: list[str] | None = None
    retried: list[str] | None = None

    def line(self) -> str:
        mode = "review" if self.review else "auto-accept"
        state = "ok" if not self.problems else "FAILED: " + "; ".join(self.problems)
        return (
            f"run {self.index:2d}: kill {self.killed_at:5.2f} s in (after model request {self.after_request} "
            f"+ {self.delay:.2f} s, {mode}), in flight: {self.killed_during or 'none'}; "
            f"retried: {', '.join(self.retried or []) or 'none'}; {self.seconds:5.1f} s; {state}"
        )


def plan_random_kill(rng, index: int) -> RandomKill:
    # The kill lands before the run ends: at most the reporter's request plus
    # less than one model latency (0.3 s), so the reporter is still in flight.
    return RandomKill(
        index=index,
        after_request=rng.randint(1, MODEL_CALLS_PER_RUN),
        delay=round(rng.uniform(0.0, 0.25), 3),
        review=rng.random() < 0.5,
    )


async def _review_when_asked(run: CrashRun, handle: WorkflowHandle) -> None:
    """Accept the plan once it waits for review, whatever the worker is doing."""
    await run.wait_for_phase(handle, "awaiting_review", timeout=240)
    while True:
        try:
            await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)
            return
        except Exception:
            if not await run.is_running(handle):
                return
            await asyncio.sleep(0.2)


async def random_kill_run(
    address: str, folder: Path, plan: RandomKill, env: dict[str, str] | None = None
) -> RandomKill:
    """One full run whose worker is SIGKILLed per ``plan``, then replaced."""
    async with CrashRun(address, folder, f"random{plan.index}", env=env) as run:
        began = time.time()
        handle = await run.start(auto_accept_plan=not plan.review)
        reviewer = asyncio.create_task(_review_when_asked(run, handle)) if plan.review else None
        try:
            async with asyncio.timeout(120):
                while len(run.llm.requests) < plan.after_request:
                    await asyncio.sleep(0.01)
            await asyncio.sleep(plan.delay)
            run.kill_worker()
            plan.killed_at = time.time() - began
            problems = []
            if not await run.is_running(handle):
                problems.append("the run had already ended when the worker was killed")
            run.worker.start()
            await run.worker.ready(run.client)
            outcome = await run.finish(handle)
            if reviewer:
                await asyncio.wait_for(reviewer, 30)
        finally:
            if reviewer and not reviewer.done():
                reviewer.cancel()
        killed = run.kill_times[0]
        plan.killed_during = ", ".join(
            f"{a.name}#{a.activity_id}"
            for a in outcome.activities
            if a.scheduled_at <= killed and (a.completed_at is None or a.completed_at > killed)
        )
        plan.retried = [f"{a.name}#{a.activity_id} x{a.attempts}" for a in outcome.retried()]
        plan.problems = problems + outcome.problems()
        plan.seconds = time.time() - began
        return plan
