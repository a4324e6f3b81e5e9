"""Many runs on one provider account: the scripted model server enforces an
account-wide request limit over every model (``testkit/account_limit.py``:
a token bucket, HTTP 429 with ``Retry-After`` beyond it), and more runs start
at once than the limit serves. Real dev server, real workers (in process, or
``python worker.py`` processes), real ``openai`` client.

Each run makes few model calls (a greeting: the coordinator's one; a
question planned as one research step whose researcher answers at once,
reading nothing: coordinator, planner, researcher, reporter), so the limit,
not the work, sets the pace. No timing is asserted:
counts of 429s against served requests are (pace is in bench/, benchmark 8).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from client.runs import start_research
from infra.connection import Connection
from testkit.account_limit import AccountLimit
from testkit.crash import CrashRun, repeated_calls, unattributed_calls
from testkit.llm_server import Reply
from testkit.runs import keep_history, polled, start
from testkit.worker_process import WorkerProcess
from workflows.models import ResearchInput, ResearchResult, RunStatus
from workflows.rate_limits import model_queue

QUESTION = "Tell me about Lantern Rock"
CLI = Path(sys.executable).parent / "deepresearch"


SHORT = dict(auto_accept_plan=True, enable_background_investigation=False, evidence_pages=0)
CALLS_PER_SHORT_RUN = 4


def short_runs(script) -> None:
    """Coordinator, planner (one research step), researcher (answers at
    once), reporter: with ``SHORT``'s options nothing is searched or read."""
    script.steps = [("Find the lighthouse fact", "research")]
    script.researcher = lambda request: "## Findings\n- Nothing was looked up for this test."


def counts(llm) -> tuple[int, int]:
    """(requests served, requests refused with 429) by the scripted provider."""
    statuses = [r["_status"] for r in llm.requests]
    return statuses.count(200), statuses.count(429)


async def finish(handles: list[WorkflowHandle], timeout: float) -> list[ResearchResult]:
    async with asyncio.timeout(timeout):
        return list(await asyncio.gather(*(h.result() for h in handles)))


async def test_30_runs_on_a_1_request_a_second_account_all_complete(
    temporal_client, task_queue, research_worker, llm, script
):
    """Nothing configured (no DEEPRESEARCH_MODEL_RPS): every run still
    completes, each refused request is one wait in its run's usage, waits
    cost no tokens, and the worker backs off."""
    llm.account = AccountLimit(rate=1.0)
    async with research_worker():
        handles = [await start(temporal_client, task_queue, "Hello there!") for _ in range(30)]
        results = await finish(handles, 240)

    assert [r.status for r in results] == ["answered_directly"] * 30
    served, limited = counts(llm)
    assert limited > 0, "the provider never refused a request: the test proved nothing"
    assert served == 30 == sum(r.usage.llm_calls for r in results)  # one served call per run, none repeated
    assert sum(r.usage.rate_limited for r in results) == limited
    # The worker backs off on 429s (activities/pacing.py): without it, each
    # waiting run came back on its own and the provider refused ten requests
    # for each one it served.
    assert limited <= 4 * served, f"{limited} 429s for {served} served requests"
    waited = [r for r in results if r.usage.rate_limited]
    assert all(r.usage.rate_limited_seconds > 0 for r in waited)
    # Tokens are what the served requests counted (the scripted server's
    # count): a refused request costs none.
    served_tokens = sum(len(json.dumps(r["messages"])) // 4 for r in llm.requests if r["_status"] == 200)
    assert sum(r.usage.prompt_tokens for r in results) == served_tokens


async def test_20_runs_at_5_requests_a_second_see_few_rate_limits(
    temporal_client, task_queue, research_worker, llm, script
):
    """With the deployment's pace set to the account's limit, the fleet
    keeps to it: at most one 429 per four served requests."""
    short_runs(script)
    llm.account = AccountLimit(rate=5.0)
    async with research_worker(DEEPRESEARCH_MODEL_RPS="5"):
        handles = [await start(temporal_client, task_queue, QUESTION, **SHORT) for _ in range(20)]
        results = await finish(handles, 180)

    assert [r.status for r in results] == ["completed"] * 20
    served, limited = counts(llm)
    print(f"20 runs at 5 requests/s: {served} served, {limited} refused")
    assert served == 20 * CALLS_PER_SHORT_RUN == sum(r.usage.llm_calls for r in results)
    assert limited * 4 <= served, f"{limited} 429s for {served} served requests"
    assert sum(r.usage.rate_limited for r in results) == limited


async def test_the_pace_one_fleet_learnt_is_kept_for_the_next_runs_and_workers(
    temporal_client, task_queue, research_worker, llm, script
):
    """Issue 36: nothing configured (no DEEPRESEARCH_MODEL_RPS). A first fleet
    of runs started at once on a 2-requests-a-second account learns the pace
    from its 429s, and the Temporal server keeps it as the model queue's rate
    limit (activities/learnt_pace.py); a second fleet, on a new worker, keeps
    to it from its first call: at most one 429 per four served requests
    (without the learnt pace: about one per served request)."""
    short_runs(script)
    llm.account = AccountLimit(rate=2.0)

    async def fleet() -> list[ResearchResult]:
        handles = await asyncio.gather(*(start(temporal_client, task_queue, QUESTION, **SHORT) for _ in range(12)))
        return await finish(list(handles), 180)

    async with research_worker():
        assert [r.status for r in await fleet()] == ["completed"] * 12
    first_served, first_limited = counts(llm)
    learnt = await _model_queue_limit(temporal_client, task_queue)
    print(f"first fleet: {first_served} served, {first_limited} refused; learnt {learnt}")
    assert first_limited > 0, "the provider never refused a request: the test proved nothing"
    assert learnt is not None and 0 < learnt < 2 * 2.0, learnt  # about the account's rate (probing: a little above)
    async with research_worker():  # a new worker, new runs
        results = await fleet()
    served, limited = (now - before for now, before in zip(counts(llm), (first_served, first_limited), strict=True))
    print(f"next fleet: {served} served, {limited} refused")
    assert [r.status for r in results] == ["completed"] * 12
    assert served == 12 * CALLS_PER_SHORT_RUN
    assert limited * 4 <= served, f"{limited} 429s for {served} served requests"


async def _model_queue_limit(client: Client, task_queue: str) -> float | None:
    """The model queue's rate limit set through Temporal's API, if any."""
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=model_queue(task_queue)),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            report_config=True,
        )
    )
    limit = described.config.queue_rate_limit
    return limit.rate_limit.requests_per_second if limit.HasField("rate_limit") else None


async def test_a_waiting_run_says_so_in_its_status(temporal_client, task_queue, worker, worker_env, llm, script):
    """While a model call waits on the provider's limit, the status query and
    `deepresearch status` say since when."""
    llm.fail_next(1, 429, retry_after=30)
    handle = await start(temporal_client, task_queue, "Hello there!")
    async with asyncio.timeout(30):
        while (status := await handle.query("status", result_type=RunStatus)).rate_limited_since is None:
            await asyncio.sleep(0.1)
    assert status.phase == "coordinating" and status.usage.rate_limited == 1
    described = await handle.describe()
    assert datetime.fromisoformat(status.rate_limited_since) >= described.start_time.replace(microsecond=0)
    proc = await asyncio.create_subprocess_exec(
        str(CLI), "status", handle.id, env=worker_env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert "waiting on the model provider's rate limit since " in out.decode()
    assert "1 wait on the provider's rate limit" in out.decode()
    await handle.terminate()


async def cli(env: dict[str, str], *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(CLI), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_a_second_cancel_ends_a_run_whose_every_model_call_is_refused(
    temporal_client, task_queue, worker, worker_env, llm, script
):
    """Issue 36: the provider refuses every request. `cancel` moves the run
    to its partial report, whose model call waits on the same limit (within
    the cancel's grace: workflows/cancelling.py); `cancel` again ends it at
    once, its findings and sources the report."""
    llm.handler = lambda request: Reply(status=429, headers={"Retry-After": "2"}, content="slow down")
    handle = await start(temporal_client, task_queue, QUESTION)
    status = lambda: handle.query("status", result_type=RunStatus)  # noqa: E731
    assert (await polled(status, lambda s: s.rate_limited_since is not None, 60)).rate_limited_since
    assert "cancel requested for" in await cli(worker_env, "cancel", handle.id)
    waiting = await polled(
        status, lambda s: bool(s.phase == "reporting" and s.rate_limited_since and llm.calls("reporter")), 60
    )
    assert waiting.phase == "reporting" and llm.calls("reporter"), "the partial report never asked the model"
    assert waiting.rate_limited_since, "the partial report is not waiting on the provider's limit"
    assert "cancelled again" in await cli(worker_env, "cancel", handle.id)
    async with asyncio.timeout(90):
        result = await handle.result()
    assert result.status == "cancelled"
    # Ended by the second cancel, not by the grace's end (2 minutes after the first).
    assert "the run was cancelled again while its partial report was being written" in result.final_report
    assert (await status()).phase == "cancelled"
    assert "already ended (cancelled)" in (await _cli_fails(worker_env, "cancel", handle.id))
    await keep_history(handle, "cancelled_again")  # waits that back off, a report cut short


async def _cli_fails(env: dict[str, str], *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(CLI), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode != 0
    return err.decode()


async def test_a_wait_the_runs_deadline_cuts_short_fails_it_at_once_saying_why(
    temporal_client, task_queue, worker, llm, script
):
    """A run with an execution timeout does not sit out a wait that would
    end after it: it fails at once with the provider's reason, not later
    with a bare timeout."""
    llm.fail_next(1, 429, retry_after=600)
    handle = await temporal_client.start_workflow(
        "DeepResearch",
        ResearchInput(question="Hello there!"),
        id=f"deadline-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        execution_timeout=timedelta(seconds=60),
    )
    with pytest.raises(WorkflowFailureError) as failed:
        async with asyncio.timeout(45):
            await handle.result()
    assert "rate limited by the model provider (HTTP 429)" in str(failed.value.cause)


def _model_workers(history) -> set[str]:
    """The identities of the workers that ran the history's model calls."""
    scheduled = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "chat"
    }
    return {
        e.activity_task_started_event_attributes.identity
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    }


async def _start_many(client: Client, address: str, task_queue: str, data_dir: Path, n: int) -> list[WorkflowHandle]:
    conn = Connection(address=address, task_queue=task_queue, data_dir=data_dir)
    request = ResearchInput(question=QUESTION, **SHORT)
    return [await start_research(client, conn, request, f"{task_queue}-{i}-{uuid.uuid4().hex[:6]}") for i in range(n)]


async def test_two_worker_processes_share_one_limit(dev_server, tmp_path):
    """Two `python worker.py` processes with DEEPRESEARCH_MODEL_RPS=3 on a
    3-requests-a-second account: both run model calls, and together they
    keep to the one limit (a limit of their own each would offer twice)."""
    async with CrashRun(dev_server.address, tmp_path / "a", "share", env=_with(DEEPRESEARCH_MODEL_RPS="3")) as run:
        short_runs(run.script)
        run.llm.account = AccountLimit(rate=3.0)
        second = WorkerProcess(run.worker.env, tmp_path / "second.log")
        second.start()
        try:
            await second.ready(run.client)
            identities = {run.worker.identity, second.identity}
            handles = await _start_many(run.client, dev_server.address, run.task_queue, run.data_dir, 12)
            results = await finish(handles, 240)
            histories = [await h.fetch_history() for h in handles]
        finally:
            second.stop()
    assert [r.status for r in results] == ["completed"] * 12
    served, limited = counts(run.llm)
    print(f"two workers, 12 runs at 3 requests/s: {served} served, {limited} refused")
    assert served == 12 * CALLS_PER_SHORT_RUN
    assert limited * 4 <= served, f"{limited} 429s for {served} served requests"
    workers = set().union(*(_model_workers(h) for h in histories))
    assert workers == identities


async def test_a_worker_killed_while_calls_wait_repeats_nothing(dev_server, tmp_path):
    """Runs wait on a 1-request-a-second account; the worker is killed while
    some calls wait (refused, or queued behind the limit) and replaced: every
    run completes, and no model call that had completed is made again."""
    async with CrashRun(dev_server.address, tmp_path, "waits", llm_latency=0.0) as run:
        short_runs(run.script)
        run.llm.account = AccountLimit(rate=1.0)
        handles = await _start_many(run.client, dev_server.address, run.task_queue, run.data_dir, 6)
        async with asyncio.timeout(60):
            while counts(run.llm)[1] < 3 or counts(run.llm)[0] < 4:
                await asyncio.sleep(0.05)
        statuses = [await h.query("status", result_type=RunStatus) for h in handles]
        await run.restart_worker()
        results = await finish(handles, 240)
        histories = [await h.fetch_history() for h in handles]

    assert any(s.rate_limited_since for s in statuses), "no call was waiting when the worker was killed"
    assert [r.status for r in results] == ["completed"] * 6
    servers = (run.llm, run.tavily, run.pages)
    for history in histories:
        assert repeated_calls(history, *servers) == []
    # Every request the servers saw was made by an activity of one of the runs.
    assert set.intersection(*(set(unattributed_calls(h, *servers)) for h in histories)) == set()
    assert sum(r.usage.llm_calls for r in results) == 6 * CALLS_PER_SHORT_RUN


def _with(**env: str) -> dict[str, str]:
    import os

    return dict(os.environ) | env
