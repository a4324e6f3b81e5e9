"""A real MCP server for the tests, built on the ``mcp`` package's MCPServer
(the SDK's FastMCP; renamed in mcp 2).

    python -m testkit.mcp_echo_server                 # stdio (default)
    python -m testkit.mcp_echo_server --http PORT     # streamable HTTP on 127.0.0.1:PORT/mcp
        [--token TOKEN]                                     # ... answering only "Authorization: Bearer TOKEN"

Tools:

- ``lighthouse_lookup(name)``: a distinctive, made-up fact about a lighthouse,
  so a test can tell that the answer came through this server.
- ``secret_vault(code)``: a second tool, disabled by the tests' config.
- ``broken_gauge(reading)``: always fails, for the error path.
- ``dotted.name(text)``: a name that is legal in MCP but not as an OpenAI
  function name, for the name-mapping path.
- ``source_card(topic)``: text plus an http resource link (becomes a citation).
- ``slow_echo(text, seconds)``: sleeps, for timeouts.
- ``has_env(name)``: "set" or "unset", to check what environment the server got.

Every call is appended to the file named by ``MCP_ECHO_LOG`` (if set), so a
test can see that the server really ran the call; ``MCP_ECHO_TOKEN``, when set,
is included in the lighthouse fact, so a test can check the config's ``env``
reached the process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ResourceLink, TextContent

LIGHTHOUSES = {
    "skerryvore": "The Skerryvore light's keeper logbook records 4,117 gannets counted on 9 June 1871.",
}
DEFAULT_FACT = "The {name} lighthouse is painted in 7 ochre bands and its lamp turns every 13.5 seconds."

server = MCPServer("echo-lighthouse", instructions="Test server for deepresearch MCP tools.")


def _log(tool: str, **arguments: object) -> None:
    path = os.environ.get("MCP_ECHO_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool()
def lighthouse_lookup(name: str) -> str:
    """Look up a little-known fact about a lighthouse by its name."""
    _log("lighthouse_lookup", name=name)
    fact = LIGHTHOUSES.get(name.strip().lower()) or DEFAULT_FACT.format(name=name.strip())
    token = os.environ.get("MCP_ECHO_TOKEN")
    return f"{fact} (token {token})" if token else fact


@server.tool()
def secret_vault(code: str) -> str:
    """Open the vault (disabled by the tests' configuration)."""
    _log("secret_vault", code=code)
    return f"vault opened with {code}"


@server.tool()
def broken_gauge(reading: int) -> str:
    """A gauge that always fails."""
    _log("broken_gauge", reading=reading)
    raise ToolError(f"gauge jammed at reading {reading}")


@server.tool(name="dotted.name")
def dotted_name(text: str) -> str:
    """Echo text back, from a tool whose name has a dot."""
    _log("dotted.name", text=text)
    return f"dotted echo: {text}"


@server.tool(structured_output=False)
def source_card(topic: str) -> list[TextContent | ResourceLink]:
    """A short note plus a link to its source."""
    _log("source_card", topic=topic)
    return [
        TextContent(text=f"Card about {topic}: see the source."),
        ResourceLink(name=f"{topic} source", uri=f"https://example.org/cards/{topic}"),
    ]


@server.tool()
async def slow_echo(text: str, seconds: float = 5.0) -> str:
    """Echo text back after a delay."""
    _log("slow_echo", text=text, seconds=seconds)
    await asyncio.sleep(seconds)
    return text


@server.tool()
def has_env(name: str) -> str:
    """Whether the environment variable is set in this server's process."""
    return "set" if name in os.environ else "unset"


def require_token(app, token: str):
    """An ASGI wrapper answering 401 to HTTP requests without the bearer token."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    parser.add_argument("--token", help="with --http: require 'Authorization: Bearer TOKEN'")
    args = parser.parse_args()
    if not args.http:
        server.run()
        return
    import uvicorn

    app = server.streamable_http_app()
    if args.token:
        app = require_token(app, args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
