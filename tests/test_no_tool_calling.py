"""Models without tool calling (DEEPRESEARCH_TOOL_CALLING=json): tools are
described in the prompt and called with a JSON reply; a whole run completes
against a scripted model that rejects the `tools` parameter."""

from __future__ import annotations

import json
import re

from activities import text_tools
from testkit.llm_server import Reply
from testkit.research_script import EXPECTED_SUM, FACT
from testkit.runs import start


def without_tool_support(script, refuse_tools: bool = True):
    """Serve `script` as a model that has no tool calling: the request is
    translated back to the native shape for the script, and the script's tool
    calls are sent as JSON text. ``refuse_tools``: a request with native
    tools is refused (else the script answers it natively)."""

    def handler(request: dict):
        if "tools" in request:
            return (
                Reply(status=400, content="tools are not supported by this model") if refuse_tools else script(request)
            )
        names = re.findall(r"^- `(\w+)\(", request["messages"][0]["content"], re.MULTILINE)
        messages = []
        for m in request["messages"]:
            content = m.get("content") or ""
            if m["role"] == "assistant" and content.startswith('{"tool_calls"'):
                calls = json.loads(content)["tool_calls"]
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"c{i}",
                                "type": "function",
                                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                            }
                            for i, c in enumerate(calls)
                        ],
                    }
                )
            elif m["role"] == "user" and content.startswith(text_tools.RESULT_PREFIX):
                messages.append({"role": "tool", "content": content.split("\n", 1)[1]})
            else:
                messages.append(m)
        native = {
            **request,
            "messages": messages,
            "tools": [{"type": "function", "function": {"name": n}} for n in names],
        }
        reply = script(native)
        if isinstance(reply, Reply) and reply.tool_calls:
            calls = [{"name": name, "arguments": args} for name, args in reply.tool_calls]
            return Reply(content="```json\n" + json.dumps({"tool_calls": calls}) + "\n```")
        return reply

    return handler


def test_parse_reply_reads_calls_and_leaves_text_alone():
    content, calls = text_tools.parse_reply(
        '{"tool_calls": [{"name": "crawl", "arguments": {"url": "u"}}, {"name": "rm"}]}', ["crawl"]
    )
    assert content == "" and [(c.name, json.loads(c.arguments)) for c in calls] == [("crawl", {"url": "u"})]
    assert text_tools.parse_reply("The answer is 42.", ["crawl"]) == ("The answer is 42.", [])
    # a query written HTML-escaped is searched as the characters it means (issue 31)
    _, (call,) = text_tools.parse_reply(
        '{"tool_calls": [{"name": "web_search", "arguments": {"query": "Rock&#39;s"}}]}', ["web_search"]
    )
    assert json.loads(call.arguments) == {"query": "Rock's"}


async def test_run_completes_with_a_model_without_tool_calling(
    temporal_client, task_queue, research_worker, llm, script, pages
):
    llm.handler = without_tool_support(script)
    async with research_worker(DEEPRESEARCH_TOOL_CALLING="json"):
        handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
        result = await handle.result()
    assert result.status == "completed"
    assert FACT in result.final_report and f"SUM_OF_SQUARES={EXPECTED_SUM}" in result.final_report
    assert all("tools" not in r for r in llm.requests)
    assert (result.usage.crawls, result.usage.code_runs) == (1, 1)
    # Issue 31: the planner's answer is JSON whatever the tool calling; in this
    # mode its request once lost response_format (15 of 16 real plans broke).
    planner = llm.calls("planner")
    assert planner and all(r.get("response_format") == {"type": "json_object"} for r in planner)
    assert all("response_format" not in r for r in llm.calls("researcher") + llm.calls("reporter"))


def test_a_json_answer_with_text_tools_is_asked_for_as_json():
    """A request in JSON mode that may also call tools (as text): both the
    call and the answer are JSON objects, and the prompt says which is which."""
    schema = {"type": "function", "function": {"name": "web_search", "description": "Search.", "parameters": {}}}
    said = text_tools.instruction([schema], True, json_answer=True)
    assert '{"tool_calls": [' in said and "plain text" not in said
    assert 'the JSON object your instructions ask for, without a "tool_calls" key' in said
    assert "plain text" not in text_tools.instruction([schema], False, json_answer=True)
    plan = '{"title": "Tides", "steps": [{"title": "tool_calls of the past", "description": "d"}]}'
    assert text_tools.parse_reply(plan, ["web_search"]) == (plan, [])  # an answer, not a call
