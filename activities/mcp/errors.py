"""Turning what went wrong with an MCP server into one line for the model or
the log, and whether a retry may help."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from activities.mcp.config import HttpServerConfig, StdioServerConfig
from activities.mcp.render import one_line, shown_url


class McpFailure(Exception):
    """A server that could not be reached or failed; ``transient`` ones are worth retrying."""

    def __init__(self, message: str, transient: bool) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient


def leaf_errors(err: BaseException) -> Iterator[BaseException]:
    if isinstance(err, BaseExceptionGroup):
        for inner in err.exceptions:
            yield from leaf_errors(inner)
    else:
        yield err


def classify(
    err: BaseException,
    name: str,
    server: StdioServerConfig | HttpServerConfig,
    connected: bool,
    tool_call: bool,
    stderr: str,
) -> McpFailure | None:
    """None for errors that must propagate as they are (cancellation)."""
    import httpx2
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, METHOD_NOT_FOUND

    if isinstance(err, (KeyboardInterrupt, SystemExit)):
        return None
    leaves = [e for e in leaf_errors(err) if not isinstance(e, asyncio.CancelledError)]
    if not leaves:
        return None  # only cancellation: the activity is being cancelled
    # Prefer the most telling leaf: a timeout or a protocol error over teardown noise.
    leaf = next((e for e in leaves if isinstance(e, TimeoutError)), None) or next(
        (e for e in leaves if isinstance(e, (MCPError, OSError, httpx2.HTTPError))), leaves[0]
    )
    stdio = isinstance(server, StdioServerConfig)
    url = "" if stdio else shown_url(server.url)  # type: ignore[union-attr]
    where = f"MCP server {name!r}"
    said = f" (it said: {stderr})" if stderr and stdio else ""
    if isinstance(leaf, TimeoutError):
        return McpFailure(f"{where} did not answer within {server.timeout:g} s{said}", transient=True)
    if isinstance(leaf, httpx2.HTTPError):
        reason = one_line(str(leaf), 300) or type(leaf).__name__
        return McpFailure(f"{where} at {url} cannot be reached: {reason}", transient=True)
    if isinstance(leaf, OSError) and not connected and stdio:
        reason = leaf.strerror or str(leaf)
        if isinstance(leaf, FileNotFoundError):
            reason = "command not found"
        return McpFailure(
            f"{where} could not be started: {server.command!r}: {reason} "  # type: ignore[union-attr]
            f"(check servers.{name}.command in the MCP config)",
            transient=False,
        )
    if isinstance(leaf, MCPError):
        if leaf.code == CONNECTION_CLOSED:
            if stdio:
                doing = "during the call" if connected else "before it was ready"
                return McpFailure(f"{where} exited {doing}{said}", transient=False)
            return McpFailure(f"{where} closed the connection: {leaf.message}", transient=True)
        if not connected:
            if stdio:
                return McpFailure(f"{where} refused the connection: {leaf.message}{said}", transient=False)
            if leaf.code == METHOD_NOT_FOUND:
                return McpFailure(f"{where}: no MCP endpoint at {url} ({leaf.message})", transient=False)
            # The SDK does not tell a 401 from a 503 here; retrying a 5xx is worth it.
            return McpFailure(
                f"{where} at {url} refused the connection (HTTP error; check its url and headers): {leaf.message}",
                transient=True,
            )
        return McpFailure(f"{where}: {leaf.message}", transient=False)
    reason = one_line(f"{type(leaf).__name__}: {leaf}", 300)
    state = "failed" if connected else "could not be started" if stdio else "could not be reached"
    if tool_call and connected:
        state = "failed during the call"
    return McpFailure(f"{where} {state}: {reason}{said}", transient=False)
