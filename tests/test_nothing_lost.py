"""Nothing the user or the sources said is lost, end to end on the scripted
servers with the real worker and dev server."""

from __future__ import annotations

import asyncio
import re

from testkit.llm_server import Reply, has_tool_result
from testkit.research_script import FACT
from testkit.runs import start, wait_for_phase

QUESTION = "Tell me about Lantern Rock"


async def test_clarification_answers_reach_the_planner_word_for_word(temporal_client, task_queue, worker, llm, script):
    """The hand-off topic repeats neither answer; the planner still gets both."""
    asked = []

    def coordinator(request):
        asked.append(request)
        if len(asked) <= 2:
            return f"Question {len(asked)}: what matters most?"
        return Reply(
            tool_calls=[("handoff_after_clarification", {"research_topic": "Lantern Rock", "locale": "en-US"})]
        )

    script.coordinator = coordinator
    handle = await start(
        temporal_client,
        task_queue,
        QUESTION,
        enable_clarification=True,
        max_clarification_rounds=3,
        auto_accept_plan=True,
    )
    await wait_for_phase(handle, "clarifying")
    await handle.execute_update("answer_clarification", "Only the keeper's logbook of 1911", result_type=str)
    await wait_for_phase(handle, "clarifying")
    await handle.signal("clarify", "Ships counted, not weather")
    async with asyncio.timeout(60):
        result = await handle.result()

    first_plan_request = llm.calls("planner")[0]["messages"][1]["content"]
    assert "Only the keeper's logbook of 1911" in first_plan_request
    assert "Ships counted, not weather" in first_plan_request
    assert QUESTION in first_plan_request and "Question 1: what matters most?" in first_plan_request
    assert [(c.question, c.answer) for c in result.clarifications] == [
        ("Question 1: what matters most?", "Only the keeper's logbook of 1911"),
        ("Question 2: what matters most?", "Ships counted, not weather"),
    ]
    assert result.status == "completed" and FACT in result.final_report


async def test_a_repeated_query_costs_one_search(temporal_client, task_queue, worker, llm, script, tavily):
    """Two research steps in parallel and a second turn ask the same query."""
    normal = script.researcher

    def researcher(request):
        if not has_tool_result(request, "web_search"):
            return Reply(tool_calls=[("web_search", {"query": "Lantern Rock lighthouse"})])
        if sum(1 for m in request["messages"] if m["role"] == "tool") == 1:
            return Reply(tool_calls=[("web_search", {"query": "  lantern rock   LIGHTHOUSE "})])
        return normal(request)

    script.researcher = researcher
    script.steps = [("Find the lighthouse fact", "research"), ("Find the lighthouse history", "research")]
    handle = await start(
        temporal_client, task_queue, QUESTION, auto_accept_plan=True, enable_background_investigation=False
    )
    async with asyncio.timeout(60):
        result = await handle.result()
    queries = [r.get("query") for r in tavily.requests]
    assert queries == ["Lantern Rock lighthouse"]  # four asks, one search
    assert result.usage.searches == 1 and result.usage.cache_hits >= 3


async def test_a_six_step_report_under_an_8k_window_keeps_every_steps_fact(
    temporal_client, task_queue, research_worker, llm, script
):
    """Six long findings do not fit the reporter's window together: each is
    condensed first, and every step's key fact reaches the report."""
    script.steps = [(f"Aspect {i}", "research") for i in range(6)]
    filler = "This paragraph repeats background that matters little for the question. " * 60

    def researcher(request):
        step = re.search(r"## (Aspect \d)", request["messages"][1]["content"]).group(1)
        return f"{filler}\nFACT: {step} measured {int(step[-1]) * 111 + 7} units\n{filler}"

    script.researcher = researcher
    async with research_worker(DEEPRESEARCH_CONTEXT_WINDOW="8000"):
        handle = await start(
            temporal_client,
            task_queue,
            QUESTION,
            auto_accept_plan=True,
            max_step_num=6,
            enable_background_investigation=False,
        )
        async with asyncio.timeout(120):
            result = await handle.result()
    assert result.status == "completed"
    for i in range(6):
        assert f"FACT: Aspect {i} measured {i * 111 + 7} units" in result.final_report
    assert len(llm.calls("editor")) >= 6  # each step condensed
