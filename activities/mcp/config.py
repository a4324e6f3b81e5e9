"""The MCP configuration file: its schema, where it is found, and ${VAR}
references to the environment (see docs/mcp.md)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

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

from infra.errors import ConfigError
from infra.settings import data_dir as env_data_dir

CONFIG_ENV = "DEEPRESEARCH_MCP_CONFIG"
AGENTS = ("researcher", "coder")
MAX_TIMEOUT = 600  # seconds; servers.<name>.timeout may not exceed it
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
