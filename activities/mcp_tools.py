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
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
)
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from infra.blobs import BlobStore
from infra.errors import ConfigError
from infra.settings import data_dir as env_data_dir
from workflows.models import Citation, McpCallRequest, ToolResult

logger = logging.getLogger(__name__)

PREFIX = "mcp__"
CONFIG_ENV = "DEEPRESEARCH_MCP_CONFIG"
AGENTS = ("researcher", "coder")
MAX_NAME = 64  # OpenAI function names: ^[a-zA-Z0-9_-]{1,64}$
MAX_DESCRIPTION = 2048
MAX_TIMEOUT = 600  # seconds; servers.<name>.timeout may not exceed it
INLINE_CHARS = 4_000  # longer results go to the blob store
MAX_RESULT_CHARS = 200_000
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")
# Letters, digits and hyphens, single underscores between: "__" separates the
# server from the tool in a namespaced name, so a server name cannot hold it.
_SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

AgentName = Literal["researcher", "coder"]


# --- configuration -----------------------------------------------------------


class _ServerBase(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # None: every tool the server lists; []: none.
    enabled_tools: list[str] | None = None
    # "add_to_agents" is DeerFlow's spelling.
    agents: list[AgentName] = Field(
        default_factory=lambda: ["researcher"],
        validation_alias=AliasChoices("agents", "add_to_agents"),
    )
    # Bounds one whole session: start or connect, list, call, close. The
    # workflow's activity timeouts allow up to MAX_TIMEOUT.
    timeout: float = Field(default=60.0, gt=0, le=MAX_TIMEOUT)


class StdioServerConfig(_ServerBase):
    transport: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None


class HttpServerConfig(_ServerBase):
    transport: Literal["http"] = "http"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"must be an http(s) address such as http://localhost:8000/mcp, got {value!r}")
        return value


def _transport_of(value: Any) -> str | None:
    """The union's tag: ``transport`` when given, else guessed from the keys."""
    if isinstance(value, BaseModel):
        return getattr(value, "transport", None)
    if not isinstance(value, dict):
        return None
    transport = value.get("transport") or value.get("type")
    if transport is None:
        return "stdio" if "command" in value else "http" if "url" in value else None
    transport = str(transport).strip().lower().replace("_", "-")
    # Spellings other tools use for the same two transports.
    return {"streamable-http": "http", "streamablehttp": "http"}.get(transport, transport)


ServerConfig = Annotated[
    Annotated[StdioServerConfig, Tag("stdio")] | Annotated[HttpServerConfig, Tag("http")],
    Discriminator(
        _transport_of,
        custom_error_type="transport",
        custom_error_message="'transport' must be 'stdio' (with 'command') or 'http' (with 'url')",
    ),
]


class McpConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # "mcpServers" is the spelling of Claude Desktop / Cursor config files.
    servers: dict[str, ServerConfig] = Field(validation_alias=AliasChoices("servers", "mcpServers"))
    source: str = Field(default="", exclude=True)  # the file it came from, for messages

    @field_validator("servers", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> Any:
        """Check the names; settle each server's ``transport`` (also read from
        ``type``, or guessed from ``command`` / ``url``)."""
        if not isinstance(value, dict):
            return value
        servers = {}
        for name, server in value.items():
            if not isinstance(name, str) or not _SERVER_NAME.match(name):
                raise ValueError(f"server name {name!r} may use only letters, digits, '-' and single '_'")
            if isinstance(server, dict):
                transport = _transport_of(server)
                server = {k: v for k, v in server.items() if k != "type"}
                if transport:
                    server["transport"] = transport
            servers[name] = server
        return servers

    def servers_for(self, agent: str) -> dict[str, StdioServerConfig | HttpServerConfig]:
        return {name: s for name, s in self.servers.items() if agent in s.agents}

    @classmethod
    def parse(cls, data: Any, source: str = "MCP config", env: Mapping[str, str] | None = None) -> McpConfig:
        """Validate ``data`` (the decoded JSON); errors become one ConfigError line."""
        env = os.environ if env is None else env
        if isinstance(data, dict) and isinstance(data.get("mcp_settings"), dict):
            data = data["mcp_settings"]  # DeerFlow's wrapper
        try:
            config = cls.model_validate(data)
        except ValidationError as err:
            raise ConfigError(f"{source}: {_first_error(err)}") from None
        config.source = source
        for name, server in config.servers.items():
            _expand_server(server, f"{source}: servers.{name}", env)
        return config

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> McpConfig:
        path = Path(path).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"MCP config {path} does not exist: create it or unset {CONFIG_ENV}") from None
        except OSError as err:
            raise ConfigError(f"MCP config {path} cannot be read: {err.strerror or err}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(
                f"MCP config {path} is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"
            ) from None
        return cls.parse(data, f"MCP config {path}", env)


def _first_error(err: ValidationError) -> str:
    errors = err.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"] if p not in ("stdio", "http"))
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        message = "is required"
    elif first["type"] == "extra_forbidden":
        message = "is not a known setting"
    elif first["type"] == "literal_error" and "agents" in where:
        message = f"must be one of {', '.join(AGENTS)}"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return f"{where or 'the file'} {message}{more}".strip()


def _expand(value: str, where: str, env: Mapping[str, str]) -> str:
    """``${NAME}`` becomes the worker's environment variable NAME, so secrets can stay out of the file."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise ConfigError(f"{where} uses ${{{name}}}, which is not set: export {name}")
        return env[name]

    return _ENV_REF.sub(one, value)


def _expand_server(server: StdioServerConfig | HttpServerConfig, where: str, env: Mapping[str, str]) -> None:
    if isinstance(server, StdioServerConfig):
        server.command = _expand(server.command, f"{where}.command", env)
        server.args = [_expand(a, f"{where}.args", env) for a in server.args]
        server.env = {k: _expand(v, f"{where}.env.{k}", env) for k, v in server.env.items()}
        if server.cwd:
            server.cwd = _expand(server.cwd, f"{where}.cwd", env)
    else:
        server.url = _expand(server.url, f"{where}.url", env)
        server.headers = {k: _expand(v, f"{where}.headers.{k}", env) for k, v in server.headers.items()}


def config_path(env: Mapping[str, str] | None = None, data_dir: Path | None = None) -> Path | None:
    """The config file to read: ``DEEPRESEARCH_MCP_CONFIG``, else
    ``<data dir>/mcp.json`` if it exists (``data_dir`` overrides the data dir)."""
    env = os.environ if env is None else env
    value = (env.get(CONFIG_ENV) or "").strip()
    if value:
        return Path(value).expanduser()
    default = (data_dir or env_data_dir(env)) / "mcp.json"
    return default if default.is_file() else None


def load_mcp_config(env: Mapping[str, str] | None = None, data_dir: Path | None = None) -> McpConfig | None:
    """The worker's MCP configuration, or None when there is none. Raises
    ConfigError. The worker passes ``data_dir=settings.data_dir``."""
    env = os.environ if env is None else env
    path = config_path(env, data_dir)
    return McpConfig.from_file(path, env) if path else None


# --- names -------------------------------------------------------------------


def public_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, made a valid OpenAI function name. A tool
    name that has to be changed (characters, length) gets a short hash of the
    original, so two tools never share a name."""
    clean = _NAME_OK.sub("_", tool)
    name = f"{PREFIX}{server}__{clean}"
    if clean == tool and len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(tool.encode("utf-8")).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def split_name(name: str) -> tuple[str, str]:
    """``mcp__<server>__<rest>`` -> (server, rest); ValueError if it is not one."""
    if not name.startswith(PREFIX):
        raise ValueError(f"{name!r} is not an MCP tool name")
    server, sep, rest = name[len(PREFIX) :].partition("__")
    if not server or not sep or not rest:
        raise ValueError(f"{name!r} is not an MCP tool name (mcp__<server>__<tool>)")
    return server, rest


def is_mcp_tool(name: str) -> bool:
    return name.startswith(PREFIX)


# --- activities --------------------------------------------------------------


class McpFailure(Exception):
    """A server that could not be reached or failed; ``transient`` ones are worth retrying."""

    def __init__(self, message: str, transient: bool) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient


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
            return _error(str(err))
        server = self.servers.get(server_name)
        if server is None:
            return _error(f"there is no MCP server named {server_name!r} (tool {request.name})")
        if request.agent and request.agent not in server.agents:
            return _error(f"MCP server {server_name!r} is not enabled for the {request.agent} agent")
        try:
            arguments = json.loads(request.arguments_json or "{}")
        except ValueError:
            return _error(f"the arguments of {request.name} are not valid JSON")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _error(f"the arguments of {request.name} must be a JSON object")

        async def call(client: Any) -> ToolResult | tuple[str, Any]:
            tools = await _all_tools(client)
            tool = next((t for t in tools if public_name(server_name, t.name) == request.name), None)
            if tool is None or not _enabled(server, tool.name):
                return _error(f"MCP server {server_name!r} has no enabled tool called {request.name}")
            return tool.name, await client.call_tool(tool.name, arguments)

        try:
            async with heartbeating():
                outcome = await self._with_session(server_name, server, call, tool_call=True)
        except McpFailure as failure:
            if failure.transient:
                raise ApplicationError(failure.message, type="McpUnavailable") from None
            return _error(failure.message)
        if isinstance(outcome, ToolResult):
            return outcome
        # After the session: a blob store failure is not the MCP server's.
        return await self._tool_result(server_name, *outcome)

    # --- helpers ---------------------------------------------------------------

    async def _server_schemas(self, name: str, server: StdioServerConfig | HttpServerConfig) -> list[dict]:
        tools = await self._with_session(name, server, _all_tools, tool_call=False)
        listed = {t.name for t in tools}
        for missing in sorted(set(server.enabled_tools or ()) - listed):
            logger.warning("MCP server %r lists no tool %r (enabled_tools in %s)", name, missing, self._source)
        schemas = []
        for tool in tools:
            if not _enabled(server, tool.name):
                continue
            parameters = _parameters(tool.input_schema)
            if parameters is None:
                logger.warning("MCP tool %r of server %r has no object input schema; skipped", tool.name, name)
                continue
            description = f"[MCP server {name}] " + (tool.description or tool.title or tool.name).strip()
            schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": public_name(name, tool.name),
                        "description": description[:MAX_DESCRIPTION],
                        "parameters": parameters,
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
                    transport = await _transport(server, errlog, stack)
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
                failure = _classify(err, name, server, connected, tool_call, _tail(errlog))
                if failure is None:
                    raise
                raise failure from None

    async def _tool_result(self, server: str, tool: str, result: Any) -> ToolResult:
        text, sources = _render(result)
        if result.is_error:
            return _error(f"MCP tool {tool} on server {server!r} failed: {text or '(no message)'}")
        if not text.strip():
            text = "(the tool returned nothing)"
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + f"\n[... cut: the result had {len(text):,} characters]"
        if len(text) > INLINE_CHARS and self.blobs is not None:
            header = f"Result of MCP tool {tool} (server {server}, {len(text):,} characters):\n"
            return ToolResult(content=header, blob=await self.blobs.put(text), sources=sources)
        if len(text) > 4 * INLINE_CHARS:  # no blob store: keep history small anyway
            text = text[: 4 * INLINE_CHARS] + f"\n[... cut: the result had {len(text):,} characters]"
        return ToolResult(content=text, sources=sources)


async def _transport(server: StdioServerConfig | HttpServerConfig, errlog: Any, stack: AsyncExitStack) -> Any:
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


async def _all_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose cursor never ends cannot hang us
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _enabled(server: StdioServerConfig | HttpServerConfig, tool: str) -> bool:
    return server.enabled_tools is None or tool in server.enabled_tools


def _parameters(schema: Any) -> dict | None:
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return None
    schema = {k: v for k, v in schema.items() if k != "$schema"}
    schema["type"] = "object"
    schema.setdefault("properties", {})
    return schema


def _render(result: Any) -> tuple[str, list[Citation]]:
    """Text parts joined; other parts named; http(s) resources become sources."""
    parts: list[str] = []
    sources: list[Citation] = []

    def cite(uri: str, title: str | None) -> None:
        if uri.startswith(("http://", "https://")) and all(s.url != uri for s in sources):
            sources.append(Citation(title=title or uri, url=uri))

    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(block.data) * 3 // 4
            parts.append(f"[{kind} ({block.mime_type}, about {size:,} bytes) not shown]")
        elif kind == "resource_link":
            title = block.title or block.name
            parts.append(f"[resource: {title} <{block.uri}>]" + (f" {block.description}" if block.description else ""))
            cite(str(block.uri), title)
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                parts.append(f"[resource <{resource.uri}>]\n{text}")
            else:
                parts.append(f"[binary resource <{resource.uri}> ({resource.mime_type or 'unknown type'}) not shown]")
            cite(str(resource.uri), None)
        else:
            parts.append(f"[{kind or 'unknown'} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=1))
    return "\n\n".join(parts), sources


def _error(message: str) -> ToolResult:
    return ToolResult(error=True, content=f"Error: {_one_line(message)}")


def _one_line(text: str, limit: int = 2_000) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown_url(url: str) -> str:
    """The URL for messages: no credentials, no query string (it may hold a key)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _leaves(err: BaseException) -> Iterator[BaseException]:
    if isinstance(err, BaseExceptionGroup):
        for inner in err.exceptions:
            yield from _leaves(inner)
    else:
        yield err


def _tail(errlog: Any, lines: int = 3) -> str:
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read()[-20_000:]
    except (OSError, ValueError):
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return _one_line(" | ".join(kept), 400)


def _classify(
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
    leaves = [e for e in _leaves(err) if not isinstance(e, asyncio.CancelledError)]
    if not leaves:
        return None  # only cancellation: the activity is being cancelled
    # Prefer the most telling leaf: a timeout or a protocol error over teardown noise.
    leaf = next((e for e in leaves if isinstance(e, TimeoutError)), None) or next(
        (e for e in leaves if isinstance(e, (MCPError, OSError, httpx2.HTTPError))), leaves[0]
    )
    stdio = isinstance(server, StdioServerConfig)
    url = "" if stdio else _shown_url(server.url)  # type: ignore[union-attr]
    where = f"MCP server {name!r}"
    said = f" (it said: {stderr})" if stderr and stdio else ""
    if isinstance(leaf, TimeoutError):
        return McpFailure(f"{where} did not answer within {server.timeout:g} s{said}", transient=True)
    if isinstance(leaf, httpx2.HTTPError):
        reason = _one_line(str(leaf), 300) or type(leaf).__name__
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
    reason = _one_line(f"{type(leaf).__name__}: {leaf}", 300)
    state = "failed" if connected else "could not be started" if stdio else "could not be reached"
    if tool_call and connected:
        state = "failed during the call"
    return McpFailure(f"{where} {state}: {reason}{said}", transient=False)


# --- a check from the command line -------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``python -m activities.mcp_tools [AGENT ...]``: load the worker's MCP
    config, connect to every server and print the tools each agent gets."""
    import sys

    agents = (argv if argv is not None else sys.argv[1:]) or list(AGENTS)
    try:
        config = load_mcp_config()
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if config is None:
        print(f"no MCP config: set {CONFIG_ENV} or create {env_data_dir() / 'mcp.json'}")
        return 0
    activities = McpActivities(config)
    status = 0
    for agent in agents:
        try:
            schemas = asyncio.run(activities.list_tools(agent))
        except ApplicationError as err:
            print(f"{agent}: error: {err.message}", file=sys.stderr)
            status = 1
            continue
        print(f"{agent}: {len(schemas)} MCP tool(s)")
        for schema in schemas:
            function = schema["function"]
            print(f"  {function['name']}: {function['description'][:100]}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
