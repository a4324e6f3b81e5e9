from __future__ import annotations

import asyncio

from temporalio.exceptions import ApplicationError

from activities.mcp.activities import McpActivities
from activities.mcp.config import AGENTS, CONFIG_ENV, load_mcp_config
from infra.errors import ConfigError
from infra.settings import data_dir as env_data_dir

# --- a check from the command line -------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``python -m activities.mcp [AGENT ...]``: load the worker's MCP
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
