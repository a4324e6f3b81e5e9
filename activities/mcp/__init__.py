"""The user's own tools from MCP servers (see docs/mcp.md).

- ``config.py``: the configuration file (schema, location, ${VAR} references);
- ``names.py``: tool names as the model sees them;
- ``sessions.py``: opening a session to a server (stdio or streamable HTTP);
- ``render.py``: results as text and citations, enabled tools, parameters;
- ``errors.py``: failures as one line, and whether to retry;
- ``activities.py``: ``McpActivities`` (``mcp_list_tools``, ``mcp_call_tool``);
- ``__main__.py``: ``python -m activities.mcp [AGENT ...]`` checks a config.
"""
