"""Opening a session to an MCP server: a stdio command or a streamable HTTP
endpoint, with its error log."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from activities.mcp.config import HttpServerConfig, StdioServerConfig
from activities.mcp.render import one_line


async def open_transport(server: StdioServerConfig | HttpServerConfig, errlog: Any, stack: AsyncExitStack) -> Any:
    if isinstance(server, StdioServerConfig):
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=server.command, args=server.args, env=server.env or None, cwd=server.cwd)
        # The server's stderr goes to a temporary file: quiet worker logs, and
        # its last lines explain a server that will not start.
        return stdio_client(params, errlog=errlog)
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # Our own client, for the headers; no redirects beyond what the transport allows.
    http = httpx2.AsyncClient(headers=server.headers, timeout=httpx2.Timeout(server.timeout))
    await stack.enter_async_context(http)
    return streamable_http_client(server.url, http_client=http)


async def all_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose cursor never ends cannot hang us
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def tail(errlog: Any, lines: int = 3) -> str:
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read()[-20_000:]
    except (OSError, ValueError):
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return one_line(" | ".join(kept), 400)
