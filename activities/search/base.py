"""What every search engine shares: the ``Hit`` they return, the
``SearchEngine`` protocol, the errors, result formatting, domain filters and
the HTTP plumbing of the engines that speak JSON or XML over HTTP."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from activities.retry_after import retry_delay

SNIPPET_CHARS = 1_500
MAX_RESULTS = 20  # the most any engine is asked for (Tavily's and Brave's cap)
DEFAULT_RATE_LIMIT_DELAY = 10.0  # seconds, when a 429 does not say
MAX_RETRY_DELAY = 600.0
HTTP_TIMEOUT = httpx.Timeout(20.0, connect=10.0)
USER_AGENT = "deepresearch-temporal/0.1"
BRAVE_BASE_URL = "https://api.search.brave.com"
ARXIV_BASE_URL = "https://export.arxiv.org"
ATOM = "{http://www.w3.org/2005/Atom}"


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


# A tag: its inside stops at the next "<" too, so a text of many "<" and no
# ">" is read in linear time (scanning to the next ">" from each was quadratic).
_TAG = re.compile(r"<[^<>]+>")


def text_of(value: Any) -> str:
    """Plain one-line text: HTML tags and entities removed, whitespace collapsed."""
    return " ".join(html.unescape(_TAG.sub("", str(value or ""))).split())


def make_hit(title: Any, url: Any, content: Any) -> Hit | None:
    url = str(url or "").strip()
    if urlsplit(url).scheme not in ("http", "https"):
        return None
    return Hit(title=text_of(title), url=url, content=text_of(content))


def make_hits(rows: Sequence[Any], title: str, url: str, content: str) -> list[Hit]:
    """Hits from a service's result dicts, given its names for the three fields."""
    return [
        hit
        for row in rows
        if isinstance(row, Mapping) and (hit := make_hit(row.get(title), row.get(url), row.get(content)))
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


def error_detail(response: httpx.Response) -> str:
    """A short human-readable reason from an error response body."""
    try:
        body: Any = response.json()
    except ValueError:
        return text_of(response.text)[:200]
    for _ in range(3):  # {"error": {"detail": ...}}, {"detail": {"error": ...}}, ...
        if not isinstance(body, dict):
            break
        for key in ("detail", "error", "message", "msg"):
            if body.get(key):
                body = body[key]
                break
        else:
            break
    return text_of(body if isinstance(body, str) else str(body))[:200]


def http_error(engine: str, response: httpx.Response, key_name: str | None) -> Exception:
    status, detail = response.status_code, error_detail(response)
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


class HttpEngine:
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
        return http_error(self.name, response, self.key_name)

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as err:
            kind = response.headers.get("Content-Type", "unknown content type")
            raise SearchRejected(f"{self.name} answered with something not JSON ({kind}).") from err

    async def aclose(self) -> None:
        await self.client.aclose()
