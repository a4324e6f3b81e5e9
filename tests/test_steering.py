"""Steering a run in flight (SPEC 3d, workflows/steering.py): a note sent to a
running run through the `steer` update (the CLI, the stock `temporal` CLI) or
signal reaches it at the next safe point, and is never lost.

Real dev server and worker (caching no workflow, so every task replays the
history); the scripted model honours a steer visibly (testkit/research_script.py:
a note "also X" adds a step "Steered: X", an agent told a note writes
"Guidance followed: <note>", a reporter given notes titles its report
"(following: …)"). A model call held open by a gate (testkit/crash.py) fixes
where the run stands when the steer arrives. A worker killed between taking
and applying a steer: tests/test_crash.py; a steer carried by continue-as-new:
tests/test_continue_as_new.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowUpdateFailedError

from client.devserver import temporal_binary
from testkit.crash import Gate
from testkit.pages import article
from testkit.research_script import FACT, GUIDANCE
from testkit.runs import keep_history, start, wait_for_phase
from workflows.models import RunStatus
from workflows.steering import PATCH

QUESTION = "Tell me about Lantern Rock"
CLOSING = "## Guidance received during the research"
BIN = Path(sys.executable).parent


async def steer(handle, note: str, urls: list[str] = (), by: str | None = None) -> dict:
    arg = {"note": note, "urls": list(urls)} | ({"by": by} if by else {})
    return await handle.execute_update("steer", arg, result_type=dict)


async def status(handle) -> RunStatus:
    return await handle.query("status", result_type=RunStatus)


def held(llm, script, role: str, n: int) -> Gate:
    """Hold the ``n``-th ``role`` request open until released."""
    gate = Gate(script, role, n)
    llm.handler = gate
    return gate


def said(request: dict) -> str:
    return "\n".join(str(m.get("content") or "") for m in request["messages"])


async def test_two_steers_mid_step_join_the_next_turn_then_revise_the_steps_not_started(
    temporal_client, task_queue, worker, llm, script
):
    gate = held(llm, script, "researcher", 2)  # step 1's agent, its second turn in flight
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    await gate.wait_reached()
    first = await steer(handle, "only EU sources")
    second = await steer(handle, "also compare prices")
    assert first["accepted"] and first["applies_at"] == "next_turn"
    assert second["accepted"] and "steer 2 taken" in second["message"]
    waiting = (await status(handle)).steers
    assert [s.note for s in waiting] == ["only EU sources", "also compare prices"]
    assert all(s.applied_at is None and s.received_at for s in waiting)
    gate.release()
    result = await handle.result()
    await keep_history(handle, "steered_mid_step")

    turns = llm.calls("researcher")
    assert not any("only EU sources" in said(r) for r in turns[:2])
    third = said(turns[2])  # the turn after the steers: both notes, in order
    assert third.index("only EU sources") < third.index("also compare prices")
    assert [s.applied_where for s in result.steers] == ["researcher · step 1, turn 3"] * 2
    # Between steps the steps not started were revised (one planner call), within --max-step-num 3.
    assert [c for c in llm.calls("planner") if "# Steps not started yet" in said(c)][0]
    assert [s.title for s in result.plan.steps] == [
        "Find the lighthouse fact",
        "Compute the sum of squares",
        "Steered: compare prices",
    ]
    assert all(s.execution_res for s in result.plan.steps)
    assert "Guidance followed: also compare prices" in result.plan.steps[2].execution_res  # its task held them
    assert result.final_report.startswith("# Scripted Report (following: only EU sources; also compare prices)")
    closing = result.final_report.split(CLOSING, 1)[1]
    assert "“only EU sources” (received" in closing and "applied: researcher · step 1, turn 3" in closing
    assert FACT in result.final_report
    # The Temporal UI's current details name each steer and where it applied.
    details = (await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)).current_details
    assert "Steers received: 2" in details and "“only EU sources”: researcher · step 1, turn 3" in details


async def test_a_steer_between_steps_that_asks_nothing_new_changes_no_step(
    temporal_client, task_queue, worker, llm, script
):
    script.steps = [("Compute the sum of squares", "processing"), ("Find the lighthouse fact", "research")]
    gate = held(llm, script, "coder", 2)  # the coder's last turn: its step ends without another
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    await gate.wait_reached()
    await steer(handle, "keep the report short")
    gate.release()
    result = await handle.result()

    assert len(llm.calls("coder")) == 2  # no turn of the coder's was told
    revising = [c for c in llm.calls("planner") if "# Steps not started yet" in said(c)]
    assert len(revising) == 1 and "keep the report short" in said(revising[0])
    assert [s.title for s in result.plan.steps] == ["Compute the sum of squares", "Find the lighthouse fact"]
    [taken] = result.steers
    assert taken.applied_where.startswith("between steps") and "no step changed" in taken.applied_where
    # The step that started later was told it in its task, and the reporter followed it.
    assert GUIDANCE in said(llm.calls("researcher")[0])
    assert "keep the report short" in said(llm.calls("reporter")[0])


async def test_a_steer_after_the_last_step_reaches_the_reporter(temporal_client, task_queue, worker, llm, script):
    script.steps = [("Find the lighthouse fact", "research")]
    gate = held(llm, script, "researcher", 3)  # the only step's last turn
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    await gate.wait_reached()
    reply = await steer(handle, "write it for a general audience", by="alice")
    gate.release()
    result = await handle.result()

    assert reply["applies_at"] == "next_turn"  # what it expected; the step ended first
    assert result.steers[0].by == "alice" and "steered by alice" in result.final_report  # who steered
    assert len(llm.calls("planner")) == 1  # no step was left to revise
    [taken] = result.steers
    assert taken.applied_where == "the report"
    [report_call] = llm.calls("reporter")
    assert GUIDANCE in said(report_call) and "write it for a general audience" in said(report_call)
    assert result.final_report.startswith("# Scripted Report (following: write it for a general audience)")


async def test_a_steer_for_another_language_changes_the_reports_language(
    temporal_client, task_queue, worker, llm, script
):
    """ "Write it in Chinese" on an English run: the report's request and its
    language check follow the note, so a Chinese report is not asked for
    again in English."""
    script.steps = [("Find the lighthouse fact", "research")]
    gate = held(llm, script, "researcher", 3)
    script.reporter = lambda request: "# 灯塔报告\n\n灯塔看守人在1911年记录了4417艘船。\n\n这一记录来自灯塔的历史页面。"
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    await gate.wait_reached()
    await steer(handle, "please write the report in Chinese")
    gate.release()
    result = await handle.result()
    assert result.locale == "zh-CN" and len(llm.calls("reporter")) == 1
    assert result.final_report.startswith("# 灯塔报告") and not result.warnings


async def test_a_steer_while_the_reporter_writes_has_the_report_written_again(
    temporal_client, task_queue, worker, llm, script
):
    gate = held(llm, script, "reporter", 1)
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    await gate.wait_reached()
    reply = await steer(handle, "mention the keeper's logbook")
    assert reply["applies_at"] == "report" and "written (again" in reply["message"]
    gate.release()
    result = await handle.result()
    await keep_history(handle, "steered_during_report")

    first, again = llm.calls("reporter")
    assert "keeper's logbook" not in said(first) and "keeper's logbook" in said(again)
    assert result.final_report.startswith("# Scripted Report (following: mention the keeper's logbook)")
    assert result.steers[0].applied_where == "the report, written again with it"
    assert "mention the keeper's logbook" in result.final_report.split(CLOSING, 1)[1]


async def test_a_steer_while_the_plan_is_written_has_it_planned_again(temporal_client, task_queue, worker, llm, script):
    gate = held(llm, script, "planner", 1)
    handle = await start(temporal_client, task_queue, QUESTION)
    await gate.wait_reached()
    reply = await steer(handle, "also compare prices")
    assert reply["applies_at"] == "plan"
    gate.release()
    status = await wait_for_phase(handle, "awaiting_review")  # the plan shown for review already follows it

    first, again = llm.calls("planner")
    assert "compare prices" not in said(first) and GUIDANCE in said(again)
    assert [s.title for s in status.steps][-1] == "Steered: compare prices" and status.plan_version == 2
    assert status.steers[0].applied_where == "the plan"
    await handle.terminate("done")


async def test_refusals_during_review_bad_notes_and_after_the_end(
    temporal_client, task_queue, worker, worker_env, llm, script, dev_server
):
    gate = held(llm, script, "researcher", 1)
    handle = await start(temporal_client, task_queue, QUESTION)
    await wait_for_phase(handle, "awaiting_review")
    with pytest.raises(WorkflowUpdateFailedError) as during_review:
        await steer(handle, "also compare prices")
    assert "--edit" in str(during_review.value.cause) and "review" in str(during_review.value.cause)
    for bad, why in (("   ", "empty"), ("x" * 5000, "at most 4,000"), ("ok", "web address")):
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("steer", {"note": bad, "urls": ["file:///etc/passwd"] if bad == "ok" else []})
        assert why in str(refused.value.cause)
    await handle.signal("steer", {"note": "a signal while the plan waits"})  # logged and ignored
    await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)  # taken after the signal
    assert (await status(handle)).steers == []

    # While it researches, the stock temporal CLI steers by update and by signal.
    await gate.wait_reached()
    stock = await asyncio.to_thread(temporal_cli, dev_server.address, "update", handle.id, {"note": "also stock"})
    assert stock.returncode == 0, stock.stderr
    assert "taken" in stock.stdout
    signalled = {"note": "also by signal", "user": "someone"}  # a field it does not know is ignored
    assert (await asyncio.to_thread(temporal_cli, dev_server.address, "signal", handle.id, signalled)).returncode == 0
    gate.release()
    result = await handle.result()
    assert [s.note for s in result.steers] == ["also stock", "also by signal"]
    assert all(s.applied_at for s in result.steers) and len(result.plan.steps) <= 3  # within --max-step-num

    ended = await asyncio.to_thread(cli, worker_env, "steer", handle.id, "also compare prices")
    assert ended.returncode == 1 and len(ended.stderr.strip().splitlines()) == 1
    assert f"ask {handle.id}" in ended.stderr and "Traceback" not in ended.stderr
    empty = await asyncio.to_thread(cli, worker_env, "steer", handle.id, " ")
    assert empty.returncode == 1 and "the note is empty" in empty.stderr


async def test_a_url_steer_is_read_and_its_fact_reaches_the_report(
    temporal_client, task_queue, worker, worker_env, llm, script, pages
):
    official = "FACT: the official register names keeper Ada Quell for 1911"
    pages.add("/official", article("Lantern Rock official register", ["Register.", official + ".", "End."]))
    gate = held(llm, script, "researcher", 1)
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    await gate.wait_reached()
    sent = await asyncio.to_thread(
        cli, worker_env, "steer", handle.id, "use the official register", "--url", pages.url("/official"), "--json"
    )
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["accepted"] is True
    gate.release()
    result = await handle.result()
    await keep_history(handle, "steered_page_read")

    assert official in result.final_report  # only on the page the steer gave
    assert pages.hits.count("/official") == 1  # read once, by the workflow (the run's cache after)
    assert pages.url("/official") in [c.url for c in result.citations]
    [taken] = result.steers
    assert taken.urls == [pages.url("/official")] and taken.applied_at


async def test_a_run_without_steers_records_no_steering_marker(temporal_client, task_queue, worker):
    """So a run that was never steered replays as it did before steering existed."""
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    history = await handle.fetch_history()
    markers = [
        e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    assert result.steers == [] and CLOSING not in result.final_report
    assert markers and not any(PATCH.encode() in m for m in markers)


def cli(env, *args):
    return subprocess.run([str(BIN / "deepresearch"), *args], env=env, capture_output=True, text=True, timeout=120)


def temporal_cli(address: str, kind: str, workflow_id: str, argument: object):
    command = ["workflow", "update", "execute"] if kind == "update" else ["workflow", "signal"]
    return subprocess.run(
        [temporal_binary(), *command, "--address", address, "--workflow-id", workflow_id, "--name", "steer"]
        + ["--input", json.dumps(argument)],
        capture_output=True,
        text=True,
        timeout=60,
    )
