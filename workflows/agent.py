"""The agent loop (ReAct) of the researcher, coder and analyst, as workflow code.

The model calls tools until it answers without one, or until its turns run
out and it must answer without tools. Every model call and every tool call is
its own activity (``workflows/activity_calls.py``); conversations travel as
blob references (``ModelReply.history``), so workflow history grows with new
content only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from temporalio import workflow

from workflows.activity_calls import ActivityCalls
from workflows.reply_checks import agent_answer

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.model_output import read_arguments, text_argument
    from workflows.models import Message, ModelRequest, ToolCall
    from workflows.state import AgentCheckpoint
    from workflows.tool_models import READER_TOOLS, CodeRequest, ToolResult

if TYPE_CHECKING:
    from workflows.evidence_ahead import Later

AGENT_TOOLS = {
    "researcher": ["web_search", "crawl", "read_page", "find_in_page"],
    "coder": ["run_python", "read_page", "find_in_page"],
    "analyst": [],
}
MCP_PREFIX = "mcp__"  # tool calls named mcp__<server>__<tool> go to mcp_call_tool
MAX_CALLS_PER_TURN = 16  # more in one turn are answered with an error, not run
MAX_CODE_CHARS = 100_000


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
    *,
    out_of_budget: Callable[[], bool] = lambda: False,
    resume: AgentCheckpoint | None = None,
    where: str = "",
    evidence: str | None = None,
    evidence_tokens: int | None = None,
    later: Later | None = None,
    guidance: Callable[[int, str], Awaitable[tuple[list[Message], int]]] | None = None,
    told: int = 0,
) -> Finished | AgentCheckpoint:
    """A ReAct loop: the model calls tools (``names``) until it answers without
    one, or until ``max_turns`` model calls, after which it must answer
    without tools. ``evidence`` (a blob of passages the step gathered) comes
    with the task in the first message, at most ``evidence_tokens`` of it;
    ``later``: passages still being gathered, given after the first turn
    whose tools ran once they are there (workflows/evidence_ahead.py).

    Returns the findings, or a checkpoint when the server suggests
    continue-as-new between two turns (the next run resumes from it). Once
    the token budget is spent no new turn starts. ``guidance``: the notes the
    user sent since the agent was ``told`` (workflows/steering.py), for its next message."""
    first = Message(role="user", content=task, blob=evidence, budget=evidence_tokens if evidence else None)
    checkpoint = resume or AgentCheckpoint(messages=[first], steers_seen=told)
    history, messages, told = checkpoint.history, list(checkpoint.messages), checkpoint.steers_seen
    cells = Cells(list(checkpoint.cells), list(checkpoint.cell_refs))
    mcp = await calls.mcp_tools(role)  # MCP tool schemas, listed once per run
    allowed = names + [t["function"]["name"] for t in mcp]
    paused = False

    def turn_request(history: str | None, messages: list[Message]) -> ModelRequest:
        return ModelRequest(
            role=role,
            prompt=role,
            variables=variables,
            history=history,
            messages=messages,
            tools=names,
            extra_tools=mcp,
        )

    try:
        for turn in range(checkpoint.turns, max_turns):
            if turn > checkpoint.turns and _should_pause():
                paused = True
                messages += await later.due() if later else []
                return AgentCheckpoint(
                    history=history, messages=messages, turns=turn, steers_seen=told, **cells.saved()
                )
            if out_of_budget():
                if turn == 0:
                    return Finished("(not researched: the run's token budget was spent before this step began)")
                break  # answer from what was gathered
            if guidance:  # between two turns: notes the user sent since
                added, told = await guidance(told, f"{where or role}, turn {turn + 1}")
                messages = messages + added
            request = turn_request(history, messages)
            reply = await calls.chat(request, where)
            history = reply.history
            # Every call gets an answer (an unknown tool gets an error), so
            # the conversation stays valid for the provider.
            wanted = reply.tool_calls
            if not wanted or not (workflow.patched("answer-unknown-tools") or _known(wanted, allowed)):
                if later and (again := await later.again(task, history, turn > 0, reply.content or "")):
                    history, messages = again  # it answered before it saw the step's passages
                    continue
                return Finished(*await agent_answer(calls, request, reply, where))
            results = await _run_tools(calls, wanted, session, cells, allowed, role, where or role)
            messages = [tool_message(c, r) for c, r in zip(wanted, results)] + (later.ready(results) if later else [])
        messages += await later.due() if later else []
        messages.append(Message(role="user", content=FINAL_TURN))
        final = turn_request(history, messages).model_copy(update={"tool_choice": "none"})
        reply = await calls.chat(final, f"{where} · final answer" if where else "")
        return Finished(*await agent_answer(calls, final, reply, where))
    finally:
        # A paused step keeps its sandbox session; an ended (or cancelled)
        # one closes it, also when no cell ran without error.
        if not paused and (cells.any() or (cells.tried and workflow.patched("close-sandbox-always"))):
            await calls.close_sandbox(session)


@dataclass(frozen=True)
class Finished:
    """An agent's answer, and its whole conversation (a blob reference)."""

    text: str
    history: str | None = None


def _should_pause() -> bool:
    """Pause between turns when the server suggests continue-as-new (a step
    with many tool calls per turn would otherwise outgrow the history)."""
    return workflow.info().is_continue_as_new_suggested() and workflow.patched("continue-inside-steps")


def tool_message(call: ToolCall, result: ToolResult) -> Message:
    """A tool's answer, for the conversation: long bodies by reference."""
    source = result.source or (result.sources[0].url if result.blob and result.sources else None)
    return Message(
        role="tool",
        tool_call_id=call.id,
        content=result.content,
        blob=result.blob,
        part=result.part,
        query=result.query,
        source=source if result.blob else None,
    )


def _known(calls: list[ToolCall], names: list[str]) -> bool:
    return any(c.name in names for c in calls)


@dataclass
class Cells:
    """The code a step's sandbox session has run without error, for a worker
    that must rebuild the session: as blob references (new runs), or as the
    code itself (runs from before cells were stored as blobs)."""

    code: list[str]
    refs: list[str]
    tried: bool = False  # a cell ran in this run, with or without error

    def add(self, code: str, ref: str | None) -> None:
        if ref and not self.code:
            self.refs.append(ref)
        else:
            self.code.append(code)

    def any(self) -> bool:
        return bool(self.code or self.refs)

    def saved(self) -> dict[str, list[str]]:
        """For a paused agent's checkpoint."""
        return {"cells": self.code, "cell_refs": self.refs}


@dataclass(frozen=True)
class ToolAction:
    """What to do for one tool call: run a tool with its argument, or answer
    with an error the model can read."""

    tool: str  # "error", "mcp" or the tool's name
    argument: str = ""  # the error text, query, URL or code
    detail: str = ""  # read_page: the part; find_in_page: the query


ARGUMENT_OF = {"web_search": "query", "local_search": "query", "crawl": "url", "run_python": "code"}
ARGUMENT_LIMIT = {"query": 2_000, "url": 4_000, "code": MAX_CODE_CHARS}


def tool_action(call: ToolCall, names: list[str], position: int, limit: int) -> ToolAction:
    """The decision for the ``position``-th tool call of a turn in which at
    most ``limit`` calls run: a pure function that never raises."""
    if position >= limit:
        return ToolAction("error", f"only the first {limit} tool calls of a turn are run; call {call.name[:100]} again")
    if call.name not in names:
        return ToolAction("error", f"there is no tool {call.name[:100]!r}; use one of: {', '.join(names)}")
    if call.name.startswith(MCP_PREFIX):  # the MCP activity parses its own arguments
        return ToolAction("mcp")
    args, problem = read_arguments(call.arguments)
    if problem:
        return ToolAction("error", f"{call.name} was not run: {problem}")
    if call.name in READER_TOOLS:
        url = text_argument(args, "url", 4_000)
        if url is None:
            return ToolAction("error", f"{call.name} needs the page's 'url'")
        if call.name == "read_page":
            part = args.get("part", 1)
            if isinstance(part, str) and part.strip().isdigit():
                part = int(part)
            if isinstance(part, bool) or not isinstance(part, int) or part < 1:
                return ToolAction("error", "read_page needs 'part', a whole number from 1")
            return ToolAction("read_page", url.strip(), detail=str(min(part, 10_000)))
        query = text_argument(args, "query", 1_000)
        if query is None:
            return ToolAction("error", "find_in_page needs a non-empty 'query'")
        return ToolAction("find_in_page", url.strip(), detail=query)
    name = ARGUMENT_OF.get(call.name)
    if name is None:
        return ToolAction("error", f"{call.name} cannot be called here")
    value = text_argument(args, name, ARGUMENT_LIMIT[name])
    if value is None:
        return ToolAction("error", f"{call.name} needs a non-empty {name!r} argument (a string)")
    return ToolAction(call.name, value.strip() if name == "url" else value)


async def _run_tools(
    calls: ActivityCalls,
    wanted: list[ToolCall],
    session: str,
    cells: Cells,
    names: list[str],
    role: str,
    where: str,
) -> list[ToolResult]:
    """Searches and crawls of one turn run concurrently; code cells run in
    order, since they share the session's state. Every call gets exactly one
    answer."""
    limit = len(wanted)
    if len(wanted) > MAX_CALLS_PER_TURN and workflow.patched("bound-tool-calls"):
        limit = MAX_CALLS_PER_TURN

    async def one(position: int, call: ToolCall) -> ToolResult:
        action = tool_action(call, names, position, limit)
        if action.tool == "error":
            return ToolResult(error=True, content=f"Error: {action.argument}.")
        if action.tool == "mcp":
            return await calls.mcp_call(call, role, where)
        if action.tool in READER_TOOLS:
            return calls.read(
                action.argument,
                part=int(action.detail) if action.tool == "read_page" else None,
                query=action.detail if action.tool == "find_in_page" else None,
            )
        if action.tool == "web_search":
            return await calls.search(action.argument, where)
        if action.tool == "local_search":
            return await calls.local_search(action.argument, where)
        if action.tool == "crawl":
            return await calls.crawl(action.argument, where)
        code = CodeRequest(
            session=session, code=action.argument, previous=list(cells.code), previous_refs=list(cells.refs)
        )
        cells.tried = True
        result = await calls.run_python(code, where)
        if not result.error:
            cells.add(action.argument, result.cell)
        return result

    if any(c.name == "run_python" for c in wanted):
        return [await one(n, c) for n, c in enumerate(wanted)]
    return list(await asyncio.gather(*(one(n, c) for n, c in enumerate(wanted))))
