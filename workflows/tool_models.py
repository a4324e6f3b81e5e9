"""What the tools are asked and what they answer (search, crawl, Python,
local documents, MCP): the activity requests and the ``ToolResult`` every
tool activity returns to an agent loop. Pure pydantic, like
``workflows/models.py``."""

from __future__ import annotations

from pydantic import Field

from workflows.models import Citation, Model


class SearchRequest(Model):
    query: str
    max_results: int = 3


class CrawlRequest(Model):
    url: str


class CodeRequest(Model):
    session: str  # one sandbox session per step
    code: str
    # Cells this session already ran successfully, oldest first; a worker
    # that does not hold the session (restart, other machine) replays them.
    # New runs send them as blob references (``previous_refs``, after
    # ``previous``), so a long session does not resend all its code each time.
    previous: list[str] = Field(default_factory=list)
    previous_refs: list[str] = Field(default_factory=list)


class IndexRequest(Model):
    run_key: str = Field(min_length=1)  # one index per run
    paths: list[str] = Field(default_factory=list)


class LocalSearchRequest(Model):
    run_key: str = Field(min_length=1)
    query: str
    max_results: int = 5


class McpCallRequest(Model):
    name: str  # the namespaced name, mcp__<server>__<tool>
    arguments_json: str = "{}"  # raw JSON text, as the model wrote it
    agent: str | None = None  # when given, the server must serve this agent


# Tools that read on in a long output the run already holds (a crawled page,
# a long MCP result or code output): answered without an activity, the model
# activity shows the part or passages asked for (activities/reading.py).
READER_TOOLS = ("read_page", "find_in_page")


class ToolResult(Model):
    """What every tool activity returns to an agent loop."""

    content: str  # shown to the model
    blob: str | None = None  # long body, appended by the model activity
    sources: list[Citation] = Field(default_factory=list)
    error: bool = False
    cell: str | None = None  # run_python: the blob reference of the cell's code
    # What of ``blob`` to show (see ``Message``): a part, or passages on a query.
    part: int | None = None
    query: str | None = None
    source: str | None = None
    # crawl: the page's validators, so a later run can ask whether it changed
    etag: str | None = None
    last_modified: str | None = None
