import json
import sys
from pathlib import Path

from testkit.llm_server import Reply, has_tool_result, tool_messages, tool_names
from testkit.runs import start

ECHO = Path(__file__).resolve().parent.parent / "testkit" / "mcp_echo_server.py"
TOOL = "mcp__lighthouses__lighthouse_lookup"


async def test_researcher_uses_a_real_stdio_mcp_tool(
    temporal_client, task_queue, research_worker, llm, script, data_dir
):
    log = data_dir / "calls.jsonl"
    (data_dir / "mcp.json").write_text(
        json.dumps(
            {
                "servers": {
                    "lighthouses": {
                        "command": sys.executable,
                        "args": [str(ECHO)],
                        "env": {"MCP_ECHO_LOG": str(log)},
                        "enabled_tools": ["lighthouse_lookup"],
                    }
                }
            }
        )
    )
    plain = script.researcher
    seen = {}

    def researcher(request):
        seen.setdefault("tools", tool_names(request))
        if TOOL in tool_names(request) and not has_tool_result(request, TOOL):
            return Reply(tool_calls=[(TOOL, {"name": "Skerryvore"})])
        if has_tool_result(request, TOOL) and not has_tool_result(request, "web_search"):
            seen["mcp_result"] = tool_messages(request)[-1]["content"]
        return plain(request)

    script.researcher = researcher
    script.steps = [("Find the lighthouse fact", "research")]
    async with research_worker():
        handle = await start(temporal_client, task_queue, "Tell me about Skerryvore", auto_accept_plan=True)
        result = await handle.result()
    assert result.status == "completed"
    assert "4,117 gannets" in seen["mcp_result"]
    assert TOOL in seen["tools"] and "web_search" in seen["tools"]
    assert [json.loads(line)["tool"] for line in log.read_text().splitlines()] == ["lighthouse_lookup"]
    tools_sent = [t for r in llm.calls("researcher") for t in r.get("tools", []) if t["function"]["name"] == TOOL]
    assert tools_sent[0]["function"]["description"].startswith("[MCP server lighthouses] ")
