"""A weak model at the coordinator and planner (issue 23, seen with
SmolLM2-135M on llama.cpp): the user's question is never lost, prose does not
end a research run, a planner without a usable plan does not end it either,
and list/status show how a run really ended. Real dev server, real worker,
scripted model over HTTP."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from testkit.llm_server import Reply, last_user
from testkit.runs import keep_history, start
from workflows.models import PHASE_ATTRIBUTE, ProgressEvent, RunStatus

QUESTION = "How does the Lantern Rock lighthouse compare with tidal barrages?"
BIN = Path(sys.executable).parent


def handoff(topic: str, locale: str = "en-US"):
    return lambda request: Reply(tool_calls=[("handoff_to_planner", {"research_topic": topic, "locale": locale})])


async def test_a_schema_description_as_topic_falls_back_to_the_question(
    temporal_client, task_queue, worker, llm, tavily, script
):
    script.coordinator = handoff("The user's locale, e.g. en-US or zh-CN.", locale="zh-CN")
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    assert result.status == "completed"
    assert result.locale == "en-US"  # the model's zh-CN contradicts an English question
    assert tavily.requests[0]["query"] == QUESTION  # the background search
    first_plan = llm.calls("planner")[0]
    assert f"# Research question\n{QUESTION}" in last_user(first_plan)
    assert "e.g. en-US" not in last_user(first_plan)


async def test_a_research_question_answered_in_prose_is_researched(temporal_client, task_queue, worker, llm, script):
    script.coordinator = lambda request: "Tidal barrages are better, see https://video.example/watch?v=made-up"
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "prose_handed_off")
    assert result.status == "completed"
    assert llm.calls("planner") and llm.calls("researcher") and llm.calls("reporter")
    assert "video.example" not in result.final_report


async def test_a_declined_request_without_a_refusal_is_researched(temporal_client, task_queue, worker, llm, script):
    script.coordinator = lambda request: Reply(tool_calls=[("decline_request", {"reply": ""})])
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    assert result.status == "completed" and llm.calls("researcher")


async def test_a_planner_without_a_usable_plan_researches_the_question(
    temporal_client, task_queue, worker, llm, script
):
    script.planner = lambda request: '{"title": "Plan", "steps": []}'  # no steps, twice
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "question_as_plan")
    assert result.status == "completed"
    assert [(s.title, s.step_type) for s in result.plan.steps] == [(QUESTION, "research")]
    assert result.plan.steps[0].execution_res and llm.calls("researcher")
    assert len(llm.calls("planner")) == 2
    status = await handle.query("status", result_type=RunStatus)
    assert status.note and "researching the question itself as one step" in status.note
    stream = WorkflowStreamClient.create(temporal_client, handle.id)
    events = [item.data async for item in stream.subscribe("progress", result_type=ProgressEvent)]
    assert any(e.kind == "notice" and "as one step" in e.text for e in events)


async def test_a_planner_that_says_nothing_at_all_ends_as_plan_failed(temporal_client, task_queue, worker, llm, script):
    script.planner = lambda request: ""
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    assert result.status == "plan_failed"
    assert llm.calls("researcher") == [] and llm.calls("reporter") == []


async def test_list_and_status_show_how_a_run_ended(worker_env, temporal_client, task_queue, worker, llm, script):
    script.planner = lambda request: ""
    failed = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    greeted = await start(temporal_client, task_queue, "Hello there!")
    await failed.result()
    await greeted.result()
    assert (await greeted.describe()).typed_search_attributes.get(PHASE_ATTRIBUTE) == "answered_directly"
    status = await failed.query("status", result_type=RunStatus)
    assert (status.phase, status.outcome) == ("completed", "plan_failed")

    env = worker_env | {"COLUMNS": "250"}
    for _ in range(50):  # the attribute reaches the visibility store a moment later
        listing = await asyncio.to_thread(run_cli, env, "list", "--limit", "1000")  # ended runs list after those going
        if "completed (plan_failed)" in listing and "completed (answered_directly)" in listing:
            break
        await asyncio.sleep(0.2)
    assert "completed (plan_failed)" in listing and "completed (answered_directly)" in listing
    shown = await asyncio.to_thread(run_cli, env, "status", failed.id)
    assert "completed (plan_failed)" in shown
    assert "ask a follow-up" not in shown  # a run without a report has nothing to ask about


def run_cli(env: dict, *args: str) -> str:
    import subprocess

    done = subprocess.run([str(BIN / "deepresearch"), *args], env=env, capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


@pytest.fixture
async def sandbox(temporal_client, worker_env, task_queue, script):
    """A worker like the others, whose sandbox the test can look into."""
    from infra.settings import Settings
    from worker import build_worker

    worker, held = build_worker(temporal_client, Settings.from_env(worker_env), task_queue, max_cached_workflows=0)
    try:
        async with worker:
            yield held.sandbox
    finally:
        await held.close_all()


async def test_a_failing_coder_still_closes_its_sandbox_session(temporal_client, task_queue, sandbox, llm, script):
    def coder(request):
        if not any(m.get("role") == "tool" for m in request["messages"]):
            return Reply(tool_calls=[("run_python", {"code": "raise SystemExit('no luck')"})])
        return "The code failed."

    script.coder = coder
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    await handle.result()
    await keep_history(handle, "failing_coder_closed")
    scheduled = scheduled_activities(json.loads((await handle.fetch_history()).to_json()))
    assert "run_python" in scheduled and "close_sandbox" in scheduled
    assert sandbox.open_sessions() == set()  # its process is gone, not left to the 15-minute idle reaper


async def test_a_cancelled_coder_closes_its_sandbox_session(temporal_client, task_queue, sandbox, llm, script):
    script.coder = lambda request: Reply(tool_calls=[("run_python", {"code": "import time\ntime.sleep(120)"})])
    script.steps = [("Compute the sum of squares", "processing")]
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    async with asyncio.timeout(60):
        while not sandbox.open_sessions():
            await asyncio.sleep(0.2)
    await handle.cancel()
    result = await handle.result()
    assert result.status == "cancelled"
    assert "close_sandbox" in scheduled_activities(json.loads((await handle.fetch_history()).to_json()))
    assert sandbox.open_sessions() == set()


def scheduled_activities(history: dict) -> list[str]:
    return [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in history["events"]
        if "activityTaskScheduledEventAttributes" in e
    ]


async def test_html_escaped_search_queries_are_searched_as_the_characters_they_mean(
    temporal_client, task_queue, worker, llm, tavily, script
):
    """Issue 31: a real model wrote its queries HTML-escaped (``&#39;``), and
    they reached the search engine so."""
    researcher = script.researcher

    def escaping(request):
        reply = researcher(request)
        if isinstance(reply, Reply) and reply.tool_calls and reply.tool_calls[0][0] == "web_search":
            return Reply(tool_calls=[("web_search", {"query": "Lantern Rock&#39;s keeper &amp; &quot;lamp&quot;"})])
        return reply

    script.researcher = escaping
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    assert result.status == "completed"
    assert 'Lantern Rock\'s keeper & "lamp"' in [r["query"] for r in tavily.requests]


def test_only_well_formed_entities_in_queries_urls_and_topics_are_unescaped():
    from workflows.model_output import unescape_entities

    def args(**values) -> str:
        return json.dumps(values)

    assert json.loads(unescape_entities(args(url="https://a.org/?x=1&amp;y=&#x32;"))) == {
        "url": "https://a.org/?x=1&y=2"
    }
    assert json.loads(unescape_entities(args(research_topic="AT&amp;T"))) == {"research_topic": "AT&T"}
    code = args(code="print('&amp; &#39;')")
    assert unescape_entities(code) == code  # code means what it says
    loose = args(query="Fish & chips &copy 2020 &#39")
    assert unescape_entities(loose) == loose  # no well-formed reference: nothing to undo
    assert unescape_entities('{"query": "a &amp; b"') == '{"query": "a &amp; b"'  # not JSON: left to the repairs
