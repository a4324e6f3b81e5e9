"""The ``web_search`` tool: several search engines behind one interface.

``DEEPRESEARCH_SEARCH_ENGINE`` picks the engine (see ``docs/search.md``):

- ``tavily``: the official ``tavily-python`` client (``TAVILY_API_KEY``),
- ``duckduckgo``: keyless, through the ``ddgs`` package,
- ``searxng``: a self-hosted SearxNG instance's JSON API (``SEARXNG_URL``),
- ``brave``: the Brave Search API (``BRAVE_API_KEY``),
- ``arxiv``: the arXiv API (Atom feed), for scientific papers.

Every engine returns ``Hit``s; the activity applies the domain filters
(``DEEPRESEARCH_SEARCH_INCLUDE_DOMAINS`` / ``..._EXCLUDE_DOMAINS``) and
``max_results`` to all of them and formats one ``ToolResult``.

Error policy: a permanent problem (bad key, bad request, unreadable answer)
becomes a readable ``ToolResult(error=True)`` for the agent; a transient one
(connection error, timeout, 5xx, rate limit) raises a retryable
``ApplicationError`` (type ``SearchUnavailable`` or ``SearchRateLimited``, the
latter with ``next_retry_delay`` from ``Retry-After``) so Temporal retries it.
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx
from tavily import AsyncTavilyClient
from tavily import errors as tavily_errors
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.retry_after import retry_delay
from infra.errors import ConfigError
from infra.settings import SEARCH_ENGINES, Settings
from workflows.models import Citation, SearchRequest, ToolResult

log = logging.getLogger(__name__)

SNIPPET_CHARS = 1_500
MAX_RESULTS = 20  # the most any engine is asked for (Tavily's and Brave's cap)
DEFAULT_RATE_LIMIT_DELAY = 10.0  # seconds, when a 429 does not say
MAX_RETRY_DELAY = 600.0
HTTP_TIMEOUT = httpx.Timeout(20.0, connect=10.0)
USER_AGENT = "deepresearch-temporal/0.1"
BRAVE_BASE_URL = "https://api.search.brave.com"
ARXIV_BASE_URL = "https://export.arxiv.org"
ATOM = "{http://www.w3.org/2005/Atom}"


# --- the interface -------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    title: str
    url: str
    content: str = ""


class SearchEngine(Protocol):
    name: str
    # True when the engine applies the domain lists itself (the activity still
    # re-checks every hit); False makes the activity ask for more results so
    # that enough remain after filtering.
    filters_domains: bool

    async def search(self, query: str, max_results: int) -> list[Hit]: ...


class SearchRejected(Exception):
    """Permanent: retrying will not help. The message is shown to the agent."""


class SearchUnavailable(Exception):
    """Transient: the activity raises a retryable ApplicationError."""

    def __init__(self, message: str, *, rate_limited: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.rate_limited = rate_limited
        self.retry_after = retry_after


# --- helpers -------------------------------------------------------------------


def format_hits(query: str, hits: Sequence[Hit | Mapping[str, Any]]) -> str:
    if not hits:
        return f"No results for {query!r}."
    lines = [f"Search results for {query!r}:"]
    for n, hit in enumerate(hits, 1):
        if isinstance(hit, Hit):
            title, url, content = hit.title, hit.url, hit.content
        else:
            title, url, content = hit.get("title"), hit["url"], hit.get("content")
        snippet = " ".join(str(content or "").split())[:SNIPPET_CHARS]
        lines.append(f"{n}. {title or url}\n   URL: {url}\n   {snippet}")
    return "\n".join(lines)


def _text(value: Any) -> str:
    """Plain one-line text: HTML tags and entities removed, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", str(value or ""))).split())


def _hit(title: Any, url: Any, content: Any) -> Hit | None:
    url = str(url or "").strip()
    if urlsplit(url).scheme not in ("http", "https"):
        return None
    return Hit(title=_text(title), url=url, content=_text(content))


def _hits(rows: Sequence[Any], title: str, url: str, content: str) -> list[Hit]:
    """Hits from a service's result dicts, given its names for the three fields."""
    return [
        hit
        for row in rows
        if isinstance(row, Mapping) and (hit := _hit(row.get(title), row.get(url), row.get(content)))
    ]


def domain_matches(url: str, domains: Sequence[str]) -> bool:
    """True when the URL's host is one of ``domains`` or a subdomain of one."""
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    return any(host == d or host.endswith("." + d) for d in domains)


def filter_hits(hits: Sequence[Hit], include: Sequence[str], exclude: Sequence[str], max_results: int) -> list[Hit]:
    kept: list[Hit] = []
    seen: set[str] = set()
    for hit in hits:
        if hit.url in seen:
            continue
        if include and not domain_matches(hit.url, include):
            continue
        if exclude and domain_matches(hit.url, exclude):
            continue
        seen.add(hit.url)
        kept.append(hit)
    return kept[:max_results]


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or HTTP date), else from
    Brave's ``X-RateLimit-Reset`` (first window), else None."""
    delay = retry_delay(headers.get("Retry-After"), timedelta(seconds=MAX_RETRY_DELAY))
    seconds = delay.total_seconds() if delay is not None else None
    if seconds is None:
        reset = (headers.get("X-RateLimit-Reset") or "").split(",")[0].strip()
        try:
            seconds = float(reset) if reset else None
        except ValueError:
            seconds = None
    if seconds is None:
        return None
    return min(max(seconds, 1.0), MAX_RETRY_DELAY)


def _detail(response: httpx.Response) -> str:
    """A short human-readable reason from an error response body."""
    try:
        body: Any = response.json()
    except ValueError:
        return _text(response.text)[:200]
    for _ in range(3):  # {"error": {"detail": ...}}, {"detail": {"error": ...}}, ...
        if not isinstance(body, dict):
            break
        for key in ("detail", "error", "message", "msg"):
            if body.get(key):
                body = body[key]
                break
        else:
            break
    return _text(body if isinstance(body, str) else str(body))[:200]


def _http_error(engine: str, response: httpx.Response, key_name: str | None) -> Exception:
    status, detail = response.status_code, _detail(response)
    reason = f"HTTP {status}" + (f": {detail}" if detail else "")
    if status == 429:
        return SearchUnavailable(
            f"{engine} rate limit ({reason})",
            rate_limited=True,
            retry_after=retry_after(response.headers),
        )
    if status >= 500:
        return SearchUnavailable(f"{engine} unavailable ({reason})", retry_after=retry_after(response.headers))
    if status in (401, 403) and key_name:
        return SearchRejected(f"the {engine} search service rejected {key_name} ({reason}).")
    return SearchRejected(f"bad search request to {engine} ({reason}).")


class _HttpEngine:
    """Shared GET-and-classify for the engines that speak plain HTTP."""

    name = "http"
    filters_domains = False
    key_name: str | None = None  # the variable to blame on 401/403

    def __init__(self, client: httpx.AsyncClient | None = None) -> None:
        self.client = client or httpx.AsyncClient(
            timeout=HTTP_TIMEOUT, follow_redirects=True, headers={"User-Agent": USER_AGENT}
        )

    async def _get(self, url: str, params: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
        try:
            response = await self.client.get(url, params=params, headers=headers)
        except httpx.TimeoutException as err:
            raise SearchUnavailable(f"{self.name} timed out ({type(err).__name__})") from err
        except httpx.HTTPError as err:
            raise SearchUnavailable(f"{self.name} unreachable ({type(err).__name__}: {err})") from err
        if response.status_code >= 400:
            raise self._error(response)
        return response

    def _error(self, response: httpx.Response) -> Exception:
        return _http_error(self.name, response, self.key_name)

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as err:
            kind = response.headers.get("Content-Type", "unknown content type")
            raise SearchRejected(f"{self.name} answered with something not JSON ({kind}).") from err

    async def aclose(self) -> None:
        await self.client.aclose()


# --- the engines ---------------------------------------------------------------


class TavilyEngine:
    name = "tavily"
    filters_domains = True

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None = None,
        include_domains: Sequence[str] = (),
        exclude_domains: Sequence[str] = (),
    ) -> None:
        self.include_domains = list(include_domains)
        self.exclude_domains = list(exclude_domains)
        # Our own httpx client so a 429's Retry-After is not lost: the Tavily
        # client turns a 429 into an exception that carries no headers.
        self.http = httpx.AsyncClient(
            base_url=base_url or "https://api.tavily.com",
            event_hooks={"response": [_tavily_rate_limit]},
        )
        self.client = AsyncTavilyClient(api_key=api_key or None, api_base_url=base_url, client=self.http)

    async def search(self, query: str, max_results: int) -> list[Hit]:
        try:
            data = await self.client.search(
                query,
                max_results=min(max_results, MAX_RESULTS),
                search_depth="basic",
                include_domains=self.include_domains or None,
                exclude_domains=self.exclude_domains or None,
                timeout=30,
            )
        except (tavily_errors.InvalidAPIKeyError, tavily_errors.ForbiddenError) as err:
            raise SearchRejected(f"the search service rejected TAVILY_API_KEY ({err}).") from err
        except tavily_errors.BadRequestError as err:
            raise SearchRejected(f"bad search request: {err}") from err
        except tavily_errors.UsageLimitExceededError as err:
            wait = getattr(err, "retry_after_seconds", None)
            raise SearchUnavailable(
                f"tavily rate limit ({err})",
                rate_limited=True,
                retry_after=min(max(float(wait), 1.0), MAX_RETRY_DELAY) if wait else None,
            ) from err
        except tavily_errors.TimeoutError as err:
            raise SearchUnavailable(f"tavily timed out ({err})") from err
        except httpx.HTTPStatusError as err:
            raise _http_error(self.name, err.response, "TAVILY_API_KEY") from err
        except (httpx.HTTPError, TimeoutError) as err:
            raise SearchUnavailable(f"tavily unavailable ({type(err).__name__}: {err})") from err
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise SearchRejected("tavily answered without a list of results.")
        return _hits(results, "title", "url", "content")

    async def aclose(self) -> None:
        await self.http.aclose()


async def _tavily_rate_limit(response: httpx.Response) -> None:
    if response.status_code == 429:
        await response.aread()
        raise _http_error("tavily", response, "TAVILY_API_KEY")


class DuckDuckGoEngine:
    """Keyless search through ``ddgs`` (synchronous, so it runs in a thread).

    ``ddgs`` is any object with ``text(query, max_results=...)`` returning
    dicts with ``title``/``href``/``body``; by default a fresh ``ddgs.DDGS``
    per search. Tests pass a stand-in, since ddgs needs the internet.
    """

    name = "duckduckgo"
    filters_domains = False

    def __init__(self, ddgs: Any = None, timeout: int = 10, backend: str = "auto") -> None:
        self.ddgs = ddgs
        self.timeout = timeout
        self.backend = backend

    async def search(self, query: str, max_results: int) -> list[Hit]:
        return await asyncio.to_thread(self._search, query, max_results)

    def _search(self, query: str, max_results: int) -> list[Hit]:
        from ddgs import DDGS
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        client = self.ddgs if self.ddgs is not None else DDGS(timeout=self.timeout)
        try:
            rows = client.text(query, max_results=max_results, backend=self.backend)
        except RatelimitException as err:
            raise SearchUnavailable(f"duckduckgo rate limit ({err})", rate_limited=True) from err
        except TimeoutException as err:
            raise SearchUnavailable(f"duckduckgo timed out ({err})") from err
        except DDGSException as err:
            if "no results" in str(err).lower():
                return []
            raise SearchUnavailable(f"duckduckgo unavailable ({type(err).__name__}: {err})") from err
        return _hits(rows or [], "title", "href", "body")


class SearxngEngine(_HttpEngine):
    name = "searxng"
    key_name = None

    def __init__(self, base_url: str, client: httpx.AsyncClient | None = None) -> None:
        super().__init__(client)
        base = base_url.strip().rstrip("/")
        self.url = base if base.endswith("/search") else base + "/search"

    def _error(self, response: httpx.Response) -> Exception:
        if response.status_code == 403:
            return SearchRejected(
                "the SearxNG instance at SEARXNG_URL refused the JSON API (HTTP 403): "
                "add `json` to search.formats in its settings.yml."
            )
        return super()._error(response)

    async def search(self, query: str, max_results: int) -> list[Hit]:
        response = await self._get(self.url, {"q": query, "format": "json", "pageno": 1})
        data = self._json(response)
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise SearchRejected("searxng answered without a list of results.")
        return _hits(results, "title", "url", "content")[:max_results]


class BraveEngine(_HttpEngine):
    name = "brave"
    key_name = "BRAVE_API_KEY"

    def __init__(
        self, api_key: str | None, base_url: str | None = None, client: httpx.AsyncClient | None = None
    ) -> None:
        super().__init__(client)
        self.api_key = api_key or ""
        self.url = (base_url or BRAVE_BASE_URL).rstrip("/") + "/res/v1/web/search"

    def _error(self, response: httpx.Response) -> Exception:
        # Brave answers a bad token with 422 SUBSCRIPTION_TOKEN_INVALID.
        if response.status_code == 422 and "token" in _detail(response).lower():
            return SearchRejected(f"the brave search service rejected BRAVE_API_KEY (HTTP 422: {_detail(response)}).")
        return super()._error(response)

    async def search(self, query: str, max_results: int) -> list[Hit]:
        params = {
            "q": query[:400],  # Brave's limit
            "count": min(max_results, MAX_RESULTS),
            "text_decorations": "false",
        }
        headers = {"Accept": "application/json", "X-Subscription-Token": self.api_key}
        data = self._json(await self._get(self.url, params, headers))
        if not isinstance(data, dict):
            raise SearchRejected("brave answered without a list of web results.")
        web = data.get("web") or {}  # no "web" section: nothing found
        results = web.get("results", []) if isinstance(web, dict) else None
        if not isinstance(results, list):
            raise SearchRejected("brave answered without a list of web results.")
        hits = []
        for r in results:
            if not isinstance(r, dict):
                continue
            extra = r.get("extra_snippets") if isinstance(r.get("extra_snippets"), list) else []
            content = " ".join([str(r.get("description") or ""), *map(str, extra)])
            if hit := _hit(r.get("title"), r.get("url"), content):
                hits.append(hit)
        return hits[:max_results]


class ArxivEngine(_HttpEngine):
    name = "arxiv"
    key_name = None

    def __init__(self, base_url: str | None = None, client: httpx.AsyncClient | None = None) -> None:
        super().__init__(client)
        self.url = (base_url or ARXIV_BASE_URL).rstrip("/") + "/api/query"

    async def search(self, query: str, max_results: int) -> list[Hit]:
        params = {"search_query": f"all:{query}", "start": 0, "max_results": max_results}
        response = await self._get(self.url, params)
        try:
            root = ET.fromstring(response.content)
        except ET.ParseError as err:
            raise SearchRejected(f"arxiv answered with unreadable XML ({err}).") from err
        hits = []
        for entry in root.iter(f"{ATOM}entry"):
            entry_id = (entry.findtext(f"{ATOM}id") or "").strip()
            summary = _text(entry.findtext(f"{ATOM}summary"))
            if "/api/errors" in entry_id:  # arXiv reports a bad query as an entry
                raise SearchRejected(f"arxiv rejected the query: {summary or entry_id}")
            url = entry_id
            for link in entry.findall(f"{ATOM}link"):
                if link.get("rel") == "alternate" and link.get("href"):
                    url = link.get("href", "")
                    break
            if url.startswith("http://arxiv.org/"):
                url = "https://" + url.removeprefix("http://")
            authors = [_text(a.findtext(f"{ATOM}name")) for a in entry.findall(f"{ATOM}author")]
            byline = ", ".join(authors[:5]) + (" et al." if len(authors) > 5 else "")
            published = (entry.findtext(f"{ATOM}published") or "")[:10]
            prefix = " ".join(p for p in (byline, f"({published})" if published else "") if p)
            content = f"{prefix}. {summary}" if prefix else summary
            if hit := _hit(entry.findtext(f"{ATOM}title"), url, content):
                hits.append(hit)
        return hits[:max_results]


def make_engine(settings: Settings) -> SearchEngine:
    name = settings.search_engine
    if name == "tavily":
        return TavilyEngine(
            settings.tavily_api_key,
            settings.tavily_base_url,
            settings.include_domains,
            settings.exclude_domains,
        )
    if name == "duckduckgo":
        return DuckDuckGoEngine()
    if name == "searxng":
        return SearxngEngine(settings.searxng_url or "")
    if name == "brave":
        return BraveEngine(settings.brave_api_key, settings.brave_base_url)
    if name == "arxiv":
        return ArxivEngine(settings.arxiv_base_url)
    raise ConfigError(f"DEEPRESEARCH_SEARCH_ENGINE={name!r} is not supported; use one of: {', '.join(SEARCH_ENGINES)}")


# --- the activity --------------------------------------------------------------


class SearchActivities:
    def __init__(self, settings: Settings, engine: SearchEngine | None = None) -> None:
        self.settings = settings
        self.engine = engine or make_engine(settings)
        self.include = tuple(settings.include_domains)
        self.exclude = tuple(settings.exclude_domains)

    @activity.defn(name="web_search")
    async def web_search(self, request: SearchRequest) -> ToolResult:
        query = " ".join(request.query.split())
        if not query:
            return ToolResult(error=True, content="Error: the search query is empty.")
        max_results = min(max(request.max_results, 1), MAX_RESULTS)
        filtering = bool(self.include or self.exclude) and not self.engine.filters_domains
        ask = min(max_results * 3, MAX_RESULTS) if filtering else max_results
        try:
            async with heartbeating():
                found = await self.engine.search(query, ask)
        except SearchRejected as err:
            return ToolResult(error=True, content=f"Error: {self._scrub(str(err))[:500]}")
        except SearchUnavailable as err:
            message = self._scrub(str(err))[:500]
            if err.rate_limited:
                delay = err.retry_after if err.retry_after is not None else DEFAULT_RATE_LIMIT_DELAY
                raise ApplicationError(
                    message,
                    type="SearchRateLimited",
                    next_retry_delay=timedelta(seconds=delay),
                ) from err
            raise ApplicationError(
                message,
                type="SearchUnavailable",
                next_retry_delay=timedelta(seconds=err.retry_after) if err.retry_after else None,
            ) from err
        except Exception as err:  # a bug or an answer we did not foresee: tell the agent
            log.warning("web_search on %s failed unexpectedly", self.engine.name, exc_info=True)
            reason = self._scrub(f"{type(err).__name__}: {err}")[:500]
            return ToolResult(error=True, content=f"Error: the {self.engine.name} search failed ({reason}).")
        hits = filter_hits(found, self.include, self.exclude, max_results)
        content = format_hits(query, hits)
        if not hits and found and (self.include or self.exclude):
            content += f" ({len(found)} results outside the allowed domains were left out.)"
        return ToolResult(
            content=content,
            sources=[Citation(title=h.title, url=h.url) for h in hits],
        )

    def _scrub(self, text: str) -> str:
        """Never let a key reach the agent or the history (real keys are long;
        a short test value would only garble the message)."""
        for secret in self.settings.secrets:
            if len(secret) >= 8:
                text = text.replace(secret, "***")
        return text

    async def aclose(self) -> None:
        close = getattr(self.engine, "aclose", None)
        if close is not None:
            await close()
