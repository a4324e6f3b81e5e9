"""MCP tools: configuration, and the two activities against a real MCP server
(testkit/mcp_echo_server.py) over stdio and streamable HTTP.

The activities are called directly here; the end-to-end run through the
workflow lives with the workflow tests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from activities.mcp.activities import McpActivities
from activities.mcp.config import McpConfig, StdioServerConfig, load_mcp_config
from activities.mcp.names import public_name, split_name
from client.devserver import free_port, port_open
from infra.blobs import BlobStore, FileBlobStore
from infra.errors import ConfigError
from workflows.tool_models import McpCallRequest

ECHO = Path(__file__).resolve().parent.parent / "testkit" / "mcp_echo_server.py"
SKERRYVORE = "4,117 gannets counted on 9 June 1871"
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def echo_server(**extra) -> dict:
    return {"transport": "stdio", "command": sys.executable, "args": [str(ECHO)], **extra}


def activities_for(servers: dict, blobs: BlobStore | None = None) -> McpActivities:
    return McpActivities(McpConfig.parse({"servers": servers}, env={}), blobs)


def call(tool: str, /, **arguments) -> McpCallRequest:
    return McpCallRequest(name=tool, arguments_json=json.dumps(arguments))


def calls_logged(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def echo_log(tmp_path: Path) -> Path:
    return tmp_path / "echo-calls.jsonl"


@pytest.fixture
def echo(echo_log: Path) -> McpActivities:
    """The echo server for the researcher, with secret_vault disabled."""
    return activities_for(
        {
            "echo": echo_server(
                env={"MCP_ECHO_LOG": str(echo_log)},
                enabled_tools=["lighthouse_lookup", "broken_gauge", "dotted.name", "source_card", "slow_echo"],
            )
        }
    )


# --- configuration -------------------------------------------------------------


def test_config_defaults_and_both_transports():
    config = McpConfig.parse(
        {
            "servers": {
                "local": {"transport": "stdio", "command": "python", "args": ["s.py"]},
                "remote": {
                    "transport": "http",
                    "url": "http://localhost:8000/mcp",
                    "headers": {"X-Key": "k"},
                    "enabled_tools": ["a"],
                    "agents": ["researcher", "coder"],
                    "timeout": 5,
                },
            }
        },
        env={},
    )
    local, remote = config.servers["local"], config.servers["remote"]
    assert local.transport == "stdio" and local.command == "python" and local.args == ["s.py"]
    assert local.agents == ["researcher"] and local.enabled_tools is None and local.timeout == 60
    assert remote.transport == "http" and remote.headers == {"X-Key": "k"} and remote.timeout == 5
    assert list(config.servers_for("researcher")) == ["local", "remote"]
    assert list(config.servers_for("coder")) == ["remote"]
    assert config.servers_for("analyst") == {}


def test_config_accepts_other_tools_spellings():
    # Claude Desktop's "mcpServers" without transport; DeerFlow's wrapper and "add_to_agents".
    desktop = McpConfig.parse(
        {"mcpServers": {"fs": {"command": "npx", "args": ["x"]}, "web": {"url": "https://h/mcp"}}}, env={}
    )
    assert desktop.servers["fs"].transport == "stdio" and desktop.servers["web"].transport == "http"
    deerflow = McpConfig.parse(
        {
            "mcp_settings": {
                "servers": {"gh": {"transport": "streamable_http", "url": "http://h/mcp", "add_to_agents": ["coder"]}}
            }
        },
        env={},
    )
    assert deerflow.servers["gh"].transport == "http" and deerflow.servers["gh"].agents == ["coder"]


def test_config_expands_environment_references():
    config = McpConfig.parse(
        {
            "servers": {
                "gh": {"url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}},
                "local": {"command": "${HOME}/bin/srv", "env": {"KEY": "${GH_TOKEN}"}},
            }
        },
        env={"HOST": "api.example.com", "GH_TOKEN": "t0k3n", "HOME": "/home/u"},
    )
    assert config.servers["gh"].url == "https://api.example.com/mcp"
    assert config.servers["gh"].headers["Authorization"] == "Bearer t0k3n"
    assert config.servers["local"].command == "/home/u/bin/srv" and config.servers["local"].env == {"KEY": "t0k3n"}
    with pytest.raises(
        ConfigError, match=r"servers\.gh\.headers\.Authorization uses \$\{GH_TOKEN\}, which is not set: export GH_TOKEN"
    ):
        McpConfig.parse(
            {"servers": {"gh": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}}}, env={}
        )


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"s": {"transport": "stdio"}}, r"servers\.s\.command is required"),
        ({"s": {"transport": "http"}}, r"servers\.s\.url is required"),
        ({"s": {"transport": "sse", "url": "http://h/mcp"}}, r"servers\.s 'transport' must be 'stdio' .* or 'http'"),
        ({"s": {"args": ["x"]}}, r"servers\.s 'transport' must be"),
        ({"s": {"command": "x", "agents": ["reporter"]}}, r"servers\.s\.agents\.0 must be one of researcher, coder"),
        ({"s": {"command": "x", "enabled_tool": ["a"]}}, r"servers\.s\.enabled_tool is not a known setting"),
        ({"s": {"url": "ftp://h/mcp"}}, r"servers\.s\.url must be an http\(s\) address"),
        ({"s": {"command": "x", "timeout": 0}}, r"servers\.s\.timeout"),
        ({"s": {"command": "x", "timeout": 601}}, r"servers\.s\.timeout .*600"),
        ({"a__b": {"command": "x"}}, r"server name 'a__b' may use only"),
        ({"a.b": {"command": "x"}}, r"server name 'a.b' may use only"),
    ],
)
def test_config_errors_are_one_clear_line(servers, message):
    with pytest.raises(ConfigError, match=message) as caught:
        McpConfig.parse({"servers": servers}, source="MCP config /etc/mcp.json", env={})
    text = str(caught.value)
    assert "\n" not in text and text.startswith("MCP config /etc/mcp.json: ")


def test_config_without_servers_is_an_error():
    with pytest.raises(ConfigError, match="servers is required"):
        McpConfig.parse({}, env={})


def test_load_config_from_env_file_and_data_dir(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    assert load_mcp_config({"DEEPRESEARCH_DATA_DIR": str(data)}) is None  # nothing configured

    (data / "mcp.json").write_text(json.dumps({"servers": {"d": {"command": "x"}}}))
    assert list(load_mcp_config({"DEEPRESEARCH_DATA_DIR": str(data)}).servers) == ["d"]
    assert list(load_mcp_config({}, data_dir=data).servers) == ["d"]  # the worker's settings.data_dir

    named = tmp_path / "other.json"
    named.write_text(json.dumps({"servers": {"n": {"url": "http://h/mcp"}}}))
    env = {"DEEPRESEARCH_DATA_DIR": str(data), "DEEPRESEARCH_MCP_CONFIG": str(named)}
    assert list(load_mcp_config(env).servers) == ["n"]

    with pytest.raises(
        ConfigError, match=r"MCP config .*missing\.json does not exist: create it or unset DEEPRESEARCH_MCP_CONFIG"
    ):
        load_mcp_config({"DEEPRESEARCH_MCP_CONFIG": str(tmp_path / "missing.json")})
    named.write_text('{"servers": {"n": {"url": "http://h/mcp"},}}')
    with pytest.raises(ConfigError, match=r"other\.json is not valid JSON: .* at line 1 column"):
        load_mcp_config(env)


# --- names -----------------------------------------------------------------------


def test_public_names_are_valid_function_names_and_unique():
    assert public_name("echo", "lighthouse_lookup") == "mcp__echo__lighthouse_lookup"
    assert split_name("mcp__echo__lighthouse_lookup") == ("echo", "lighthouse_lookup")
    odd = ["dotted.name", "dotted_name", "a/b c", "x" * 80, "x" * 81]
    names = [public_name("my-server", tool) for tool in odd]
    assert all(OPENAI_NAME.match(n) for n in names), names
    assert len(set(names)) == len(names)
    assert names[1] == "mcp__my-server__dotted_name" and names[0].startswith("mcp__my-server__dotted_name_")
    with pytest.raises(ValueError):
        split_name("web_search")


# --- list_tools against the real stdio server -------------------------------------


async def test_list_tools_namespaces_prefixes_and_filters(echo: McpActivities):
    schemas = await echo.list_tools("researcher")
    by_name = {s["function"]["name"]: s for s in schemas}
    assert "mcp__echo__lighthouse_lookup" in by_name
    assert not any("secret_vault" in name for name in by_name)  # not in enabled_tools
    assert all(s["type"] == "function" and OPENAI_NAME.match(s["function"]["name"]) for s in schemas)
    lookup = by_name["mcp__echo__lighthouse_lookup"]["function"]
    assert lookup["description"] == "[MCP server echo] Look up a little-known fact about a lighthouse by its name."
    assert lookup["parameters"]["type"] == "object"
    assert lookup["parameters"]["properties"]["name"]["type"] == "string"
    assert lookup["parameters"]["required"] == ["name"]
    assert await echo.list_tools("coder") == []  # the server serves the researcher only


async def test_list_tools_per_agent_across_servers():
    activities = activities_for(
        {
            "alpha": echo_server(enabled_tools=["lighthouse_lookup"]),
            "beta": echo_server(enabled_tools=["secret_vault"], agents=["coder"]),
            "gamma": echo_server(enabled_tools=[]),  # an explicit empty list: none
        }
    )
    researcher = [s["function"]["name"] for s in await activities.list_tools("researcher")]
    coder = [s["function"]["name"] for s in await activities.list_tools("coder")]
    assert researcher == ["mcp__alpha__lighthouse_lookup"]
    assert coder == ["mcp__beta__secret_vault"]


async def test_no_config_means_no_tools():
    activities = McpActivities(None)
    assert await activities.list_tools("researcher") == []
    result = await activities.call_tool(call("mcp__echo__lighthouse_lookup", name="x"))
    assert result.error and "no MCP server named 'echo'" in result.content


# --- call_tool ----------------------------------------------------------------------


async def test_call_tool_returns_the_servers_fact(echo: McpActivities, echo_log: Path):
    result = await echo.call_tool(call("mcp__echo__lighthouse_lookup", name="Skerryvore"))
    assert not result.error
    assert SKERRYVORE in result.content
    assert calls_logged(echo_log) == [{"tool": "lighthouse_lookup", "arguments": {"name": "Skerryvore"}}]


async def test_call_tool_passes_the_configured_environment(tmp_path: Path):
    activities = activities_for({"echo": echo_server(env={"MCP_ECHO_TOKEN": "tok-31337"})})
    result = await activities.call_tool(call("mcp__echo__lighthouse_lookup", name="Bell Rock"))
    assert "Bell Rock lighthouse is painted in 7 ochre bands" in result.content
    assert "(token tok-31337)" in result.content


async def test_worker_secrets_do_not_reach_stdio_servers(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-secret")
    activities = activities_for({"echo": echo_server(env={"MCP_ECHO_TOKEN": "given"})})
    secret = await activities.call_tool(call("mcp__echo__has_env", name="OPENAI_API_KEY"))
    given = await activities.call_tool(call("mcp__echo__has_env", name="MCP_ECHO_TOKEN"))
    path = await activities.call_tool(call("mcp__echo__has_env", name="PATH"))
    assert (secret.content, given.content, path.content) == ("unset", "set", "set")


async def test_failing_tool_gives_a_readable_error(echo: McpActivities):
    result = await echo.call_tool(call("mcp__echo__broken_gauge", reading=42))
    assert result.error
    assert result.content.startswith("Error: MCP tool broken_gauge on server 'echo' failed:")
    assert "gauge jammed at reading 42" in result.content


async def test_bad_arguments_are_the_models_to_fix(echo: McpActivities):
    wrong = await echo.call_tool(call("mcp__echo__lighthouse_lookup", nam="x"))
    assert wrong.error and "name" in wrong.content
    not_json = await echo.call_tool(McpCallRequest(name="mcp__echo__lighthouse_lookup", arguments_json="{name:"))
    assert not_json.error and "not valid JSON" in not_json.content
    a_list = await echo.call_tool(McpCallRequest(name="mcp__echo__lighthouse_lookup", arguments_json="[1]"))
    assert a_list.error and "must be a JSON object" in a_list.content


async def test_disabled_unknown_and_foreign_tools_never_run(echo: McpActivities, echo_log: Path):
    disabled = await echo.call_tool(call("mcp__echo__secret_vault", code="1234"))
    assert disabled.error and "no enabled tool called mcp__echo__secret_vault" in disabled.content
    unknown = await echo.call_tool(call("mcp__echo__no_such_tool"))
    assert unknown.error
    other_server = await echo.call_tool(call("mcp__nope__lighthouse_lookup", name="x"))
    assert other_server.error and "no MCP server named 'nope'" in other_server.content
    wrong_agent = await echo.call_tool(
        McpCallRequest(name="mcp__echo__lighthouse_lookup", arguments_json='{"name": "x"}', agent="coder")
    )
    assert wrong_agent.error and "not enabled for the coder agent" in wrong_agent.content
    assert calls_logged(echo_log) == []


async def test_names_changed_for_openai_map_back(echo: McpActivities, echo_log: Path):
    schemas = await echo.list_tools("researcher")
    dotted = next(s["function"]["name"] for s in schemas if "dotted" in s["function"]["name"])
    assert dotted == public_name("echo", "dotted.name") and "." not in dotted
    result = await echo.call_tool(call(dotted, text="hello"))
    assert result.content == "dotted echo: hello"
    assert calls_logged(echo_log)[-1]["tool"] == "dotted.name"


async def test_resource_links_become_sources(echo: McpActivities):
    result = await echo.call_tool(call("mcp__echo__source_card", topic="tides"))
    assert "Card about tides" in result.content
    assert "https://example.org/cards/tides" in result.content
    assert [(s.title, s.url) for s in result.sources] == [("tides source", "https://example.org/cards/tides")]


async def test_long_results_go_to_the_blob_store(tmp_path: Path):
    blobs = FileBlobStore(tmp_path / "blobs")
    activities = activities_for({"echo": echo_server()}, blobs)
    text = "tide table row\n" * 2_000
    result = await activities.call_tool(call("mcp__echo__slow_echo", text=text, seconds=0))
    assert not result.error and result.blob is not None
    assert len(result.content) < 200 and "slow_echo" in result.content
    assert await blobs.get(result.blob) == text


async def test_slow_server_times_out_as_a_retryable_failure():
    activities = activities_for({"echo": echo_server(timeout=3)})
    started = time.monotonic()
    with pytest.raises(ApplicationError, match=r"MCP server 'echo' did not answer within 3 s") as caught:
        await activities.call_tool(call("mcp__echo__slow_echo", text="zzz", seconds=30))
    assert not caught.value.non_retryable
    assert time.monotonic() - started < 15


# --- servers that do not work -------------------------------------------------------


async def test_broken_command_is_a_clear_error(tmp_path: Path):
    missing = str(tmp_path / "no-such-mcp-server")
    activities = activities_for({"broken": {"command": missing}})
    result = await activities.call_tool(call("mcp__broken__anything"))
    assert result.error
    assert result.content == (
        f"Error: MCP server 'broken' could not be started: {missing!r}: command not found "
        "(check servers.broken.command in the MCP config)"
    )
    with pytest.raises(ApplicationError, match="MCP server 'broken' could not be started") as caught:
        await activities.list_tools("researcher")
    assert caught.value.non_retryable and caught.value.type == "McpServerError"


async def test_server_that_exits_shows_its_last_words():
    crash = "import sys; print('fatal: no licence file at /etc/lighthouse.lic', file=sys.stderr); sys.exit(3)"
    activities = activities_for({"crashy": {"command": sys.executable, "args": ["-c", crash]}})
    result = await activities.call_tool(call("mcp__crashy__lighthouse_lookup", name="x"))
    assert result.error
    assert "MCP server 'crashy' exited before it was ready" in result.content
    assert "no licence file at /etc/lighthouse.lic" in result.content
    with pytest.raises(ApplicationError, match="no licence file") as caught:
        await activities.list_tools("researcher")
    assert caught.value.non_retryable


async def test_one_broken_server_names_itself_in_the_listing_error():
    activities = activities_for({"good": echo_server(), "bad": {"command": "/nonexistent/mcp"}})
    with pytest.raises(ApplicationError) as caught:
        await activities.list_tools("researcher")
    assert "MCP server 'bad'" in str(caught.value) and "'good'" not in str(caught.value)


# --- streamable HTTP ------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_echo():
    """The echo server on streamable HTTP, wanting a bearer token."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(ECHO), "--http", str(port), "--token", "sesame"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not port_open("127.0.0.1", port):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("the HTTP echo server did not start")
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


async def test_http_server_with_headers(http_echo: str):
    activities = McpActivities(
        McpConfig.parse(
            {
                "servers": {
                    "web": {
                        "transport": "http",
                        "url": http_echo,
                        "headers": {"Authorization": "Bearer ${ECHO_TOKEN}"},
                        "enabled_tools": ["lighthouse_lookup"],
                        "agents": ["coder"],
                    }
                }
            },
            env={"ECHO_TOKEN": "sesame"},
        )
    )
    schemas = await activities.list_tools("coder")
    assert [s["function"]["name"] for s in schemas] == ["mcp__web__lighthouse_lookup"]
    assert schemas[0]["function"]["description"].startswith("[MCP server web] ")
    result = await activities.call_tool(call("mcp__web__lighthouse_lookup", name="Skerryvore"))
    assert not result.error and SKERRYVORE in result.content


async def test_http_server_refusing_us_is_reported(http_echo: str):
    activities = activities_for({"web": {"transport": "http", "url": http_echo}})  # no token
    with pytest.raises(
        ApplicationError,
        match=r"MCP server 'web' at .* refused the connection \(HTTP error; check its url and headers\)",
    ):
        await activities.call_tool(call("mcp__web__lighthouse_lookup", name="x"))
    wrong_path = activities_for(
        {"web": {"url": http_echo.replace("/mcp", "/nope"), "headers": {"Authorization": "Bearer sesame"}}}
    )
    result = await wrong_path.call_tool(call("mcp__web__lighthouse_lookup", name="x"))
    assert result.error and "no MCP endpoint at" in result.content


async def test_unreachable_http_server_is_a_retryable_failure():
    port = free_port()  # nothing listens there
    url = f"http://127.0.0.1:{port}/mcp"
    # Credentials and query strings in the URL never reach messages (or history).
    activities = activities_for({"web": {"transport": "http", "url": f"http://user:pw@127.0.0.1:{port}/mcp?key=k"}})
    with pytest.raises(ApplicationError, match=rf"MCP server 'web' at {re.escape(url)} cannot be reached") as caught:
        await activities.call_tool(call("mcp__web__lighthouse_lookup", name="x"))
    assert not caught.value.non_retryable and caught.value.type == "McpUnavailable"
    assert "pw" not in str(caught.value) and "key=k" not in str(caught.value)
    with pytest.raises(ApplicationError, match="cannot be reached") as caught:
        await activities.list_tools("researcher")
    assert not caught.value.non_retryable


def test_command_line_check_lists_each_agents_tools(tmp_path: Path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"servers": {"echo": echo_server(enabled_tools=["lighthouse_lookup"])}}))
    env = {"PATH": "/usr/bin:/bin", "DEEPRESEARCH_MCP_CONFIG": str(config), "DEEPRESEARCH_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "activities.mcp"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent.parent,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "researcher: 1 MCP tool(s)\n  mcp__echo__lighthouse_lookup: [MCP server echo] Look up" in done.stdout
    assert "coder: 0 MCP tool(s)" in done.stdout
    config.write_text("{}")
    done = subprocess.run(
        [sys.executable, "-m", "activities.mcp"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent.parent,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.strip() == f"error: MCP config {config}: servers is required"


def test_stdio_config_type_is_exported():
    # The worker builds McpActivities from load_mcp_config(); the model is public for it.
    assert StdioServerConfig(command="x").agents == ["researcher"]
