"""Agent loops and tool calls, as workflow code.

Every model call and every tool call is its own activity, so a crash loses at
most the call in flight. Conversations travel as blob references
(``ModelReply.history``), so workflow history grows with new content only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.models import (
        Citation,
        CodeRequest,
        CrawlRequest,
        IndexRequest,
        LocalSearchRequest,
        McpCallRequest,
        Message,
        ModelReply,
        ModelRequest,
        SearchRequest,
        ToolCall,
        ToolResult,
        Usage,
    )

# --- activity options: explicit timeouts and retries for every call ----------

MODEL_CALL = dict(
    start_to_close_timeout=timedelta(minutes=30),  # above DEEPRESEARCH_MODEL_TIMEOUT
    heartbeat_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=12,
        non_retryable_error_types=["ModelAuthError", "ModelRequestError"],
    ),
)
TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=20), maximum_attempts=3
)
TOOL_CALL = {
    "web_search": dict(
        start_to_close_timeout=timedelta(seconds=45),
        heartbeat_timeout=timedelta(seconds=10),
        retry_policy=TOOL_RETRY,
    ),
    "crawl": dict(
        start_to_close_timeout=timedelta(seconds=90),
        heartbeat_timeout=timedelta(seconds=10),
        retry_policy=TOOL_RETRY,
    ),
    "run_python": dict(
        start_to_close_timeout=timedelta(minutes=5),
        heartbeat_timeout=timedelta(seconds=10),
        retry_policy=RetryPolicy(maximum_attempts=2),
    ),
    "local_search": dict(start_to_close_timeout=timedelta(seconds=30), retry_policy=TOOL_RETRY),
    "index_resources": dict(
        start_to_close_timeout=timedelta(minutes=30),
        heartbeat_timeout=timedelta(seconds=60),
        retry_policy=TOOL_RETRY,
    ),
    # MCP servers: one session per call, bounded by the server's configured
    # timeout (at most 600 s, activities/mcp_tools.py MAX_TIMEOUT).
    "mcp_list_tools": dict(
        start_to_close_timeout=timedelta(minutes=11),
        heartbeat_timeout=timedelta(seconds=10),
        retry_policy=TOOL_RETRY,
    ),
    "mcp_call_tool": dict(
        start_to_close_timeout=timedelta(minutes=11),
        heartbeat_timeout=timedelta(seconds=10),
        retry_policy=TOOL_RETRY,
    ),
    "close_sandbox": dict(start_to_close_timeout=timedelta(seconds=30), retry_policy=RetryPolicy(maximum_attempts=2)),
}

AGENT_TOOLS = {"researcher": ["web_search", "crawl"], "coder": ["run_python"], "analyst": []}
MCP_AGENTS = ("researcher", "coder")  # the agents MCP servers can serve
MCP_PREFIX = "mcp__"  # tool calls named mcp__<server>__<tool> go to mcp_call_tool


def agent_tools(role: str, has_resources: bool) -> list[str]:
    """The researcher also searches the user's documents when there are any."""
    extra = ["local_search"] if role == "researcher" and has_resources else []
    return extra + AGENT_TOOLS[role]


FINAL_TURN = (
    "You have used all the tool calls allowed for this step. Do not call any more tools: "
    "write your final answer now from what you have gathered."
)


def failure_reason(err: BaseException) -> str:
    """The message of the error the activity raised (ours, e.g. "set
    OPENAI_API_KEY"), not of the library error underneath it."""
    cause = err.__cause__ if isinstance(err, ActivityError) and err.__cause__ else err
    return str(getattr(cause, "message", None) or cause)


class Tools:
    """Runs model and tool calls for one research run, keeping its usage
    counters, the sources it retrieved and a per-run crawl cache."""

    def __init__(
        self,
        usage: Usage,
        max_search_results: int,
        run_key: str,
        on_tool: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.usage = usage
        self.max_search_results = max_search_results
        self.run_key = run_key  # names this run's local-document index
        self.on_tool = on_tool  # told "tool: argument" before each tool call
        self.sources: dict[str, Citation] = {}
        self.crawled: dict[str, ToolResult] = {}  # per-run crawl cache
        self._crawling: dict[str, asyncio.Task[ToolResult]] = {}
        self._mcp: dict[str, asyncio.Task[list[dict]]] = {}  # MCP tool schemas by agent

    async def chat(self, request: ModelRequest) -> ModelReply:
        reply = await workflow.execute_activity("chat", request, result_type=ModelReply, **MODEL_CALL)
        self.usage.llm_calls += 1
        self.usage.prompt_tokens += reply.prompt_tokens
        self.usage.completion_tokens += reply.completion_tokens
        return reply

    async def search(self, query: str) -> ToolResult:
        self.usage.searches += 1
        self.on_tool(f"web_search: {query}")
        request = SearchRequest(query=query, max_results=self.max_search_results)
        return await self._tool("web_search", request)

    async def index_resources(self, paths: list[str]) -> str:
        """Index the user's documents for local_search; returns a summary."""
        self.on_tool(f"index_resources: {len(paths)} path(s)")
        request = IndexRequest(run_key=self.run_key, paths=paths)
        try:
            return await workflow.execute_activity(
                "index_resources", request, result_type=str, **TOOL_CALL["index_resources"]
            )
        except ActivityError as err:
            return f"The local documents could not be indexed: {failure_reason(err)}"

    async def local_search(self, query: str) -> ToolResult:
        self.usage.searches += 1
        self.on_tool(f"local_search: {query}")
        request = LocalSearchRequest(run_key=self.run_key, query=query, max_results=self.max_search_results)
        return await self._tool("local_search", request)

    async def crawl(self, url: str) -> ToolResult:
        if url in self.crawled:  # the same URL is fetched once per run
            return self.crawled[url]
        if url not in self._crawling:  # and parallel steps share one fetch
            self.usage.crawls += 1
            self.on_tool(f"crawl: {url}")
            self._crawling[url] = asyncio.create_task(self._tool("crawl", CrawlRequest(url=url)))
        result = self.crawled[url] = await self._crawling[url]
        self._crawling.pop(url, None)
        return result

    async def run_python(self, request: CodeRequest) -> ToolResult:
        self.usage.code_runs += 1
        self.on_tool(f"run_python: {request.code.strip().splitlines()[0][:80]}")
        return await self._tool("run_python", request)

    async def mcp_tools(self, role: str) -> list[dict]:
        """The MCP tool schemas ``role`` may use, listed once per run (parallel
        steps share the listing). No MCP servers, or none working: []."""
        if role not in MCP_AGENTS or not workflow.patched("mcp-tools"):
            return []
        if role not in self._mcp:
            self._mcp[role] = asyncio.create_task(self._list_mcp_tools(role))
        return await self._mcp[role]

    async def _list_mcp_tools(self, role: str) -> list[dict]:
        try:
            return await workflow.execute_activity(
                "mcp_list_tools", role, result_type=list[dict], **TOOL_CALL["mcp_list_tools"]
            )
        except ActivityError as err:
            self.on_tool(f"MCP tools unavailable: {failure_reason(err)}")
            return []

    async def mcp_call(self, call: ToolCall, role: str) -> ToolResult:
        self.on_tool(f"{call.name}: {call.arguments[:80]}")
        request = McpCallRequest(name=call.name, arguments_json=call.arguments, agent=role)
        return await self._tool("mcp_call_tool", request)

    async def close_sandbox(self, session: str) -> None:
        try:
            await workflow.execute_activity("close_sandbox", session, **TOOL_CALL["close_sandbox"])
        except ActivityError:
            pass  # the worker's idle reaper closes it anyway

    async def _tool(self, name: str, request: object) -> ToolResult:
        """A failed tool call becomes a readable error for the agent."""
        try:
            result = await workflow.execute_activity(name, request, result_type=ToolResult, **TOOL_CALL[name])
        except ActivityError as err:
            return ToolResult(error=True, content=f"Error: {name} failed: {failure_reason(err)}")
        for source in result.sources:
            self.sources.setdefault(source.url, source)
        return result


async def run_agent(
    tools: Tools,
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
    mcp = await tools.mcp_tools(role)  # MCP tool schemas, listed once per run
    allowed = names + [t["function"]["name"] for t in mcp]
    cells: list[str] = []  # code this step's sandbox session has run
    try:
        for _ in range(max_turns):
            reply = await tools.chat(
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
            calls = reply.tool_calls
            if not calls or not (workflow.patched("answer-unknown-tools") or _known(calls, allowed)):
                return reply.content or "(no findings)"
            results = await _run_calls(tools, calls, session, cells, allowed, role)
            messages = [
                Message(role="tool", tool_call_id=c.id, content=r.content, blob=r.blob) for c, r in zip(calls, results)
            ]
        messages.append(Message(role="user", content=FINAL_TURN))
        reply = await tools.chat(
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
            await tools.close_sandbox(session)


def _known(calls: list[ToolCall], names: list[str]) -> bool:
    return any(c.name in names for c in calls)


async def _run_calls(
    tools: Tools, calls: list[ToolCall], session: str, cells: list[str], names: list[str], role: str
) -> list[ToolResult]:
    """Searches and crawls of one turn run concurrently; code cells run in
    order, since they share the session's state."""

    async def one(call: ToolCall) -> ToolResult:
        if call.name not in names:
            return ToolResult(
                error=True, content=f"Error: there is no tool {call.name!r}; use one of: {', '.join(names)}."
            )
        if call.name.startswith(MCP_PREFIX):  # the MCP activity parses its own arguments
            return await tools.mcp_call(call, role)
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError:
            return ToolResult(error=True, content=f"Error: the arguments of {call.name} are not valid JSON.")
        if not isinstance(args, dict):
            args = {}
        if call.name == "web_search" and args.get("query"):
            return await tools.search(str(args["query"]))
        if call.name == "local_search" and args.get("query"):
            return await tools.local_search(str(args["query"]))
        if call.name == "crawl" and args.get("url"):
            return await tools.crawl(str(args["url"]))
        if call.name == "run_python" and args.get("code"):
            code = str(args["code"])
            result = await tools.run_python(CodeRequest(session=session, code=code, previous=list(cells)))
            if not result.error:
                cells.append(code)
            return result
        return ToolResult(error=True, content=f"Error: {call.name} is missing its argument.")

    if any(c.name == "run_python" for c in calls):
        return [await one(c) for c in calls]
    return list(await asyncio.gather(*(one(c) for c in calls)))
