"""Evidence without a wait (workflows/evidence_ahead.py), end to end on the
dev server with the real worker, crawler and scripted servers: a research
step's reading overlaps its agent's first turn, or the plan's review, and
each of its passages reaches the model once."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType

from testkit.research_script import FACT
from testkit.research_script import first_user as first_user_text
from testkit.runs import finished, keep_history, polled, start, wait_for_phase

QUESTION = "Tell me about Lantern Rock"
STEP = "How many ships did the Lantern Rock keeper log in 1911"


def scheduled(history) -> list[str]:
    """The activity types the run scheduled, in order."""
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def toolless(request: dict) -> str:
    """A model that never calls a tool: the FACT lines of its first message."""
    found = sorted({line for line in first_user_text(request).split("\n") if FACT in line})
    return "## Findings\n- " + (FACT if found else "It was probably built long ago.")


async def test_a_researcher_that_searches_starts_at_once_and_is_given_each_passage_once(
    temporal_client, task_queue, worker, llm, script, pages
):
    """The scripted researcher searches, crawls the page it found (the one
    the step read) and answers: its first turn does not wait for the step's
    search and crawl, and it is not asked again for passages of the page it
    read itself."""
    script.steps = [(STEP, "research")]
    handle = await start(
        temporal_client, task_queue, QUESTION, auto_accept_plan=True, enable_background_investigation=False
    )
    result = await finished(handle)
    await keep_history(handle, "evidence_beside_first_turn")
    order = scheduled(await handle.fetch_history())
    # coordinator, planner, then the researcher's first turn beside the step's own search, before any crawl
    assert order.index("crawl") > [n for n, name in enumerate(order) if name == "chat"][2]
    calls = llm.calls("researcher")
    assert FACT not in first_user_text(calls[0]) and len(calls) == 3
    last = [m for m in calls[-1]["messages"] if m["role"] != "system"]
    assert sum((m.get("content") or "").count(FACT) for m in last) == 1  # the page's and the step's: once
    assert FACT in result.observations[0] and FACT in result.final_report


async def test_a_model_that_answers_at_once_is_asked_again_with_its_passages_and_later_steps_read_first(
    temporal_client, task_queue, worker, llm, script, pages
):
    """A model that never calls a tool answers its first turn before the
    step's passages are there: it is asked again with them; the run's next
    step then reads before its first turn."""
    script.researcher = toolless
    script.steps = [(STEP, "research"), ("Who kept the Lantern Rock lighthouse in 1911", "research")]
    handle = await start(
        temporal_client,
        task_queue,
        QUESTION,
        auto_accept_plan=True,
        enable_background_investigation=False,
        parallel_research=False,
    )
    result = await finished(handle)
    await keep_history(handle, "evidence_asked_again")
    first_step = [first_user_text(r) for r in llm.calls("researcher")[:2]]
    second_step = [first_user_text(r) for r in llm.calls("researcher")[2:]]
    assert FACT not in first_step[0] and FACT in first_step[1]
    assert len(second_step) == 1 and FACT in second_step[0]
    assert all(FACT in findings for findings in result.observations)


def crawl_answers(request: dict) -> list[str]:
    """What the crawls of this request's conversation answered."""
    ids = {c["id"] for m in request["messages"] for c in m.get("tool_calls") or [] if c["function"]["name"] == "crawl"}
    return [m["content"] for m in request["messages"] if m["role"] == "tool" and m.get("tool_call_id") in ids]


async def ranked(handle) -> int:
    return scheduled(await handle.fetch_history()).count("rank_evidence")


async def read(handle) -> int:
    """The step gatherings done and seen by the run: rankings completed with
    a workflow task completed after them (so a review accepted now finds the
    passages there, on a loaded machine too)."""
    events = (await handle.fetch_history()).events
    ranking = {
        e.event_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "rank_evidence"
    }
    done = [
        i
        for i, e in enumerate(events)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        and e.activity_task_completed_event_attributes.scheduled_event_id in ranking
    ]
    seen = max(
        (i for i, e in enumerate(events) if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), default=-1
    )
    return sum(1 for i in done if i < seen)


async def test_the_steps_read_while_the_plan_waits_and_an_edit_rereads_only_the_steps_it_changed(
    temporal_client, task_queue, worker, llm, script, pages
):
    """Each research step starts from the passages read during the review;
    the scripted researcher still searches and crawls the page it finds,
    and that page answers with a note, not its passages again."""
    script.steps = [(STEP, "research"), ("Compute the sum of squares", "processing")]
    handle = await start(temporal_client, task_queue, QUESTION, enable_background_investigation=False)
    await wait_for_phase(handle, "awaiting_review", plan_version=1)
    assert await polled(lambda: read(handle), lambda n: n == 1) == 1  # read before anyone reviewed
    await handle.execute_update("submit_review", "[EDIT_PLAN] add the keeper's name", result_type=str)
    await wait_for_phase(handle, "awaiting_review", plan_version=2)
    assert await polled(lambda: read(handle), lambda n: n == 2) == 2
    assert await ranked(handle) == 2  # only the step the edit added
    await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)
    result = await finished(handle)
    await keep_history(handle, "evidence_gathered_ahead")
    assert await ranked(handle) == 2 and pages.hits.count("/lighthouse") == 1
    calls = llm.calls("researcher")
    assert len(calls) == 6 and all(FACT in first_user_text(r) for r in calls)  # each step from its passages
    crawled = [answer for r in calls for answer in crawl_answers(r)]
    assert len(crawled) == 2 and all("already shown above" in c and FACT not in c for c in crawled)
    assert all(FACT in findings for findings in result.observations[:2]) and FACT in result.final_report
