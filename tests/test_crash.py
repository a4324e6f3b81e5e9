"""Crash tests: the real worker runs as a separate process (``python
worker.py``) and is killed with SIGKILL mid-run; a new worker process
finishes the run. Each run has its own scripted model, Tavily and page
servers, data dir, task queue and worker (``testkit/crash.py``), so
the scenarios of one test run side by side.

Every crashed run must complete with status "completed", its report must
hold the crawled fact and the computed value, and ``repeated_calls`` must
be empty: no model call, search or crawl whose activity had completed (per
the workflow history) reached the scripted servers again.

- ``test_kill_at_chosen_points``: during a model call (the researcher's
  second request is held open until the worker is dead), during a tool call
  (a page served slowly: the step's evidence crawl, before its researcher's
  first turn), while waiting for review, during the reporter call, and with a
  steer taken but not yet applied (the new worker applies it at the same turn).
- ``test_kill_at_random_points``: ``CRASH_RUNS`` runs (default 3), each
  killed at a random point: after the k-th model request (k in 1..7 of 8)
  plus a random 0-0.6 s, half of them with a human review by update. The
  seed is printed; set ``CRASH_SEED`` to repeat a sequence. The 20-run soak
  is ``python -m bench.crash_soak --runs 20`` (same code, with a summary).
- ``test_dev_server_restart_mid_run``: a dev server of its own (own db file
  and port) is stopped while a model call is in flight and started again on
  the same port and database; the run completes.

Recovery after a kill waits for the killed activity's heartbeat timeout
(10 s for model calls and tool calls, in ``workflows/activity_calls.py``), so each
crashed run takes ~20 s; the scenarios of a test run concurrently.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import ActivityType, Payload, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import (
    ActivityTaskCompletedEventAttributes,
    ActivityTaskScheduledEventAttributes,
    ActivityTaskStartedEventAttributes,
    HistoryEvent,
)
from temporalio.client import WorkflowHistory

from client.devserver import DevServer
from testkit.crash import (
    CrashRun,
    plan_random_kill,
    random_kill_run,
    repeated_calls,
)
from testkit.research_script import FACT
from testkit.runs import keep_history

# --- the repeat detector itself ---------------------------------------------------


def _at(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def _history(workflow_id: str, acts: list[tuple[str, str, dict, float, float | None]]) -> WorkflowHistory:
    """(activity id, name, input, scheduled at, completed at or None) -> history events."""
    events, next_id = [], 1
    for activity_id, name, arg, scheduled, completed in acts:
        payload = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(arg).encode())
        sched_id = next_id
        events.append(
            HistoryEvent(
                event_id=sched_id,
                event_time=_at(scheduled),
                event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
                activity_task_scheduled_event_attributes=ActivityTaskScheduledEventAttributes(
                    activity_id=activity_id,
                    activity_type=ActivityType(name=name),
                    input=Payloads(payloads=[payload]),
                ),
            )
        )
        next_id += 1
        if completed is not None:
            events.append(
                HistoryEvent(
                    event_id=next_id,
                    event_time=_at(completed),
                    event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
                    activity_task_started_event_attributes=ActivityTaskStartedEventAttributes(
                        scheduled_event_id=sched_id, attempt=1
                    ),
                )
            )
            events.append(
                HistoryEvent(
                    event_id=next_id + 1,
                    event_time=_at(completed),
                    event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
                    activity_task_completed_event_attributes=ActivityTaskCompletedEventAttributes(
                        scheduled_event_id=sched_id
                    ),
                )
            )
            next_id += 2
    return WorkflowHistory(workflow_id, events)


def test_repeated_calls_flags_work_done_again_after_its_activity_completed():
    wf = "wf-1"
    page = "http://127.0.0.1:9999/lighthouse"
    history = _history(
        wf,
        [
            ("1", "chat", {"role": "researcher"}, 10.0, 11.0),  # completed at 11
            ("2", "web_search", {"query": "lighthouse  fact"}, 12.0, 13.0),
            ("3", "crawl", {"url": page}, 14.0, 15.0),
            ("4", "chat", {"role": "reporter"}, 16.0, None),  # never completed (killed)
        ],
    )
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    other = {"model": "m", "messages": [{"role": "user", "content": "report"}]}

    def llm_req(activity_id, at, b):
        return {**b, "_role": "x", "_status": 200, "_request_id": f"{wf}/{activity_id}", "_time": at}

    clean_llm = [
        llm_req("1", 10.5, body),
        llm_req("4", 16.5, other),  # the killed attempt...
        llm_req("4", 30.0, other),  # ...and its retry: not a repeat
        {**llm_req("9", 12.0, body), "_request_id": "another-workflow/9"},  # other runs are ignored
    ]
    tavily = SimpleNamespace(requests=[{"query": "lighthouse fact", "_time": 12.5}])
    pages = SimpleNamespace(netloc="127.0.0.1:9999", timed_hits=[(14.5, "/lighthouse")])
    assert repeated_calls(history, SimpleNamespace(requests=clean_llm), tavily, pages) == []

    llm = SimpleNamespace(
        requests=clean_llm
        + [
            llm_req("1", 11.5, body),  # activity 1 sent again after it completed
            llm_req("4", 31.0, body),  # a new call identical to completed activity 1's
        ]
    )
    tavily.requests.append({"query": "lighthouse fact", "_time": 13.5})
    pages.timed_hits.append((15.5, "/lighthouse"))
    pages.timed_hits.append((14.9, "/other"))  # a page no crawl asked for: not a repeat
    found = repeated_calls(history, llm, tavily, pages)
    assert len(found) == 4, found
    assert "of activity 1 sent at 11.500, after the activity had completed at 11.000" in found[0]
    assert "activity 4 at 31.000 is identical to the call of activity 1" in found[1]
    assert found[2].startswith("search 'lighthouse fact' requested at 13.500")
    assert found[3].startswith("crawl '/lighthouse' requested at 15.500")

    # A second activity for the same query still in flight makes the request its own.
    busy = _history(
        wf,
        [
            ("2", "web_search", {"query": "lighthouse fact"}, 12.0, 13.0),
            ("5", "web_search", {"query": "lighthouse fact"}, 13.2, 14.0),
        ],
    )
    empty = SimpleNamespace(requests=[], netloc="", timed_hits=[])
    assert repeated_calls(busy, empty, tavily, empty) == []


# --- killing the worker -----------------------------------------------------------


async def _gather(scenarios: dict[str, object]) -> dict[str, object]:
    """Run named scenarios concurrently; fail with every scenario's error."""
    names = list(scenarios)
    results = await asyncio.gather(*scenarios.values(), return_exceptions=True)
    errors = [f"{n}: {type(r).__name__}: {r}" for n, r in zip(names, results) if isinstance(r, BaseException)]
    if errors:
        pytest.fail("\n".join(errors))
    return dict(zip(names, results))


async def _killed_in_model_call(address: str, folder: Path) -> str:
    async with CrashRun(address, folder, "model") as run:
        gate = run.gate("researcher", 2)  # after its web search, before the crawl
        handle = await run.start(auto_accept_plan=True)
        await gate.wait_reached()
        held = run.llm.calls("researcher")[1]["_request_id"]
        await run.restart_worker()
        gate.release()
        outcome = await run.finish(handle)
        assert outcome.problems() == []
        assert [r["_request_id"] for r in run.llm.requests].count(held) == 2  # the held call, retried once
        retried = [f"{a.name}#{a.activity_id}" for a in outcome.retried()]
        # (and the step's own reading beside the researcher's turns, when the kill caught it in flight)
        assert f"chat#{held.rsplit('/', 1)[1]}" in retried and len([a for a in retried if a.startswith("chat")]) == 1
        assert all(a.split("#")[0] in ("chat", "web_search", "crawl", "rank_evidence") for a in retried)
        # Live control: send a completed call again; the check must see it.
        done = run.llm.calls("coordinator")[0]
        async with httpx.AsyncClient() as http:
            await http.post(
                f"{run.llm.base_url}/chat/completions",
                json={k: v for k, v in done.items() if not k.startswith("_")},
                headers={"Authorization": f"Bearer {run.llm.api_key}", "X-Client-Request-Id": done["_request_id"]},
            )
        again = repeated_calls(outcome.history, run.llm, run.tavily, run.pages)
        assert len(again) == 1 and "(coordinator) of activity 1 sent at" in again[0], again
    return f"recovered in {run.recoveries[0]:.1f} s"


async def _killed_in_tool_call(address: str, folder: Path) -> str:
    async with CrashRun(address, folder, "tool", page_delay=2.0) as run:
        handle = await run.start(auto_accept_plan=True)
        async with asyncio.timeout(60):
            while not run.pages.hits:
                await asyncio.sleep(0.02)
        await run.restart_worker()  # killed mid-gathering: the step's evidence crawl; the page is still being served
        outcome = await run.finish(handle)
        await keep_history(handle, "crash_recovery")
    assert outcome.problems() == []
    assert list(run.pages.hits) == ["/lighthouse", "/lighthouse"]  # the killed crawl, retried once
    # (the researcher's first turn runs beside the gathering: if it was in flight too, it is retried too)
    assert sorted(a.name for a in outcome.retried()) in (["crawl"], ["chat", "crawl"])
    last = run.llm.calls("researcher")[-1]["messages"]
    assert any(FACT in (m.get("content") or "") for m in last)  # the evidence, read once
    return f"recovered in {run.recoveries[0]:.1f} s"


async def _killed_while_awaiting_review(address: str, folder: Path) -> str:
    async with CrashRun(address, folder, "review") as run:
        handle = await run.start()
        await run.wait_for_phase(handle, "awaiting_review")
        calls_before = len(run.llm.requests)
        await run.restart_worker()
        began = time.monotonic()
        reply = await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)
        review_took = time.monotonic() - began
        assert reply == "plan accepted"
        outcome = await run.finish(handle)
    assert outcome.problems() == []
    assert calls_before == 2 and len(run.llm.calls("planner")) == 1  # nothing before the review ran again
    # What the review's wait was used for: the step's reading, which a kill may catch in flight.
    assert {a.name for a in outcome.retried()} <= {"web_search", "crawl", "rank_evidence"}
    return f"review accepted {review_took:.1f} s after the restart"


async def _killed_in_report(address: str, folder: Path) -> str:
    async with CrashRun(address, folder, "report") as run:
        gate = run.gate("reporter", 1)
        handle = await run.start(auto_accept_plan=True)
        await gate.wait_reached()
        await run.restart_worker()
        gate.release()
        outcome = await run.finish(handle)
    assert outcome.problems() == []
    reporter = run.llm.calls("reporter")
    assert len(reporter) == 2 and reporter[0]["_request_id"] == reporter[1]["_request_id"]
    assert [a.name for a in outcome.retried()] == ["chat"]
    return f"recovered in {run.recoveries[0]:.1f} s"


async def _killed_between_taking_and_applying_a_steer(address: str, folder: Path) -> str:
    async with CrashRun(address, folder, "steer") as run:
        gate = run.gate("researcher", 2)
        handle = await run.start(auto_accept_plan=True)
        await gate.wait_reached()
        reply = await handle.execute_update("steer", {"note": "only EU sources"}, result_type=dict)
        assert reply["accepted"] and reply["applies_at"] == "next_turn"
        await run.restart_worker()  # the steer is taken (in the history), not yet applied
        gate.release()
        outcome = await run.finish(handle)
    assert outcome.problems() == []
    told = ["only EU sources" in json.dumps(r["messages"]) for r in run.llm.calls("researcher")]
    assert told == [False, False, False, True]  # turns 1 and 2 (and 2's retry) before it, turn 3 told
    assert outcome.result.steers[0].applied_where == "researcher · step 1, turn 3"
    return f"recovered in {run.recoveries[0]:.1f} s, the steer applied at turn 3"


async def test_kill_at_chosen_points(dev_server, tmp_path):
    began = time.monotonic()
    results = await _gather(
        {
            "model call": _killed_in_model_call(dev_server.address, tmp_path / "model"),
            "tool call": _killed_in_tool_call(dev_server.address, tmp_path / "tool"),
            "awaiting review": _killed_while_awaiting_review(dev_server.address, tmp_path / "review"),
            "reporter call": _killed_in_report(dev_server.address, tmp_path / "report"),
            "steer taken, not applied": _killed_between_taking_and_applying_a_steer(
                dev_server.address, tmp_path / "steer"
            ),
        }
    )
    for name, note in results.items():
        print(f"killed during {name}: completed, 0 repeats, {note}")
    print(f"{len(results)} kill points in {time.monotonic() - began:.1f} s")


async def test_kill_at_random_points(dev_server, tmp_path):
    runs = int(os.environ.get("CRASH_RUNS", "3"))
    seed = int(os.environ.get("CRASH_SEED") or random.SystemRandom().randrange(1, 10**6))
    print(f"random kill points: {runs} runs, seed {seed} (CRASH_SEED={seed} repeats them)")
    rng = random.Random(seed)
    plans = [plan_random_kill(rng, i + 1) for i in range(runs)]
    limit = asyncio.Semaphore(4)

    async def one(plan):
        async with limit:
            return await random_kill_run(dev_server.address, tmp_path / f"run{plan.index}", plan)

    began = time.monotonic()
    done = await _gather({f"run {p.index} (seed {seed})": one(p) for p in plans})
    for plan in done.values():
        print(plan.line())
    print(f"{runs} runs in {time.monotonic() - began:.1f} s")
    failed = [p.line() for p in done.values() if p.problems]
    assert not failed, f"seed {seed}:\n" + "\n".join(failed)


@pytest.fixture
def own_server(tmp_path):
    """A dev server of this test's own (not the session's), to stop and restart."""
    folder = tmp_path / "own-temporal"
    server = DevServer(db_file=folder / "temporal.db", log_file=folder / "server.log")
    server.start()
    yield server
    server.stop()


async def test_dev_server_restart_mid_run(own_server, tmp_path):
    async with CrashRun(own_server.address, tmp_path / "restart", "restart") as run:
        gate = run.gate("researcher", 2)
        handle = await run.start(auto_accept_plan=True)
        await gate.wait_reached()
        own_server.stop()  # SIGTERM to the server, mid-call
        await asyncio.sleep(1.0)
        gate.release()  # the model answers while the server is down
        await asyncio.sleep(1.0)
        own_server.start()  # same port, same database file
        outcome = await run.finish(handle, timeout=120)
        assert run.worker.alive(), "the worker died while the server was down"
    assert outcome.problems() == []
    assert run.worker.starts == 1  # one worker process throughout
