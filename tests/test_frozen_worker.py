"""A short hostile model reply never freezes the worker (issue 20, item 2):
a tool call whose arguments are a code fence, 6,000 spaces and a letter
kept the worker's event loop busy for minutes (a backtracking pattern), and
every other run's ``status`` query failed meanwhile. End to end on the
scripted servers, with the real worker and dev server; the status query is
asked from outside, by the CLI in its own process.

The worker here caches workflows as a deployed worker does: the shared
``worker`` fixture caches none (every query replays the whole history in a
fresh sandbox, which on a loaded CI took longer than the CLI's 5 s query
bound on its own), and what this file checks is the event loop, not replay."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus

from testkit.llm_server import Reply, tool_messages
from testkit.research_script import FACT
from testkit.runs import start, wait_for_phase
from testkit.time_skipping import running_worker

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = "```" + " " * 6_000 + "a"
STATUS_BOUND = 15  # seconds; the outside check allows 10 for the answer, plus the CLI's own start


@pytest.fixture
async def worker(temporal_client, worker_env, task_queue, script):
    """The real worker, with a deployed worker's workflow cache (the default)."""
    async with running_worker(temporal_client, worker_env, task_queue) as workers:
        yield workers


def status_from_outside(env: dict, workflow_id: str) -> dict:
    """``status --json`` in a child process that kills itself (SIGALRM) after
    ``STATUS_BOUND`` seconds: the worker runs in this test's process, so a
    frozen worker would freeze a timeout kept here too."""
    code = (
        f"import runpy, signal, sys; signal.alarm({STATUS_BOUND}); "
        f"sys.argv = ['deepresearch', 'status', {workflow_id!r}, '--json']; "
        "runpy.run_module('client.cli', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, (
        f"status took over {STATUS_BOUND} s or failed ({done.returncode}): {done.stderr[-500:]}"
    )
    return json.loads(done.stdout)


async def test_a_fence_and_spaces_in_a_tool_call_never_keep_another_runs_status_waiting(
    temporal_client, task_queue, worker, worker_env, llm, script
):
    waiting = await start(temporal_client, task_queue, "Tell me about Lantern Rock")
    await wait_for_phase(waiting, "awaiting_review", timeout=60)

    normal, served, turns = script.researcher, threading.Event(), []

    def researcher(request):
        turns.append(request)
        if not tool_messages(request):  # the hostile call, however often the model is asked
            served.set()
            return Reply(tool_calls=[("web_search", HOSTILE)])
        later = {**request, "messages": request["messages"][:2] + request["messages"][4:]}
        return normal(later)

    script.researcher = researcher
    hostile = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
    assert await asyncio.to_thread(served.wait, 60)
    # Asked again and again until the hostile reply has been read (the model
    # is asked its next turn with the call's answer): the reading happens meanwhile.
    read = False
    while not read:
        read = any(tool_messages(turn) for turn in list(turns))
        shown = await asyncio.to_thread(status_from_outside, worker_env, waiting.id)
        assert shown["phase"] == "awaiting_review"

    async with asyncio.timeout(90):
        result = await hostile.result()
    assert result.status == "completed" and FACT in result.final_report
    answer = next(tool_messages(turn) for turn in turns if tool_messages(turn))[0]["content"]
    assert answer.startswith("Error:") and "not valid JSON" in answer


async def test_a_heading_and_spaces_in_a_slides_outline_never_keep_another_runs_status_waiting(
    temporal_client, task_queue, worker, worker_env, script
):
    from client.side_outputs import finished_report
    from workflows.side_models import SlidesResult

    done = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
    assert (await done.result()).status == "completed"
    waiting = await start(temporal_client, task_queue, "Tell me about Lantern Rock")
    await wait_for_phase(waiting, "awaiting_review", timeout=60)

    served = threading.Event()

    def slides(request):
        served.set()
        return "# a" + " " * 6_000 + "b\n- a point\n---\n## " + " " * 6_000 + "c\n- another"

    script.slides = slides
    source = await finished_report(temporal_client, done.id, "default")
    handle = await temporal_client.start_workflow(
        "Slides", source, id=f"{done.id}-slides", task_queue=task_queue, result_type=SlidesResult
    )
    assert await asyncio.to_thread(served.wait, 60)
    built = False
    while not built:  # the deck is built meanwhile
        built = (await handle.describe()).status != WorkflowExecutionStatus.RUNNING
        shown = await asyncio.to_thread(status_from_outside, worker_env, waiting.id)
        assert shown["phase"] == "awaiting_review"

    async with asyncio.timeout(90):
        result = await handle.result()
    assert result.status == "completed" and result.deck and result.deck.slides >= 3 and not result.deck.cut
