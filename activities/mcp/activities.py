"""MCP tools: the user's own tools from MCP servers, as activities.

The MCP session lives in the activity, never in workflow code: every listing
and every tool call opens a session to the server (spawns the stdio command,
or connects to the streamable HTTP endpoint), does its one job and closes it.
That costs a process start or an HTTP handshake per call, but nothing has to
survive a worker crash, and any worker can run any call (see docs/mcp.md).

Tool names seen by the model are namespaced ``mcp__<server>__<tool>`` and
their descriptions start with ``[MCP server <server>] ``. The workflow sends
every tool call whose name starts with ``mcp__`` to ``mcp_call_tool``.

Configuration: a JSON file named by ``DEEPRESEARCH_MCP_CONFIG`` (default
``<data dir>/mcp.json`` when it exists)::

    {"servers": {
        "lighthouses": {"transport": "stdio", "command": "python", "args": ["server.py"],
                        "env": {"TOKEN": "${LIGHTHOUSE_TOKEN}"},
                        "enabled_tools": ["lighthouse_lookup"], "agents": ["researcher"]},
        "docs": {"transport": "http", "url": "http://localhost:8000/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}}
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.mcp.config import HttpServerConfig, McpConfig, StdioServerConfig
from activities.mcp.errors import McpFailure, classify
from activities.mcp.names import public_name, split_name
from activities.mcp.render import enabled, error_result, parameters, render
from activities.mcp.sessions import all_tools, open_transport, tail
from infra.blobs import BlobStore
from workflows.tool_models import McpCallRequest, ToolResult

MAX_DESCRIPTION = 2048
INLINE_CHARS = 4_000  # longer results go to the blob store
MAX_RESULT_CHARS = 200_000
logger = logging.getLogger(__name__)


T = TypeVar("T")


class McpActivities:
    def __init__(self, config: McpConfig | None, blobs: BlobStore | None = None) -> None:
        self.config = config
        self.blobs = blobs

    @property
    def servers(self) -> dict[str, StdioServerConfig | HttpServerConfig]:
        return dict(self.config.servers) if self.config else {}

    @activity.defn(name="mcp_list_tools")
    async def list_tools(self, agent: str) -> list[dict]:
        """OpenAI function schemas of the MCP tools ``agent`` may use, from
        every server that serves it. A server that fails raises: transient
        failures (connection refused, timeout) are retried, others are not."""
        servers = self.config.servers_for(agent) if self.config else {}
        if not servers:
            return []
        async with heartbeating():
            results = await asyncio.gather(
                *(self._server_schemas(name, server) for name, server in servers.items()),
                return_exceptions=True,
            )
        failures = [r for r in results if isinstance(r, BaseException)]
        for failure in failures:
            if not isinstance(failure, McpFailure):
                raise failure
        if failures:
            message = "; ".join(f.message for f in failures)  # type: ignore[union-attr]
            transient = all(f.transient for f in failures)  # type: ignore[union-attr]
            raise ApplicationError(
                message, type="McpUnavailable" if transient else "McpServerError", non_retryable=not transient
            )
        return [schema for schemas in results for schema in schemas]  # type: ignore[union-attr]

    @activity.defn(name="mcp_call_tool")
    async def call_tool(self, request: McpCallRequest) -> ToolResult:
        """Call one MCP tool. Tool errors, bad arguments and servers that fail
        come back as ``error=True`` for the agent to read; transient connection
        failures raise a retryable ApplicationError."""
        try:
            server_name, _ = split_name(request.name)
        except ValueError as err:
            return error_result(str(err))
        server = self.servers.get(server_name)
        if server is None:
            return error_result(f"there is no MCP server named {server_name!r} (tool {request.name})")
        if request.agent and request.agent not in server.agents:
            return error_result(f"MCP server {server_name!r} is not enabled for the {request.agent} agent")
        try:
            arguments = json.loads(request.arguments_json or "{}")
        except ValueError:
            return error_result(f"the arguments of {request.name} are not valid JSON")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return error_result(f"the arguments of {request.name} must be a JSON object")

        async def call(client: Any) -> ToolResult | tuple[str, Any]:
            tools = await all_tools(client)
            tool = next((t for t in tools if public_name(server_name, t.name) == request.name), None)
            if tool is None or not enabled(server, tool.name):
                return error_result(f"MCP server {server_name!r} has no enabled tool called {request.name}")
            return tool.name, await client.call_tool(tool.name, arguments)

        try:
            async with heartbeating():
                outcome = await self._with_session(server_name, server, call, tool_call=True)
        except McpFailure as failure:
            if failure.transient:
                raise ApplicationError(failure.message, type="McpUnavailable") from None
            return error_result(failure.message)
        if isinstance(outcome, ToolResult):
            return outcome
        # After the session: a blob store failure is not the MCP server's.
        return await self._tool_result(server_name, *outcome)

    # --- helpers ---------------------------------------------------------------

    async def _server_schemas(self, name: str, server: StdioServerConfig | HttpServerConfig) -> list[dict]:
        tools = await self._with_session(name, server, all_tools, tool_call=False)
        listed = {t.name for t in tools}
        for missing in sorted(set(server.enabled_tools or ()) - listed):
            logger.warning("MCP server %r lists no tool %r (enabled_tools in %s)", name, missing, self._source)
        schemas = []
        for tool in tools:
            if not enabled(server, tool.name):
                continue
            schema = parameters(tool.input_schema)
            if schema is None:
                logger.warning("MCP tool %r of server %r has no object input schema; skipped", tool.name, name)
                continue
            description = f"[MCP server {name}] " + (tool.description or tool.title or tool.name).strip()
            schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": public_name(name, tool.name),
                        "description": description[:MAX_DESCRIPTION],
                        "parameters": schema,
                    },
                }
            )
        return schemas

    @property
    def _source(self) -> str:
        return self.config.source if self.config else "MCP config"

    async def _with_session(
        self,
        name: str,
        server: StdioServerConfig | HttpServerConfig,
        work: Callable[[Any], Awaitable[T]],
        *,
        tool_call: bool,
    ) -> T:
        """Open a session to ``server``, run ``work(client)``, close it. Every
        failure becomes an McpFailure saying which server and why."""
        from mcp import Client
        from mcp.types import Implementation

        connected = False
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
            try:
                async with asyncio.timeout(server.timeout), AsyncExitStack() as stack:
                    transport = await open_transport(server, errlog, stack)
                    client = await stack.enter_async_context(
                        Client(
                            transport,
                            cache=None,
                            read_timeout_seconds=server.timeout,
                            client_info=Implementation(name="deepresearch-temporal", version="0.1.0"),
                        )
                    )
                    connected = True
                    return await work(client)
            except McpFailure:
                raise
            except BaseException as err:  # noqa: BLE001 - groups, OSError, MCPError, httpx2 errors
                failure = classify(err, name, server, connected, tool_call, tail(errlog))
                if failure is None:
                    raise
                raise failure from None

    async def _tool_result(self, server: str, tool: str, result: Any) -> ToolResult:
        text, sources = render(result)
        if result.is_error:
            return error_result(f"MCP tool {tool} on server {server!r} failed: {text or '(no message)'}")
        if not text.strip():
            text = "(the tool returned nothing)"
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + f"\n[... cut: the result had {len(text):,} characters]"
        if len(text) > INLINE_CHARS and self.blobs is not None:
            header = f"Result of MCP tool {tool} (server {server}, {len(text):,} characters):\n"
            ref = await self.blobs.put(text)  # shown in parts that fit the model's window (read_page)
            return ToolResult(content=header, blob=ref, sources=sources, source=ref)
        if len(text) > 4 * INLINE_CHARS:  # no blob store: keep history small anyway
            text = text[: 4 * INLINE_CHARS] + f"\n[... cut: the result had {len(text):,} characters]"
        return ToolResult(content=text, sources=sources)
