"""History stays bounded: when the server suggests it, the workflow continues
as new between plan iterations or between two batches of a plan's steps,
carrying its state, and observers keep their progress stream. The dev server
is told to suggest it after a few events."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from client.devserver import DevServer
from infra.connection import Connection
from infra.settings import Settings
from infra.temporal import connect
from testkit.llm_server import Reply, tool_messages
from testkit.research_script import CODE, EXPECTED_SUM, FACT
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
    worker, held = build_worker(client, settings, task_queue, max_cached_workflows=0)
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
    await held.close_all()

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
    worker, held = build_worker(client, settings, task_queue, max_cached_workflows=0)
    async with worker:
        handle = await start(
            client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True, max_plan_iterations=1
        )
        first_run = client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
        result = await handle.result()
        first_history = await first_run.fetch_history()
        await keep_history(first_run, "continued_between_steps")
    await held.close_all()

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


SEARCH_TURNS, SEARCHES_PER_TURN, CODE_TURNS, CELLS_PER_TURN = 3, 8, 3, 3
FIRST_CELL = "import random\ntoken = random.random()\nlog = []\nprint(f'TOKEN={token}')"


def turns_done(request: dict) -> int:
    return sum(1 for m in request["messages"] if m["role"] == "assistant" and m.get("tool_calls"))


async def runs_of(client, workflow_id: str, first_run: str) -> list:
    """The histories of a run and every run it continued as, in order."""
    histories, run_id = [], first_run
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        last = history.events[-1]
        run_id = (
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if last.HasField("workflow_execution_continued_as_new_event_attributes")
            else None
        )
    return histories


def chat_roles(history) -> list[str]:
    """The roles of the model calls a run scheduled, in order."""
    return [
        json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)["role"]
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "chat"
    ]


def scheduled(histories, name: str) -> int:
    return sum(
        e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == name
        for h in histories
        for e in h.events
    )


async def test_a_long_step_continues_as_new_between_its_turns(
    eager_server, data_dir, worker_env, task_queue, llm, script, tavily
):
    """Issue 15, item 4: a researcher with 8 searches a turn and a coder with
    3 cells a turn outgrow the history inside their steps. Each pauses between
    two turns, the run continues as new, and the step goes on where it stopped
    (conversation, turn count, the coder's live sandbox session)."""
    normal_researcher = script.researcher

    def researcher(request):
        turn = turns_done(request)
        if turn < SEARCH_TURNS:
            return Reply(
                tool_calls=[("web_search", {"query": f"lighthouse {turn}-{i}"}) for i in range(SEARCHES_PER_TURN)]
            )
        return normal_researcher(request)  # crawls the page found, then reports its fact

    def coder(request):
        turn = turns_done(request)
        if turn < CODE_TURNS:
            cells = [f"log.append('{turn}-{i}')" for i in range(CELLS_PER_TURN)]
            return Reply(tool_calls=[("run_python", {"code": c}) for c in ([FIRST_CELL] if turn == 0 else []) + cells])
        if turn == CODE_TURNS:
            return Reply(tool_calls=[("run_python", {"code": "print(f'TOKEN={token} LOG=' + ','.join(log))\n" + CODE})])
        return "Computed with Python:\n" + "\n".join(m.get("content") or "" for m in tool_messages(request))

    script.researcher, script.coder = researcher, coder
    client = await connect(Connection(address=eager_server.address, data_dir=data_dir))
    worker, held = build_worker(client, Settings.from_env(worker_env), task_queue, max_cached_workflows=0)
    async with worker:
        handle = await start(client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
        first_run = handle.result_run_id
        async with asyncio.timeout(120):
            result = await handle.result()
        histories = await runs_of(client, handle.id, first_run)
        await keep_history(client.get_workflow_handle(handle.id, run_id=first_run), "continued_inside_steps")
    await held.close_all()

    assert result.status == "completed"
    assert FACT in result.final_report and f"SUM_OF_SQUARES={EXPECTED_SUM}" in result.final_report
    # Both steps were split: a run ended in the middle of each, the next one went on with it.
    roles = [chat_roles(h) for h in histories]
    assert len(histories) > 2 and len(llm.calls("coordinator")) == 1 and len(llm.calls("planner")) == 1
    for role in ("researcher", "coder"):
        assert any(a and b and a[-1] == b[0] == role for a, b in zip(roles, roles[1:])), roles
    # No model call twice: each turn asked once, each with one more turn of conversation.
    for role, turns in (("researcher", SEARCH_TURNS + 2), ("coder", CODE_TURNS + 2)):
        assert [turns_done(r) for r in llm.calls(role)] == list(range(turns)), role
    # No tool call twice: every search once, every cell once, in one session that lived throughout.
    queries = [r["query"] for r in tavily.requests if r["query"].startswith("lighthouse ")]
    assert sorted(queries) == sorted(
        f"lighthouse {t}-{i}" for t in range(SEARCH_TURNS) for i in range(SEARCHES_PER_TURN)
    )
    # and the background search, the step's own evidence search and its lead's
    assert scheduled(histories, "web_search") == 3 + SEARCH_TURNS * SEARCHES_PER_TURN
    assert scheduled(histories, "run_python") == 1 + CODE_TURNS * CELLS_PER_TURN + 1
    first_token = re.search(r"TOKEN=(\S+)", tool_messages(llm.calls("coder")[1])[0]["content"])
    log = ",".join(f"{t}-{i}" for t in range(CODE_TURNS) for i in range(CELLS_PER_TURN))
    # The same random token: the session was never rebuilt by replaying its cells.
    assert f"TOKEN={first_token.group(1)} LOG={log}" in result.final_report
    assert scheduled(histories, "close_sandbox") == 1


async def test_a_steer_survives_continue_as_new_and_is_told_once(
    eager_server, data_dir, worker_env, task_queue, llm, script
):
    """A steer taken before the run continues as new inside a step is kept
    (RunState.steers): applied once, never told twice to the agent that goes on."""
    from testkit.crash import Gate

    normal_researcher = script.researcher

    def researcher(request):
        turn = turns_done(request)
        if turn < SEARCH_TURNS:
            return Reply(
                tool_calls=[("web_search", {"query": f"lighthouse {turn}-{i}"}) for i in range(SEARCHES_PER_TURN)]
            )
        return normal_researcher(request)

    script.researcher = researcher
    gate = Gate(script, "researcher", 1)
    llm.handler = gate
    client = await connect(Connection(address=eager_server.address, data_dir=data_dir))
    worker, held = build_worker(client, Settings.from_env(worker_env), task_queue, max_cached_workflows=0)
    async with worker:
        handle = await start(client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
        first_run = handle.result_run_id
        await gate.wait_reached()
        await handle.execute_update("steer", {"note": "only EU sources"}, result_type=dict)
        gate.release()
        async with asyncio.timeout(120):
            result = await handle.result()
        histories = await runs_of(client, handle.id, first_run)
    await held.close_all()

    assert result.status == "completed" and len(histories) > 1  # it continued as new
    [steer] = result.steers  # carried by the runs it continued as
    assert steer.note == "only EU sources" and steer.applied_at
    told = [sum("only EU sources" in str(m.get("content")) for m in r["messages"]) for r in llm.calls("researcher")]
    assert told[0] == 0 and set(told[1:]) == {1}, told  # told once, kept in its conversation after
    assert "only EU sources" in result.final_report.split("## Guidance received during the research", 1)[1]
