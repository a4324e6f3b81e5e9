"""Every run has an owner, end to end on the real dev server with a worker
process and the CLI: the run, its follow-up thread and the research that
thread starts, its slides, and a schedule's runs all belong to the user who
started the run (DEEPRESEARCH_USER); review and cancel name who did them in
the run's history; the stock CLI's plain review signal still works.
(Who sees what on the desk: tests/test_desk_team.py and test_desk_users.py.)"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError

from client.devserver import temporal_binary
from testkit.pages import article
from testkit.runs import keep_history, polled
from testkit.worker_process import WorkerProcess
from tests.test_research_goes_on import BUILDER, QUESTION, cli
from workflows.models import OWNER_ATTRIBUTE, SHARED_ATTRIBUTE


@pytest.fixture
async def worker(worker_env, temporal_client, tmp_path, script):
    with WorkerProcess(worker_env, tmp_path / "worker.log") as process:
        await process.ready(temporal_client)
        yield process


def as_user(env: dict[str, str], user: str) -> dict[str, str]:
    return env | {"DEEPRESEARCH_USER": user}


async def status_json(env, run_id: str) -> dict:
    done = await asyncio.to_thread(cli, env, "status", run_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def waiting_for_review(env, run_id: str) -> dict:
    return await polled(lambda: status_json(env, run_id), lambda s: s["review_pending"], seconds=60)


def owner_of(described) -> tuple[str | None, list[str]]:
    attributes = described.typed_search_attributes
    return attributes.get(OWNER_ATTRIBUTE), list(attributes.get(SHARED_ATTRIBUTE) or [])


async def test_a_run_its_follow_ups_and_its_slides_are_its_owners(
    worker_env, worker, temporal_client, pages, tavily, llm
):
    alice, bob = as_user(worker_env, "alice"), as_user(worker_env, "bob")
    started = await asyncio.to_thread(cli, alice, "start", QUESTION, "--share", "bob", "--share", "team:ops")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    status = await waiting_for_review(alice, run_id)
    assert (status["owner"], status["shared_with"], status["plan_accepted_by"]) == ("alice", ["bob", "team:ops"], None)
    handle = temporal_client.get_workflow_handle(run_id)
    assert owner_of(await handle.describe()) == ("alice", ["bob", "team:ops"])  # the Temporal UI filters by them

    # A review naming a user that is no name is refused; the CLI's names DEEPRESEARCH_USER.
    with pytest.raises(WorkflowUpdateFailedError) as bad:
        await handle.execute_update("submit_review", {"feedback": "[ACCEPTED]", "by": "x y"}, result_type=str)
    assert "the acting user 'x y' is not a user name" in str(bad.value.cause)
    reviewed = await asyncio.to_thread(cli, alice, "review", run_id, "--accept")
    assert reviewed.returncode == 0, reviewed.stderr
    done = await asyncio.to_thread(cli, alice, "result", run_id, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["owner"], result["shared_with"], result["plan_accepted_by"]) == (
        "alice",
        ["bob", "team:ops"],
        "alice",
    )
    assert result["final_report"].rstrip().endswith("*Research run: plan accepted by alice.*")  # the closing note
    assert (await status_json(alice, run_id))["plan_accepted_by"] == "alice"
    shown = await asyncio.to_thread(cli, alice | {"COLUMNS": "250"}, "status", run_id)
    assert "owner: alice   shared with: bob, team:ops   plan accepted by: alice" in shown.stdout
    ui = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    assert "Owner: alice" in ui.current_details and "Plan accepted by: alice" in ui.current_details
    events = [e async for e in handle.fetch_history_events()]
    updates = [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]
    payload = updates[-1].workflow_execution_update_accepted_event_attributes.accepted_request.input.args.payloads[0]
    assert json.loads(payload.data) == {"feedback": "[ACCEPTED]", "by": "alice"}  # who did it, in the history
    await keep_history(handle, "owned_run")

    # Bob asks (he may: the CLI talks to Temporal directly); the thread and its research are alice's.
    pages.add("/builder", article("Who built Lantern Rock", ["Records.", BUILDER + ".", "More."]))
    tavily.handler = lambda query, n: [
        {"title": "Lantern Rock builder", "url": pages.url("/builder"), "content": "Records.", "score": 0.9}
    ]
    asked = await asyncio.to_thread(cli, bob, "ask", run_id, "Who constructed it?", "--json")
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert answer["researched"]
    thread = await temporal_client.get_workflow_handle(answer["workflow_id"]).describe()
    assert owner_of(thread) == ("alice", ["bob", "team:ops"])
    research = temporal_client.get_workflow_handle(answer["research_run"])
    assert owner_of(await research.describe()) == ("alice", ["bob", "team:ops"])
    assert (await research.result())["owner"] == "alice"

    made = await asyncio.to_thread(cli, bob, "slides", run_id)
    assert made.returncode == 0, made.stderr
    slides = await temporal_client.get_workflow_handle(f"{run_id}-slides").describe()
    assert owner_of(slides) == ("alice", ["bob", "team:ops"])


async def test_a_schedules_runs_are_its_creators(worker_env, worker, temporal_client):
    name = f"owned-{time.time_ns() % 10**8}"
    carol = as_user(worker_env, "carol")
    created = await asyncio.to_thread(
        cli, carol, "schedule", "create", name, QUESTION, "--every", "1h", "--max-step-num", "1", "--share", "team:ops"
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    try:
        listed = await asyncio.to_thread(cli, carol | {"COLUMNS": "250"}, "schedule", "list")
        row = next(line for line in listed.stdout.splitlines() if line.startswith(name))
        assert row.split()[-1] == "carol"  # whose runs it starts
        assert (await asyncio.to_thread(cli, carol, "schedule", "trigger", name)).returncode == 0
        query = f"TemporalScheduledById = '{name}'"
        runs = await polled(lambda: _listed(temporal_client, query), bool, seconds=30)
        handle = temporal_client.get_workflow_handle(runs[0].id)
        result = await asyncio.wait_for(handle.result(), 120)
        assert (result["owner"], result["shared_with"]) == ("carol", ["team:ops"])
        assert owner_of(await handle.describe()) == ("carol", ["team:ops"])
    finally:
        await asyncio.to_thread(cli, carol, "schedule", "delete", name)


async def _listed(client, query: str) -> list:
    return [run async for run in client.list_workflows(query)]


async def test_cancel_names_who_and_the_stock_cli_still_reviews(worker_env, worker, temporal_client):
    alice = as_user(worker_env, "alice")
    first, second = [
        (await asyncio.to_thread(cli, alice, "start", QUESTION)).stdout.strip() for _ in range(2)
    ]  # fmt: skip
    await waiting_for_review(alice, first)
    # The stock CLI's plain string, as the contract keeps it: accepted, nobody named.
    signal = await asyncio.create_subprocess_exec(
        temporal_binary(), "workflow", "signal", "--address", worker_env["TEMPORAL_ADDRESS"],
        "--workflow-id", first, "--name", "review", "--input", '"[ACCEPTED]"',
    )  # fmt: skip
    assert await signal.wait() == 0
    result = await asyncio.wait_for(temporal_client.get_workflow_handle(first).result(), 120)
    assert result["status"] == "completed" and result["owner"] == "alice" and result["plan_accepted_by"] is None
    assert "Research run:" not in result["final_report"]

    await waiting_for_review(alice, second)
    cancelled = await asyncio.to_thread(cli, as_user(worker_env, "dora"), "cancel", second)
    assert cancelled.returncode == 0, cancelled.stderr
    handle = temporal_client.get_workflow_handle(second)
    assert (await asyncio.wait_for(handle.result(), 120))["status"] == "cancelled"
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    events = [e async for e in handle.fetch_history_events()]
    asked = [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED]
    attributes = asked[0].workflow_execution_cancel_requested_event_attributes
    assert (attributes.identity, attributes.cause) == ("dora (deepresearch cancel)", "cancelled by dora")
