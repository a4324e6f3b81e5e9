"""The agent loop (ReAct) of the researcher, coder and analyst, as workflow code.

The model calls tools until it answers without one, or until its turns run
out and it must answer without tools. Every model call and every tool call is
its own activity (``workflows/activity_calls.py``); conversations travel as
blob references (``ModelReply.history``), so workflow history grows with new
content only.
"""

from __future__ import annotations

import asyncio
import json

from temporalio import workflow

from workflows.activity_calls import ActivityCalls

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.models import CodeRequest, Message, ModelRequest, ToolCall, ToolResult

AGENT_TOOLS = {"researcher": ["web_search", "crawl"], "coder": ["run_python"], "analyst": []}
MCP_PREFIX = "mcp__"  # tool calls named mcp__<server>__<tool> go to mcp_call_tool


def agent_tools(role: str, has_resources: bool) -> list[str]:
    """The researcher also searches the user's documents when there are any."""
    extra = ["local_search"] if role == "researcher" and has_resources else []
    return extra + AGENT_TOOLS[role]


FINAL_TURN = (
    "You have used all the tool calls allowed for this step. Do not call any more tools: "
    "write your final answer now from what you have gathered."
)


async def run_agent(
    calls: ActivityCalls,
    role: str,
    task: str,
    variables: dict,
    max_turns: int,
    session: str,
    names: list[str],
) -> str:
    """A ReAct loop: the model calls tools (``names``) until it answers without
    one, or until ``max_turns`` model calls, after which it must answer
    without tools."""
    messages = [Message(role="user", content=task)]
    history: str | None = None
    mcp = await calls.mcp_tools(role)  # MCP tool schemas, listed once per run
    allowed = names + [t["function"]["name"] for t in mcp]
    cells: list[str] = []  # code this step's sandbox session has run
    try:
        for _ in range(max_turns):
            reply = await calls.chat(
                ModelRequest(
                    role=role,
                    prompt=role,
                    variables=variables,
                    history=history,
                    messages=messages,
                    tools=names,
                    extra_tools=mcp,
                )
            )
            history = reply.history
            # Every call gets an answer (an unknown tool gets an error), so
            # the conversation stays valid for the provider.
            wanted = reply.tool_calls
            if not wanted or not (workflow.patched("answer-unknown-tools") or _known(wanted, allowed)):
                return reply.content or "(no findings)"
            results = await _run_tools(calls, wanted, session, cells, allowed, role)
            messages = [
                Message(role="tool", tool_call_id=c.id, content=r.content, blob=r.blob) for c, r in zip(wanted, results)
            ]
        messages.append(Message(role="user", content=FINAL_TURN))
        reply = await calls.chat(
            ModelRequest(
                role=role,
                prompt=role,
                variables=variables,
                history=history,
                messages=messages,
                tools=names,
                extra_tools=mcp,
                tool_choice="none",
            )
        )
        return reply.content or "(no findings)"
    finally:
        if cells:
            await calls.close_sandbox(session)


def _known(calls: list[ToolCall], names: list[str]) -> bool:
    return any(c.name in names for c in calls)


async def _run_tools(
    calls: ActivityCalls, wanted: list[ToolCall], session: str, cells: list[str], names: list[str], role: str
) -> list[ToolResult]:
    """Searches and crawls of one turn run concurrently; code cells run in
    order, since they share the session's state."""

    async def one(call: ToolCall) -> ToolResult:
        if call.name not in names:
            return ToolResult(
                error=True, content=f"Error: there is no tool {call.name!r}; use one of: {', '.join(names)}."
            )
        if call.name.startswith(MCP_PREFIX):  # the MCP activity parses its own arguments
            return await calls.mcp_call(call, role)
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError:
            return ToolResult(error=True, content=f"Error: the arguments of {call.name} are not valid JSON.")
        if not isinstance(args, dict):
            args = {}
        if call.name == "web_search" and args.get("query"):
            return await calls.search(str(args["query"]))
        if call.name == "local_search" and args.get("query"):
            return await calls.local_search(str(args["query"]))
        if call.name == "crawl" and args.get("url"):
            return await calls.crawl(str(args["url"]))
        if call.name == "run_python" and args.get("code"):
            code = str(args["code"])
            result = await calls.run_python(CodeRequest(session=session, code=code, previous=list(cells)))
            if not result.error:
                cells.append(code)
            return result
        return ToolResult(error=True, content=f"Error: {call.name} is missing its argument.")

    if any(c.name == "run_python" for c in wanted):
        return [await one(c) for c in wanted]
    return list(await asyncio.gather(*(one(c) for c in wanted)))
