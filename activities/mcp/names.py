"""Tool names as the model sees them: ``mcp__<server>__<tool>``, at most 64
characters (OpenAI's limit), and back."""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
MAX_NAME = 64  # OpenAI function names: ^[a-zA-Z0-9_-]{1,64}$
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")


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
