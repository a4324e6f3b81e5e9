"""The web_search activity over every engine, against scripted loopback servers.

The activity is called directly (no Temporal needed): each test checks what
the engine sent, how the service's answer became hits, and the error policy
(readable ToolResult for permanent problems, retryable ApplicationError for
transient ones).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException
from temporalio.exceptions import ApplicationError

from activities.search.activities import SearchActivities
from activities.search.arxiv import ArxivEngine
from activities.search.base import Hit, domain_matches, retry_after
from activities.search.brave import BraveEngine
from activities.search.duckduckgo import DuckDuckGoEngine
from activities.search.searxng import SearxngEngine
from activities.search.tavily import TavilyEngine
from infra.errors import ConfigError
from infra.settings import Settings, parse_domains
from testkit.engines import ScriptedArxiv, ScriptedBrave, ScriptedSearxng
from testkit.http_base import ScriptedServer
from testkit.search_server import ScriptedTavily
from workflows.tool_models import SearchRequest, ToolResult


def hits(n: int, host: str = "example.com") -> list[dict]:
    return [{"title": f"Result {i}", "url": f"https://{host}/page{i}", "content": f"text {i}"} for i in range(1, n + 1)]


def settings_for(engine: str, server: ScriptedServer | None = None, **env: str) -> Settings:
    values = {"OPENAI_API_KEY": "test-openai-key", "DEEPRESEARCH_SEARCH_ENGINE": engine}
    if server is not None:
        values |= {
            "tavily": {"TAVILY_API_KEY": server.api_key, "TAVILY_BASE_URL": f"http://127.0.0.1:{server.port}"},
            "searxng": {"SEARXNG_URL": f"http://127.0.0.1:{server.port}"},
            "brave": {"BRAVE_API_KEY": server.api_key, "BRAVE_BASE_URL": f"http://127.0.0.1:{server.port}"},
            "arxiv": {"ARXIV_BASE_URL": f"http://127.0.0.1:{server.port}"},
        }[engine]
    return Settings.from_env(values | env)


async def search(settings: Settings, query: str, max_results: int = 3, engine=None) -> ToolResult:
    activities = SearchActivities(settings, engine=engine)
    try:
        return await activities.web_search(SearchRequest(query=query, max_results=max_results))
    finally:
        await activities.aclose()


SERVERS: dict[str, Callable[..., ScriptedServer]] = {
    "tavily": ScriptedTavily,
    "searxng": ScriptedSearxng,
    "brave": ScriptedBrave,
    "arxiv": ScriptedArxiv,
}


@contextmanager
def server_for(engine: str, handler=None) -> Iterator[ScriptedServer]:
    with SERVERS[engine](handler or (lambda query, count: hits(5))) as server:
        yield server


# --- each engine's request and response mapping --------------------------------


async def test_tavily_mapping():
    with ScriptedTavily(lambda query, max_results: hits(5)) as tavily:
        settings = settings_for("tavily", tavily)
        assert isinstance(SearchActivities(settings).engine, TavilyEngine)
        result = await search(settings, "  tidal   power ", max_results=2)
    [request] = tavily.requests
    assert request["query"] == "tidal power" and request["max_results"] == 2
    assert request["body"]["search_depth"] == "basic"
    assert not result.error
    assert [s.url for s in result.sources] == ["https://example.com/page1", "https://example.com/page2"]
    assert result.sources[0].title == "Result 1"
    assert result.content.startswith("Search results for 'tidal power':")
    assert "1. Result 1\n   URL: https://example.com/page1\n   text 1" in result.content


class FakeDDGS:
    """Stands in for ``ddgs.DDGS``: ddgs cannot reach the internet in tests,
    so the DuckDuckGo engine is given this object through its constructor and
    the test checks the call it receives and the mapping of its rows."""

    def __init__(self, rows: list[dict] | None = None, error: Exception | None = None) -> None:
        self.rows = rows or []
        self.error = error
        self.calls: list[tuple[str, dict]] = []

    def text(self, query: str, **kwargs) -> list[dict]:
        self.calls.append((query, kwargs))
        if self.error:
            raise self.error
        return self.rows[: kwargs.get("max_results") or len(self.rows)]


async def test_duckduckgo_mapping():
    rows = [
        {"title": "Tides &amp; <b>moon</b>", "href": "https://example.com/tides", "body": "The  moon\npulls."},
        {"title": "No link", "href": "", "body": "dropped"},
        {"title": "FTP", "href": "ftp://example.com/x", "body": "dropped too"},
        {"title": "Second", "href": "https://en.wikipedia.org/wiki/Tide", "body": "Tides are..."},
    ]
    fake = FakeDDGS(rows)
    settings = settings_for("duckduckgo")
    result = await search(settings, "tides", max_results=4, engine=DuckDuckGoEngine(ddgs=fake))
    assert fake.calls == [("tides", {"max_results": 4, "backend": "auto"})]
    assert [(s.title, s.url) for s in result.sources] == [
        ("Tides & moon", "https://example.com/tides"),
        ("Second", "https://en.wikipedia.org/wiki/Tide"),
    ]
    assert "The moon pulls." in result.content and "dropped" not in result.content


def test_duckduckgo_is_the_keyless_default():
    settings = Settings.from_env({"OPENAI_API_KEY": "k"})
    assert settings.search_engine == "duckduckgo"
    settings.check()
    assert isinstance(SearchActivities(settings).engine, DuckDuckGoEngine)
    assert Settings.from_env({"OPENAI_API_KEY": "k", "TAVILY_API_KEY": "t"}).search_engine == "tavily"


async def test_duckduckgo_errors():
    settings = settings_for("duckduckgo")

    async def run(error: Exception) -> ToolResult:
        return await search(settings, "q", engine=DuckDuckGoEngine(ddgs=FakeDDGS(error=error)))

    assert (await run(DDGSException("No results found."))).content == "No results for 'q'."
    with pytest.raises(ApplicationError) as limited:
        await run(RatelimitException("202 Ratelimit"))
    assert limited.value.type == "SearchRateLimited" and not limited.value.non_retryable
    assert limited.value.next_retry_delay == timedelta(seconds=10)
    for error in (TimeoutException("timed out"), DDGSException("ConnectError: dns")):
        with pytest.raises(ApplicationError) as unavailable:
            await run(error)
        assert unavailable.value.type == "SearchUnavailable" and not unavailable.value.non_retryable


async def test_searxng_mapping():
    rows = hits(4) + [{"title": "", "url": "https://example.org/untitled", "content": "x"}]
    with ScriptedSearxng(lambda query, count: rows) as searxng:
        settings = settings_for("searxng", searxng, SEARXNG_URL=f"http://127.0.0.1:{searxng.port}/")
        result = await search(settings, "open source search", max_results=3)
        untitled = await search(settings, "untitled", max_results=5)
    request = searxng.requests[0]
    assert request["query"] == "open source search" and request["params"]["format"] == "json"
    assert [s.url for s in result.sources] == [f"https://example.com/page{i}" for i in (1, 2, 3)]
    assert "2. Result 2\n   URL: https://example.com/page2\n   text 2" in result.content
    assert untitled.sources[-1].url == "https://example.org/untitled"
    assert "5. https://example.org/untitled\n" in untitled.content  # no title: the URL stands in


async def test_searxng_without_json_format_is_a_readable_error():
    with ScriptedSearxng() as searxng:
        searxng.json_enabled = False  # SearxNG's default settings.yml
        settings = settings_for("searxng", searxng)
        assert isinstance(SearchActivities(settings).engine, SearxngEngine)
        result = await search(settings, "q")
    assert searxng.requests[0]["_status"] == 403
    assert result.error and result.content.startswith("Error: ") and "search.formats" in result.content


async def test_brave_mapping():
    rows = [
        {
            "title": "Brave <strong>search</strong>",
            "url": "https://brave.com/search/api/",
            "content": "The <strong>Brave</strong> Search API &amp; more",
        },
        *hits(6),
    ]
    with ScriptedBrave(lambda query, count: rows) as brave:
        settings = settings_for("brave", brave)
        assert isinstance(SearchActivities(settings).engine, BraveEngine)
        result = await search(settings, "brave api", max_results=4)
    [request] = brave.requests
    assert request["query"] == "brave api" and request["count"] == 4 and request["_status"] == 200
    assert [s.url for s in result.sources][:2] == ["https://brave.com/search/api/", "https://example.com/page1"]
    assert len(result.sources) == 4
    assert result.sources[0].title == "Brave search"
    assert "The Brave Search API & more" in result.content


async def test_arxiv_mapping():
    paper = {
        "title": "Attention Is\n   All You Need",
        "url": "http://arxiv.org/abs/1706.03762",
        "content": "The dominant sequence transduction models\n are based on ...",
        "authors": ["Ashish Vaswani", "Noam Shazeer"],
        "published": "2017-06-12T17:57:34Z",
    }
    local = {"title": "Second paper", "url": "http://127.0.0.1:9/abs/2401.00001", "content": "Abstract two."}
    with ScriptedArxiv(lambda query, count: [paper, local, paper | {"url": "http://arxiv.org/abs/x"}]) as arxiv:
        settings = settings_for("arxiv", arxiv)
        assert isinstance(SearchActivities(settings).engine, ArxivEngine)
        result = await search(settings, "transformer attention", max_results=2)
    [request] = arxiv.requests
    assert request["search_query"] == "all:transformer attention" and request["max_results"] == 2
    assert [(s.title, s.url) for s in result.sources] == [
        ("Attention Is All You Need", "https://arxiv.org/abs/1706.03762"),  # abs link, https
        ("Second paper", "http://127.0.0.1:9/abs/2401.00001"),
    ]
    assert "Ashish Vaswani, Noam Shazeer (2017-06-12). The dominant sequence transduction models are" in result.content


async def test_arxiv_query_error_is_a_readable_error():
    with ScriptedArxiv() as arxiv:
        arxiv.query_error = "malformed query"
        result = await search(settings_for("arxiv", arxiv), "(((")
    assert result.error and result.content == "Error: arxiv rejected the query: malformed query"


# --- domain filters and max_results --------------------------------------------

MIXED = [
    {"title": "a", "url": "https://example.com/a", "content": ""},
    {"title": "b", "url": "https://docs.example.com:8443/b", "content": ""},
    {"title": "c", "url": "https://notexample.com/c", "content": ""},
    {"title": "d", "url": "https://other.org/d", "content": ""},
    {"title": "e", "url": "https://spam.other.org/e", "content": ""},
    {"title": "f", "url": "https://example.com/a", "content": "duplicate"},
]


@pytest.mark.parametrize("engine", ["searxng", "brave", "tavily"])
async def test_include_domains(engine: str):
    with server_for(engine, lambda query, count: MIXED) as server:
        settings = settings_for(engine, server, DEEPRESEARCH_SEARCH_INCLUDE_DOMAINS="example.com")
        result = await search(settings, "q", max_results=5)
    assert [s.url for s in result.sources] == ["https://example.com/a", "https://docs.example.com:8443/b"]
    if engine == "tavily":  # passed to Tavily natively too
        assert server.requests[0]["body"]["include_domains"] == ["example.com"]
        assert server.requests[0]["max_results"] == 5
    if engine == "brave":  # asks for more, since filtering happens afterwards
        assert server.requests[0]["count"] == 15


@pytest.mark.parametrize("engine", ["searxng", "tavily"])
async def test_exclude_domains(engine: str):
    with server_for(engine, lambda query, count: MIXED) as server:
        settings = settings_for(
            engine, server, DEEPRESEARCH_SEARCH_EXCLUDE_DOMAINS="other.org, https://notexample.com/"
        )
        result = await search(settings, "q", max_results=2)
    assert [s.url for s in result.sources] == ["https://example.com/a", "https://docs.example.com:8443/b"]
    if engine == "tavily":
        assert server.requests[0]["body"]["exclude_domains"] == ["other.org", "notexample.com"]


async def test_everything_filtered_out_says_so():
    fake = FakeDDGS([{"title": "x", "href": "https://other.org/x", "body": ""}])
    settings = settings_for("duckduckgo", DEEPRESEARCH_SEARCH_INCLUDE_DOMAINS="example.com")
    result = await search(settings, "q", engine=DuckDuckGoEngine(ddgs=fake))
    assert not result.error and not result.sources
    assert result.content.startswith("No results for 'q'.") and "outside the allowed domains" in result.content
    assert fake.calls[0][1]["max_results"] == 9  # 3 asked, over-fetched for the filter


@pytest.mark.parametrize("engine", ["tavily", "searxng", "brave", "arxiv"])
async def test_max_results(engine: str):
    with server_for(engine, lambda query, count: hits(12)) as server:
        one = await search(settings_for(engine, server), "q", max_results=1)
        seven = await search(settings_for(engine, server), "q", max_results=7)
    assert [s.url for s in one.sources] == ["https://example.com/page1"]
    assert len(seven.sources) == 7 and "7. Result 7" in seven.content and "8. " not in seven.content


def test_domain_matching():
    assert domain_matches("https://a.b.example.com/x", ["example.com"])
    assert domain_matches("http://EXAMPLE.com.:80/", ["example.com"])
    assert not domain_matches("https://badexample.com/", ["example.com"])
    assert parse_domains(" Example.com,*.docs.org ; https://www.x.io/path,,example.com") == (
        "example.com",
        "docs.org",
        "www.x.io",
    )


# --- error policy ---------------------------------------------------------------


@pytest.mark.parametrize("engine", ["tavily", "searxng", "brave", "arxiv"])
async def test_server_error_is_retryable(engine: str):
    with server_for(engine) as server:
        server.fail_next(1, status=500)
        with pytest.raises(ApplicationError) as info:
            await search(settings_for(engine, server), "q")
        ok = await search(settings_for(engine, server), "q")  # what Temporal's retry would get
    assert info.value.type == "SearchUnavailable" and not info.value.non_retryable
    assert "unavailable" in str(info.value)
    assert not ok.error and len(ok.sources) == 3


@pytest.mark.parametrize("engine", ["tavily", "searxng", "brave", "arxiv"])
async def test_rate_limit_honours_retry_after(engine: str):
    with server_for(engine) as server:
        server.fail_next(1, status=429, retry_after=7)
        with pytest.raises(ApplicationError) as info:
            await search(settings_for(engine, server), "q")
    assert info.value.type == "SearchRateLimited" and not info.value.non_retryable
    assert info.value.next_retry_delay == timedelta(seconds=7)


@pytest.mark.parametrize("engine", ["tavily", "brave"])
async def test_bad_key_is_a_readable_error(engine: str):
    with server_for(engine) as server:
        key = {"tavily": "TAVILY_API_KEY", "brave": "BRAVE_API_KEY"}[engine]
        result = await search(settings_for(engine, server, **{key: "wrong-key"}), "q")
    assert server.requests[0]["_status"] == 401
    assert result.error and result.content.startswith("Error: ") and key in result.content
    assert "wrong-key" not in result.content


async def test_bad_request_is_a_readable_error():
    with ScriptedBrave() as brave:
        brave.fail_next(1, status=400)
        result = await search(settings_for("brave", brave), "q")
    assert result.error and result.content.startswith("Error: bad search request to brave (HTTP 400")


@pytest.mark.parametrize("engine", ["tavily", "searxng", "brave", "arxiv"])
async def test_unreachable_server_is_retryable(engine: str):
    with server_for(engine) as server:
        settings = settings_for(engine, server)
    with pytest.raises(ApplicationError) as info:  # the server is gone: connection refused
        await search(settings, "q")
    assert info.value.type == "SearchUnavailable" and not info.value.non_retryable


async def test_unforeseen_failure_is_a_readable_error():
    class Broken:
        name = "broken"
        filters_domains = False

        async def search(self, query: str, max_results: int) -> list[Hit]:
            raise RuntimeError("boom with secret test-openai-key")

    result = await search(settings_for("duckduckgo"), "q", engine=Broken())
    assert result.error and result.content == "Error: the broken search failed (RuntimeError: boom with secret ***)."


async def test_empty_query():
    result = await search(settings_for("duckduckgo"), "   ", engine=DuckDuckGoEngine(ddgs=FakeDDGS()))
    assert result.error and "empty" in result.content


def test_retry_after_parsing():
    assert retry_after({"Retry-After": "12"}) == 12
    assert retry_after({"Retry-After": "0"}) == 1  # never hammer at once
    assert retry_after({"Retry-After": "99999"}) == 600
    assert retry_after({"X-RateLimit-Reset": "3, 86400"}) == 3  # Brave's header
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 1  # a past date
    assert retry_after({}) is None and retry_after({"Retry-After": "soon"}) is None


# --- configuration --------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"DEEPRESEARCH_SEARCH_ENGINE": "tavily"}, "TAVILY_API_KEY is not set"),
        ({"DEEPRESEARCH_SEARCH_ENGINE": "searxng"}, "SEARXNG_URL is not set"),
        ({"DEEPRESEARCH_SEARCH_ENGINE": "brave"}, "BRAVE_API_KEY is not set"),
        ({"DEEPRESEARCH_SEARCH_ENGINE": "searxng", "SEARXNG_URL": "localhost:8888"}, "is not an http(s) address"),
        ({"DEEPRESEARCH_SEARCH_ENGINE": "google"}, "use one of: tavily, duckduckgo, searxng, brave, arxiv"),
    ],
)
def test_check_names_what_to_set(env: dict[str, str], needle: str, tmp_path: Path):
    settings = Settings.from_env({"OPENAI_API_KEY": "k", "DEEPRESEARCH_DATA_DIR": str(tmp_path)} | env)
    with pytest.raises(ConfigError) as info:
        settings.check()
    message = str(info.value)
    assert needle in message and "\n" not in message


@pytest.mark.parametrize(
    "env",
    [
        {"DEEPRESEARCH_SEARCH_ENGINE": "duckduckgo"},
        {"DEEPRESEARCH_SEARCH_ENGINE": "ARXIV"},
        {"DEEPRESEARCH_SEARCH_ENGINE": "searxng", "SEARXNG_URL": "http://localhost:8888"},
        {"DEEPRESEARCH_SEARCH_ENGINE": "brave", "BRAVE_API_KEY": "b"},
        {"TAVILY_API_KEY": "t"},
    ],
)
def test_check_accepts_each_engine(env: dict[str, str]):
    Settings.from_env({"OPENAI_API_KEY": "k"} | env).check()


def test_search_settings_from_env():
    settings = Settings.from_env(
        {
            "OPENAI_API_KEY": "k",
            "DEEPRESEARCH_SEARCH_ENGINE": "brave",
            "BRAVE_API_KEY": "brave-secret",
            "BRAVE_BASE_URL": "http://brave.local",
            "ARXIV_BASE_URL": "http://arxiv.local",
            "SEARXNG_URL": " http://searx.local ",
            "DEEPRESEARCH_SEARCH_INCLUDE_DOMAINS": "a.com,b.org",
            "DEEPRESEARCH_SEARCH_EXCLUDE_DOMAINS": "c.net",
        }
    )
    assert settings.search_engine == "brave"
    assert (settings.brave_base_url, settings.arxiv_base_url, settings.searxng_url) == (
        "http://brave.local",
        "http://arxiv.local",
        "http://searx.local",
    )
    assert settings.include_domains == ("a.com", "b.org") and settings.exclude_domains == ("c.net",)
    assert "brave-secret" in settings.secrets
