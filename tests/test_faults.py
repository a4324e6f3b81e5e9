"""Faults at the network boundary, with the real worker and dev server: the
model server rate-limits, errors, stalls and cuts responses short; the
search backend and crawl targets go down. Runs complete (or, for a bad key,
fail fast with one clear message) and nothing is retried that should not be.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.client import WorkflowFailureError

from testkit.faults import Override, RawLLM, attempts_of_first, closed_port, cut_off_response
from testkit.llm_server import Reply, tool_messages
from testkit.research_script import EXPECTED_SUM, FACT
from testkit.runs import keep_history, start
from workflows.models import RunStatus

QUESTION = "Tell me about Lantern Rock"
COMPUTED = f"SUM_OF_SQUARES={EXPECTED_SUM}"


@pytest.fixture
def llm():
    """Every request here carries its arrival time and activity id."""
    with RawLLM() as server:
        yield server


def researcher_after_tool(llm: RawLLM) -> dict:
    """The first researcher request that carries a tool result."""
    return next(r for r in llm.calls("researcher") if tool_messages(r))


def tool_result(request: dict, name: str) -> str | None:
    """The content of the tool message answering the first ``name`` call in ``request``."""
    ids = [
        c["id"]
        for m in request["messages"]
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == name
    ]
    return next((m["content"] for m in tool_messages(request) if ids and m.get("tool_call_id") == ids[0]), None)


def avoid_dns(script, url: str) -> None:
    """The scripted researcher crawls http://none.invalid/ when its search
    found no URL; send it to ``url`` (loopback) so no DNS query leaves the box."""
    normal = script.researcher

    def researcher(request: dict):
        reply = normal(request)
        if isinstance(reply, Reply) and reply.tool_calls == [("crawl", {"url": "http://none.invalid/"})]:
            return Reply(tool_calls=[("crawl", {"url": url})])
        return reply

    script.researcher = researcher


# --- the model server -----------------------------------------------------------


async def test_runs_complete_while_30_percent_of_model_calls_fail(temporal_client, task_queue, research_worker, llm):
    llm.fail_rate(0.3, statuses=(429, 500), seed=7)
    # 429s at random, whatever the pace: with the pace configured, the workers
    # learn none from them (activities/learnt_pace.py; tests/test_learnt_pace.py).
    async with research_worker(DEEPRESEARCH_MODEL_RPS="50"):
        handles = [await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True) for _ in range(3)]
        async with asyncio.timeout(150):
            results = await asyncio.gather(*(h.result() for h in handles))

    for result in results:
        assert result.status == "completed"
        assert FACT in result.final_report and COMPUTED in result.final_report
    errors = [r for r in llm.requests if r["_status"] == 500]
    limited = [r for r in llm.requests if r["_status"] == 429]
    assert errors and limited, "no model call failed both ways: the test proved nothing"
    assert {r["_status"] for r in llm.requests} <= {200, 429, 500}
    # A server error is retried by the same activity until it succeeds; a rate
    # limit ends the activity and the run waits, then calls again.
    succeeded = {r["_request_id"] for r in llm.requests if r["_status"] == 200}
    assert {r["_request_id"] for r in errors} <= succeeded | {r["_request_id"] for r in limited}
    assert not {r["_request_id"] for r in limited} & succeeded
    # Usage counts the calls that completed, once each, and every wait apart.
    assert sum(r.usage.llm_calls for r in results) == len(succeeded)
    assert sum(r.usage.rate_limited for r in results) == len(limited)


async def test_retry_after_is_honoured(temporal_client, task_queue, worker, llm):
    # A greeting: the run is one coordinator call, so timing is all the wait's.
    llm.fail_next(1, 429, retry_after=3)
    handle = await start(temporal_client, task_queue, "Hello there!")
    result = await handle.result()
    await keep_history(handle, "rate_limit_waited")
    assert result.status == "answered_directly"
    first, again = llm.calls("coordinator")
    assert (first["_status"], again["_status"]) == (429, 200)
    waited = again["_time"] - first["_time"]
    assert 2.9 <= waited < 8, f"called again {waited:.2f} s after a 429 with Retry-After: 3"
    assert (result.usage.rate_limited, result.usage.llm_calls) == (1, 1)
    assert result.usage.rate_limited_seconds >= 3

    # Control: without Retry-After the retry comes after the policy's 1 s.
    llm.requests.clear()
    llm.fail_next(1, 500)
    result = await (await start(temporal_client, task_queue, "Hello again")).result()
    assert result.status == "answered_directly"
    first, retry = attempts_of_first(llm, "coordinator")
    assert retry["_time"] - first["_time"] < 2.5


async def test_bad_api_key_fails_the_run_fast_with_one_clear_message(temporal_client, task_queue, research_worker, llm):
    async with research_worker(OPENAI_API_KEY="sk-wrong-key-123"):
        began = time.monotonic()
        handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
        with pytest.raises(WorkflowFailureError) as failed:
            async with asyncio.timeout(30):
                await handle.result()
        elapsed = time.monotonic() - began
        status = await handle.query("status", result_type=RunStatus)

    assert elapsed < 10, f"a 401 took {elapsed:.1f} s to fail the run"
    cause = failed.value.cause
    assert cause.type == "ResearchFailed"
    assert "OPENAI_API_KEY" in cause.message and "401" in cause.message
    assert "sk-wrong-key-123" not in cause.message  # never echo the key
    assert len(llm.requests) == 1 and llm.requests[0]["_status"] == 401  # not retried
    assert status.phase == "failed" and status.error == cause.message


async def test_model_call_past_the_timeout_is_retried(temporal_client, task_queue, research_worker, llm, script):
    # The first planner call answers after 3 s; the client gives up after 1 s.
    llm.handler = Override(llm.handler, "planner", lambda request, normal: Reply(normal, delay=3))
    async with research_worker(DEEPRESEARCH_MODEL_TIMEOUT="1"):
        handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
        async with asyncio.timeout(60):
            result = await handle.result()
    assert result.status == "completed" and FACT in result.final_report
    attempts = attempts_of_first(llm, "planner")
    assert len(attempts) == 2, "the stalled call was not retried (or retried more than once)"
    assert len(llm.calls("planner")) == 2  # and the plan was not asked for again otherwise


async def test_truncated_json_body_is_retried(temporal_client, task_queue, worker, llm):
    llm.handler = Override(
        llm.handler, "researcher", lambda request, normal: Reply(body='{"id": "x", "choices": [{"mess')
    )
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    async with asyncio.timeout(60):
        result = await handle.result()
    assert result.status == "completed"
    assert FACT in result.final_report and COMPUTED in result.final_report
    assert len(attempts_of_first(llm, "researcher")) == 2


async def test_connection_dropped_mid_body_is_retried(temporal_client, task_queue, worker, llm):
    llm.raw_next("reporter", cut_off_response())
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    async with asyncio.timeout(60):
        result = await handle.result()
    assert result.status == "completed"
    assert FACT in result.final_report and COMPUTED in result.final_report
    assert len(llm.calls("reporter")) == 2


# --- tool backends ------------------------------------------------------------------


async def test_search_backend_down_gives_a_tool_error_and_the_run_goes_on(
    temporal_client, task_queue, worker, llm, tavily, script, pages
):
    tavily.fail_rate(1.0, statuses=(500,))
    avoid_dns(script, pages.url("/gone"))  # a 404: refused at once, no retries
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    async with asyncio.timeout(90):
        result = await handle.result()

    assert result.status == "completed"
    assert COMPUTED in result.final_report  # the coder's step did not need search
    # Searches that failed every attempt (background, the step's evidence, researcher) are no searches (issue 31).
    assert result.usage.searches == 0
    assert len(tavily.requests) >= 2 and all(r["_status"] == 500 for r in tavily.requests)
    told = tool_result(researcher_after_tool(llm), "web_search")
    assert told.startswith("Error:") and "web_search" in told
    # The planner saw that the background search failed, not a crash.
    assert "Error:" in llm.calls("planner")[0]["messages"][-1]["content"]
    assert pages.hits == ["/gone"]


@pytest.mark.parametrize("target", ["http_500", "closed_port"])
async def test_crawl_target_down_gives_a_tool_error_and_the_run_goes_on(
    target, temporal_client, task_queue, worker, llm, tavily, pages
):
    if target == "http_500":
        pages.add("/lighthouse", "<h1>Internal Server Error</h1>", status=500)
        url = pages.url("/lighthouse")
    else:
        url = f"http://127.0.0.1:{closed_port()}/lighthouse"
        tavily.handler = lambda query, n: [
            {"title": "Lantern Rock", "url": url, "content": "A lighthouse.", "score": 0.9}
        ]
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    async with asyncio.timeout(90):
        result = await handle.result()

    assert result.status == "completed"
    assert FACT not in result.final_report and COMPUTED in result.final_report
    crawl_result = next(filter(None, (tool_result(r, "crawl") for r in llm.calls("researcher"))))
    assert crawl_result.startswith("Error:") and url in crawl_result
    if target == "http_500":
        assert "500" in crawl_result
        assert 2 <= pages.hits.count("/lighthouse") <= 3  # retried as transient, then given up
    assert result.usage.crawls == 1
