"""History stays bounded: when the server suggests it, the workflow continues
as new between plan iterations or between two batches of a plan's steps,
carrying its state, and observers keep their progress stream. The dev server
is told to suggest it after a few events."""

from __future__ import annotations

import pytest
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from client.devserver import DevServer
from infra.settings import Settings
from infra.temporal import Connection, connect
from testkit.research_script import EXPECTED_SUM, FACT
from testkit.runs import keep_history, start
from worker import build_worker
from workflows.models import ProgressEvent


@pytest.fixture(scope="module")
def eager_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("can")
    server = DevServer(
        db_file=folder / "temporal.db",
        log_file=folder / "server.log",
        extra_args=["--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=40"],
    )
    with server:
        yield server


async def test_run_continues_as_new_between_iterations(eager_server, data_dir, worker_env, task_queue, llm, script):
    client = await connect(Connection(address=eager_server.address, data_dir=data_dir))
    settings = Settings.from_env(worker_env)
    worker, sandbox = build_worker(client, settings, task_queue, max_cached_workflows=0)
    async with worker:
        handle = await start(
            client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True, max_plan_iterations=3
        )
        first_run = handle.result_run_id
        result = await handle.result()  # follows the chain of runs
        events = [
            i.data
            async for i in WorkflowStreamClient.create(client, handle.id).subscribe(
                "progress", result_type=ProgressEvent
            )
        ]  # a worker answers for closed runs
    await sandbox.close_all()

    assert result.status == "completed" and result.plan_iterations == 3
    assert FACT in result.final_report and f"SUM_OF_SQUARES={EXPECTED_SUM}" in result.final_report
    assert (await handle.describe()).run_id != first_run  # it did continue as new
    assert len(llm.calls("coordinator")) == 1  # nothing before the loop ran again
    assert result.usage.llm_calls == len(llm.requests)  # usage carried over
    assert result.usage.crawls == 1  # the crawl cache carried over: later iterations reuse the page

    assert events[0].kind == "phase" and events[-1].kind == "finished"
    assert sum(e.kind == "plan" for e in events) == 3  # events of every run, in order


async def test_long_plan_continues_as_new_between_steps(eager_server, data_dir, worker_env, task_queue, llm, script):
    """One plan iteration: the run continues as new between (or inside) steps,
    and nothing runs twice."""
    script.steps = [("Find the lighthouse fact", "research"), ("Compute the sum of squares", "processing")]
    client = await connect(Connection(address=eager_server.address, data_dir=data_dir))
    settings = Settings.from_env(worker_env)
    worker, sandbox = build_worker(client, settings, task_queue, max_cached_workflows=0)
    async with worker:
        handle = await start(
            client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True, max_plan_iterations=1
        )
        first_run = client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
        result = await handle.result()
        first_history = await first_run.fetch_history()
        await keep_history(first_run, "continued_between_steps")
    await sandbox.close_all()

    assert result.status == "completed" and result.plan_iterations == 1
    assert FACT in result.final_report and f"SUM_OF_SQUARES={EXPECTED_SUM}" in result.final_report
    # The first run ended with continue-as-new before the code step (between
    # two turns of the research step, or after it).
    assert first_history.events[-1].HasField("workflow_execution_continued_as_new_event_attributes")
    first_run_activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in first_history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert "web_search" in first_run_activities and "run_python" not in first_run_activities
    # Nothing ran twice: one coordinator, one plan, the research step's calls once.
    assert len(llm.calls("coordinator")) == 1 and len(llm.calls("planner")) == 1
    assert len(llm.calls("researcher")) == 3  # search, crawl, answer
    assert [s.execution_res is not None for s in result.plan.steps] == [True, True]
    assert result.usage.llm_calls == len(llm.requests) and result.usage.crawls == 1
