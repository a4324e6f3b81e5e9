"""What an MCP server returns, as text and citations for the model; which
tools are enabled and their parameter schemas."""

from __future__ import annotations

import json
from typing import Any

from activities.mcp.config import HttpServerConfig, StdioServerConfig
from workflows.models import Citation
from workflows.tool_models import ToolResult


def enabled(server: StdioServerConfig | HttpServerConfig, tool: str) -> bool:
    return server.enabled_tools is None or tool in server.enabled_tools


def parameters(schema: Any) -> dict | None:
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return None
    schema = {k: v for k, v in schema.items() if k != "$schema"}
    schema["type"] = "object"
    schema.setdefault("properties", {})
    return schema


def render(result: Any) -> tuple[str, list[Citation]]:
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


def error_result(message: str) -> ToolResult:
    return ToolResult(error=True, content=f"Error: {one_line(message)}")


def one_line(text: str, limit: int = 2_000) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown_url(url: str) -> str:
    """The URL for messages: no credentials, no query string (it may hold a key)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
