"""Every activity the research workflow calls, with its options.

``ActivityCalls`` issues the model and tool calls of one run, as workflow
code: each call is its own activity with an explicit timeout and retry
policy, so a crash loses at most the call in flight. It counts usage, keeps
the sources the run retrieved and a per-run crawl cache, all in the run's
state (``workflows.state.RunState``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

from workflows.rate_limits import ProviderWaits, model_queue

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.models import Message, ModelReply, ModelRequest, ToolCall
    from workflows.state import RunState
    from workflows.tool_models import (
        CodeRequest,
        CrawlRequest,
        IndexRequest,
        LocalSearchRequest,
        McpCallRequest,
        SearchRequest,
        ToolResult,
    )

T = TypeVar("T")

MODEL_CALL = dict(
    # A streamed call times out on silence (DEEPRESEARCH_MODEL_IDLE_TIMEOUT) and
    # is bounded in tokens; this only bounds a very slow model's longest reply.
    start_to_close_timeout=timedelta(minutes=60),
    heartbeat_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=12,
        non_retryable_error_types=["ModelAuthError", "ModelRequestError"],
    ),
)
# A model call that times out, loops, is refused as too long though it fits
# the window, or answers with an event too large to read, is tried at most this often: the model
# activity gives up then (activities/llm.py); the retry policy's attempts are
# for a provider that is down or busy. The retry line names this bound for them.
BOUNDED_MODEL_ATTEMPTS = 3
BOUNDED_MODEL_ERRORS = ("ModelTimeout", "ModelRepetition", "ModelWindowMismatch", "ModelAnswerTooLarge")
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
        heartbeat_timeout=timedelta(seconds=30),
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
    # timeout (at most 600 s, activities/mcp/config.py MAX_TIMEOUT).
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
# Ranking and picking passages of pages already read (activities/evidence.py):
# local work on blobs, a few seconds on megabytes of pages; a worker does a few
# at once, so under a burst one may wait its turn for minutes (heartbeating:
# a dead worker is seen within the heartbeat timeout, not after 10 minutes).
EVIDENCE_CALL = dict(
    start_to_close_timeout=timedelta(minutes=10), heartbeat_timeout=timedelta(seconds=30), retry_policy=TOOL_RETRY
)


def summary(text: str) -> str:
    """An activity's one-line summary in the Temporal UI, e.g.
    ``researcher · step 2 · web_search: "heat pumps"``."""
    line = " ".join(text.split())
    return line if len(line) <= 160 else line[:159] + "…"


def failure_reason(err: BaseException) -> str:
    """The message of the error the activity raised (ours, e.g. "set
    OPENAI_API_KEY"), not of the library error underneath it."""
    cause = err.__cause__ if isinstance(err, ActivityError) and err.__cause__ else err
    return str(getattr(cause, "message", None) or cause)


def too_large(err: ActivityError) -> tuple[int, int, int | None] | None:
    """(tokens, budget, window) when the model activity refused a request as
    too large for the context window (``RequestTooLarge``), else None. The
    window is None when not given; tokens and budget that do not read give
    (2, 1): too large, by an unknown amount."""
    cause = err.cause
    if not (isinstance(cause, ApplicationError) and cause.type == "RequestTooLarge"):
        return None
    details = list(cause.details or ())
    window = details[2] if len(details) == 3 and isinstance(details[2], int) and details[2] > 0 else None
    if len(details) < 2 or not all(isinstance(d, int) and d > 0 for d in details[:2]):
        return 2, 1, window
    return details[0], details[1], window


EMPTY_REPLY = "Your reply was empty. Please answer now."
MCP_AGENTS = ("researcher", "coder")  # the agents MCP servers can serve
# Tool activities one run has in flight at most (the server allows 2,000 per
# workflow; parallel steps times tool calls per turn stay far below this).
MAX_TOOLS_IN_FLIGHT = 32


class ActivityCalls:
    """Issues the model and tool calls of one research run, counting usage
    and keeping sources and crawled pages in the run's state."""

    def __init__(
        self,
        state: RunState,
        max_search_results: int,
        run_key: str,
        on_tool: Callable[[str], None] = lambda _: None,
        on_notice: Callable[[str], None] = lambda _: None,
        evidence_tokens: int | None = None,
    ) -> None:
        self.state = state
        self.evidence_tokens = evidence_tokens  # what one page may put into a prompt
        # Model calls wait out the provider's rate limit, counted in the usage.
        self.waits = ProviderWaits(lambda: self.state.usage, on_notice)
        self.max_search_results = max_search_results
        self.run_key = run_key  # names this run's local-document index
        self.on_tool = on_tool  # told "tool: argument" before each tool call
        self._crawling: dict[str, asyncio.Task[ToolResult]] = {}
        self._searching: dict[str, asyncio.Future[ToolResult]] = {}
        self._in_flight = asyncio.Semaphore(MAX_TOOLS_IN_FLIGHT)
        self._mcp: dict[str, asyncio.Task[list[dict]]] = {}  # MCP tool schemas by agent

    async def chat(self, request: ModelRequest, where: str = "") -> ModelReply:
        """A model call; ``where`` labels it in the Temporal UI (default: the
        role). A context window learned from the provider's refusal is used
        for the rest of the run."""
        role = request.serving_role
        if role in self.state.windows and request.context_window is None:
            request = request.model_copy(update={"context_window": self.state.windows[role]})
        if request.evidence_tokens is None and self.evidence_tokens:
            request = request.model_copy(update={"evidence_tokens": self.evidence_tokens})
        try:
            reply = await self.waits.call(
                "chat",
                request,
                result_type=ModelReply,
                summary=summary(where or request.role),
                options=MODEL_CALL,
                task_queue=model_queue,
            )
        except ActivityError as err:
            if (refused := too_large(err)) and refused[2] is not None:
                self._learn(role, refused[2])
            raise
        if reply.context_window:
            self._learn(role, reply.context_window)
        self.state.usage.llm_calls += 1
        self.state.usage.prompt_tokens += reply.prompt_tokens
        self.state.usage.completion_tokens += reply.completion_tokens
        return reply

    def _learn(self, role: str, window: int) -> None:
        self.state.windows[role] = min(window, self.state.windows.get(role, window))

    async def chat_said(self, request: ModelRequest, who: str, where: str = "") -> ModelReply:
        """A model call whose reply must say something (text or a tool call):
        an empty reply is asked again once, then the run fails clearly."""
        reply = await self.chat(request, where)
        if reply.content.strip() or reply.tool_calls or not workflow.patched("re-ask-empty-replies"):
            return reply
        again = request.model_copy(
            update={
                "history": reply.history,
                "messages": [Message(role="user", content=EMPTY_REPLY)],
            }
        )
        reply = await self.chat(again, f"{where or request.role} · asked again")
        if reply.content.strip() or reply.tool_calls:
            return reply
        raise ApplicationError(
            f"the {who} model returned an empty reply twice; check the model set for this role "
            f"(DEEPRESEARCH_MODEL_{request.role.upper()} or DEEPRESEARCH_MODEL)",
            type="EmptyModelReply",
            non_retryable=True,
        )

    async def search(self, query: str, where: str = "", results: int | None = None) -> ToolResult:
        """A web search for the run's ``max_search_results`` results (or
        ``results``); the same query twice in a run (parallel steps included)
        costs one search."""
        width = results or self.max_search_results
        key = " ".join(query.lower().split())
        key = key if width == self.max_search_results else f"{key} #{width}"  # a wider search is another one
        if (key in self.state.searched or key in self._searching) and workflow.patched("dedupe-searches"):
            self.state.usage.cache_hits += 1
            return self.state.searched.get(key) or await self._searching[key]
        self.on_tool(f"web_search: {query}")
        request = SearchRequest(query=query, max_results=width)
        # A future, not a task, for parallel steps asking the same: the
        # activity is scheduled right here, in the order it always was.
        shared = self._searching[key] = asyncio.get_running_loop().create_future()
        try:
            result = await self._tool("web_search", request, f"{where} · web_search: {query}")
            shared.set_result(result)
        except BaseException:  # only a cancelled run gets here: _tool answers failures
            shared.cancel()
            raise
        finally:
            self._searching.pop(key, None)
        if not result.error:  # a search that failed every attempt is no search (usage counts those that returned)
            self.state.usage.searches += 1
            self.state.searched[key] = result
        return result

    async def index_resources(self, paths: list[str]) -> str:
        """Index the user's documents for local_search; returns a summary."""
        self.on_tool(f"index_resources: {len(paths)} path(s)")
        request = IndexRequest(run_key=self.run_key, paths=paths)
        try:
            return await workflow.execute_activity(
                "index_resources",
                request,
                result_type=str,
                summary=summary(f"investigation · index_resources: {len(paths)} path(s)"),
                **TOOL_CALL["index_resources"],
            )
        except ActivityError as err:
            if is_cancelled_exception(err):
                raise
            return f"The local documents could not be indexed: {failure_reason(err)}"

    async def local_search(self, query: str, where: str = "") -> ToolResult:
        self.on_tool(f"local_search: {query}")
        request = LocalSearchRequest(run_key=self.run_key, query=query, max_results=self.max_search_results)
        result = await self._tool("local_search", request, f"{where} · local_search: {query}")
        self.state.usage.searches += 0 if result.error else 1
        return result

    async def crawl(self, url: str, where: str = "") -> ToolResult:
        if url in self.state.crawled:  # the same URL is fetched once per run
            self.state.usage.cache_hits += 1
            return self.state.crawled[url]
        if url not in self._crawling:  # and parallel steps share one fetch
            self.state.usage.crawls += 1
            self.on_tool(f"crawl: {url}")
            self._crawling[url] = asyncio.create_task(
                self._tool("crawl", CrawlRequest(url=url), f"{where} · crawl: {url}")
            )
        result = self.state.crawled[url] = await self._crawling[url]
        self._crawling.pop(url, None)
        return result

    async def evidence(self, name: str, request: object, result_type: type[T], label: str) -> T | None:
        """One of the evidence activities (``rank_evidence``,
        ``support_findings``, ``join_evidence``); None when it failed: a step
        without ranked evidence goes on as the agent loop it was."""
        try:
            return await workflow.execute_activity(
                name, request, result_type=result_type, summary=summary(label), **EVIDENCE_CALL
            )
        except ActivityError as err:
            if is_cancelled_exception(err):
                raise
            self.on_tool(f"{name} failed: {failure_reason(err)}")
            return None

    def read(self, source: str, part: int | None = None, query: str | None = None) -> ToolResult:
        """A part of a long page the run crawled (or of another long output,
        by its blob reference), or its passages on a query. No activity: the
        model activity shows what was asked from the blob store."""
        page = self.state.crawled.get(source) or next(
            (r for r in self.state.crawled.values() if r.blob and r.sources and r.sources[0].url == source), None
        )
        if page is not None and page.blob:
            title = page.sources[0].title if page.sources else source
            return ToolResult(
                content=f"# {title}\nURL: {source}\n", blob=page.blob, part=part, query=query, source=source
            )
        if source in self.state.outputs:
            return ToolResult(content="", blob=source, part=part, query=query, source=source)
        if page is not None:
            return ToolResult(error=True, content=f"Error: {source} could not be crawled, so there is nothing to read.")
        return ToolResult(error=True, content=f"Error: {source} has not been crawled in this run: crawl it first.")

    async def run_python(self, request: CodeRequest, where: str = "") -> ToolResult:
        self.state.usage.code_runs += 1
        first_line = next((line for line in request.code.splitlines() if line.strip()), "").strip()
        self.on_tool(f"run_python: {first_line[:80]}")
        return await self._tool("run_python", request, f"{where} · run_python: {first_line}")

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
            if is_cancelled_exception(err):
                raise
            self.on_tool(f"MCP tools unavailable: {failure_reason(err)}")
            return []

    async def mcp_call(self, call: ToolCall, role: str, where: str = "") -> ToolResult:
        self.on_tool(f"{call.name}: {call.arguments[:80]}")
        request = McpCallRequest(name=call.name, arguments_json=call.arguments, agent=role)
        return await self._tool("mcp_call_tool", request, f"{where or role} · {call.name}")

    async def close_sandbox(self, session: str) -> None:
        try:
            await workflow.execute_activity("close_sandbox", session, **TOOL_CALL["close_sandbox"])
        except ActivityError:
            pass  # the worker's idle reaper closes it anyway

    async def _tool(self, name: str, request: object, label: str = "") -> ToolResult:
        """A failed tool call becomes a readable error for the agent."""
        try:
            async with self._in_flight:
                result = await workflow.execute_activity(
                    name,
                    request,
                    result_type=ToolResult,
                    summary=summary(label.lstrip(" ·") or name),
                    **TOOL_CALL[name],
                )
        except ActivityError as err:
            if is_cancelled_exception(err):
                raise  # the run was cancelled: not the tool's failure
            return ToolResult(error=True, content=f"Error: {name} failed: {failure_reason(err)}")
        for source in result.sources:
            self.state.sources.setdefault(source.url, source)
        if result.blob and result.source == result.blob:  # a long output the agent may read on
            self.state.outputs.append(result.blob)
        return result


# --- the side outputs' activities (podcast, slides) ------------------------------

SPEECH_CALL = dict(
    start_to_close_timeout=timedelta(minutes=10),  # above DEEPRESEARCH_MODEL_TIMEOUT for one line
    heartbeat_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=10,
        non_retryable_error_types=["ModelAuthError", "ModelRequestError"],
    ),
)
FILE_CALL = dict(  # joining clips, building a deck: local work on blobs
    start_to_close_timeout=timedelta(minutes=5), retry_policy=RetryPolicy(maximum_attempts=3)
)
