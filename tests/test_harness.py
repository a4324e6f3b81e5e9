"""The scripted servers answer the real openai and tavily clients, and the dev
server fixture answers a real Temporal client."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from openai import AsyncOpenAI
from tavily import AsyncTavilyClient
from tavily.errors import InvalidAPIKeyError

from testkit.llm_server import (
    Reply,
    ScriptedLLM,
    all_text,
    has_tool_result,
    last_user,
    role_of,
    tool_messages,
    tool_names,
)
from testkit.search_server import ScriptedTavily

PLANNER = {"role": "system", "content": "You are the planner of a deep-research team.\nPlan well."}
TOOLS = [{"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}]


def openai_client(llm: ScriptedLLM, api_key: str = "test-openai-key") -> AsyncOpenAI:
    return AsyncOpenAI(base_url=llm.base_url, api_key=api_key, max_retries=0)


async def test_content_tool_calls_and_usage(llm: ScriptedLLM):
    def handler(request: dict) -> Reply:
        if has_tool_result(request, "web_search"):
            return Reply("done: " + tool_messages(request)[0]["content"])
        return Reply("searching", tool_calls=[("web_search", {"query": last_user(request)})])

    llm.handler = handler
    client = openai_client(llm)
    messages = [PLANNER, {"role": "user", "content": "tides"}]
    first = await client.chat.completions.create(model="m1", messages=messages, tools=TOOLS)
    message = first.choices[0].message
    assert first.model == "m1" and first.choices[0].finish_reason == "tool_calls"
    assert message.content == "searching"
    [call] = message.tool_calls
    assert call.id.startswith("call_") and call.function.name == "web_search"
    assert json.loads(call.function.arguments) == {"query": "tides"}
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0

    messages.append(message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "moon"})
    second = await client.chat.completions.create(model="m1", messages=messages)
    assert second.choices[0].message.content == "done: moon"
    assert second.choices[0].finish_reason == "stop"

    assert [r["_role"] for r in llm.calls()] == ["planner", "planner"]
    assert len(llm.calls("planner")) == 2 and llm.calls("reporter") == []
    assert [r["_status"] for r in llm.requests] == [200, 200]
    assert tool_names(llm.requests[0]) == ["web_search"] and "moon" in all_text(llm.requests[1])
    assert not llm.errors


def test_role_of():
    def request(first_line: str) -> dict:
        return {"messages": [{"role": "system", "content": first_line + "\nThe coder helps."}]}

    assert role_of(request("You are the researcher of a team.")) == "researcher"
    assert role_of(request("You are a helpful assistant.")) == "unknown"
    assert role_of({"messages": [{"role": "user", "content": "hi"}]}) == "unknown"


async def test_wrong_key_is_401(llm: ScriptedLLM):
    with pytest.raises(openai.AuthenticationError):
        await openai_client(llm, api_key="wrong").chat.completions.create(model="m", messages=[PLANNER])
    assert llm.requests[0]["_status"] == 401


async def test_injected_rate_limit_then_recovery(llm: ScriptedLLM):
    llm.fail_next(1, 429, retry_after=2)
    client = openai_client(llm)
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="m", messages=[PLANNER])
    assert caught.value.response.headers["Retry-After"] == "2"
    reply = await client.chat.completions.create(model="m", messages=[PLANNER])
    assert reply.choices[0].message.content == "ok"


async def test_fail_rate_is_seeded(llm: ScriptedLLM):
    llm.fail_rate(0.5, statuses=(500,), seed=1)
    client = openai_client(llm)
    outcomes = []
    for _ in range(10):
        try:
            await client.chat.completions.create(model="m", messages=[PLANNER])
            outcomes.append(200)
        except openai.InternalServerError:
            outcomes.append(500)
    assert outcomes == [r["_status"] for r in llm.requests] and 0 < outcomes.count(500) < 10


async def test_raw_body_and_scripted_error(llm: ScriptedLLM):
    client = openai_client(llm)
    llm.handler = lambda request: Reply(body='{"id": "x", "choi')
    with pytest.raises(json.JSONDecodeError):
        await client.chat.completions.create(model="m", messages=[PLANNER])
    llm.handler = lambda request: Reply("too long", status=400)
    with pytest.raises(openai.BadRequestError, match="too long"):
        await client.chat.completions.create(model="m", messages=[PLANNER])


async def test_streaming(llm: ScriptedLLM):
    llm.handler = lambda request: Reply("a streamed reply that spans chunks", tool_calls=[("f", {"x": 1})])
    stream = await openai_client(llm).chat.completions.create(
        model="m", messages=[PLANNER], stream=True, stream_options={"include_usage": True}
    )
    content, calls, usage = "", {}, None
    async for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:  # in pieces, by index, as OpenAI sends them
                name, arguments = calls.get(call.index, ("", ""))
                calls[call.index] = (name + (call.function.name or ""), arguments + (call.function.arguments or ""))
    assert content == "a streamed reply that spans chunks"
    assert [(name, json.loads(arguments)) for name, arguments in calls.values()] == [("f", {"x": 1})]
    assert usage.completion_tokens > 0


async def test_tavily_search(tavily: ScriptedTavily):
    tavily.handler = lambda query, n: [
        {"title": f"{query} {i}", "url": f"http://127.0.0.1/{i}", "content": "text", "score": 0.5} for i in range(5)
    ]
    async with AsyncTavilyClient(api_key="test-tavily-key", api_base_url=tavily.base_url) as client:
        response = await client.search("q", max_results=2)
    assert [r["title"] for r in response["results"]] == ["q 0", "q 1"]
    assert response["query"] == "q" and response["images"] == []
    assert tavily.requests[0]["query"] == "q" and tavily.requests[0]["max_results"] == 2


async def test_tavily_wrong_key_and_faults(tavily: ScriptedTavily):
    async with AsyncTavilyClient(api_key="wrong", api_base_url=tavily.base_url) as client:
        with pytest.raises(InvalidAPIKeyError):
            await client.search("q")
    tavily.fail_next(1, 500)
    async with AsyncTavilyClient(api_key="test-tavily-key", api_base_url=tavily.base_url) as client:
        with pytest.raises(httpx.HTTPStatusError):
            await client.search("q")
        assert (await client.search("q"))["results"] == []
    assert [r["_status"] for r in tavily.requests] == [401, 500, 200]


async def test_dev_server_answers(temporal_client, worker_env: dict[str, str], dev_server):
    assert (await temporal_client.count_workflows()).count >= 0
    assert worker_env["TEMPORAL_ADDRESS"] == dev_server.address
    assert worker_env["OPENAI_BASE_URL"].endswith("/v1")
