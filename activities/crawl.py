"""The crawl tool: fetch one web page and turn it into clean markdown.

The markdown goes to the blob store; the workflow only sees the title, the
final URL and the blob reference. Permanent problems (refused URL, 4xx, wrong
content type, too large, redirect loops) come back as an error ``ToolResult``
the model can read; transient ones (network errors, timeouts, 5xx, 429) raise
``CrawlTransientError`` so Temporal retries the activity.

``read_page`` is the fetch and conversion both the crawl and the re-check of
a scheduled run (``activities/recheck.py``) use: it keeps the page's
``ETag`` and ``Last-Modified`` and can ask conditionally (``If-None-Match``,
``If-Modified-Since``), and tells a page that is gone (404, 410) apart.
"""

from __future__ import annotations

import asyncio
import functools
import zlib
from dataclasses import dataclass
from datetime import timedelta

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.child_pool import Job, page_work
from activities.documents import CONVERTERS, HTML_MAX_SECONDS, CrawlRefused, html_in_child, one_line
from activities.heartbeat import heartbeating
from activities.retry_after import retry_delay
from activities.url_guard import PinnedBackend, PinnedTransport, UnsafeURL, check_url
from infra.blobs import BlobStore
from workflows.models import Citation
from workflows.tool_models import CrawlRequest, ToolResult

TRANSIENT = "CrawlTransientError"
MAX_RETRY_AFTER = timedelta(seconds=60)
HEADERS = {
    "User-Agent": "Mozilla/5.0 (compatible; deepresearch-temporal/0.1; research agent)",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.5",
    "Accept-Encoding": "gzip, deflate",  # what _read decodes itself
}


def _transient(message: str, retry_after: str | None = None) -> ApplicationError:
    return ApplicationError(message, type=TRANSIENT, next_retry_delay=retry_delay(retry_after, MAX_RETRY_AFTER))


def _origin(url: str) -> str:
    """``scheme://host:port`` of a URL (the default port written out)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return ""
    port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme, 0)
    return f"{parsed.scheme}://{parsed.host}:{port}"


@dataclass(frozen=True)
class Page:
    url: str  # where it was read, after redirects
    title: str
    markdown: str
    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True)
class _Fetched:
    url: str
    mime: str
    charset: str | None
    body: bytes
    etag: str | None
    last_modified: str | None


class PageGone(CrawlRefused):
    """404 or 410: the page is no longer there."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class NotModified(Exception):  # noqa: N818 - HTTP's name for it
    """A conditional request's 304: the page is as it was."""

    def __init__(self, url: str, etag: str | None, last_modified: str | None) -> None:
        super().__init__(url)
        self.url, self.etag, self.last_modified = url, etag, last_modified


MAX_VALIDATOR = 200  # characters of an ETag or Last-Modified kept


def _validators(response: httpx.Response) -> tuple[str | None, str | None]:
    """The response's ``ETag`` and ``Last-Modified``, when short and printable."""
    found = []
    for name in ("etag", "last-modified"):
        value = (response.headers.get(name) or "").strip()
        ok = value and len(value) <= MAX_VALIDATOR and value.isascii() and value.isprintable()
        found.append(value if ok else None)
    return found[0], found[1]


def conditional_headers(etag: str | None, last_modified: str | None) -> dict[str, str]:
    """The headers that ask for the page only if it changed since it was read."""
    headers = {}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    return headers


class CrawlActivities:
    """The ``crawl`` activity; one instance per worker."""

    def __init__(
        self,
        blobs: BlobStore,
        *,
        allow_private: bool = False,
        max_bytes: int = 5_000_000,
        timeout: float = 20.0,
        max_redirects: int = 5,
        only: tuple[str, ...] = (),
        convert_seconds: float = HTML_MAX_SECONDS,
    ) -> None:
        self.blobs = blobs
        self.allow_private = allow_private
        self.only = {_origin(url) for url in only}  # empty: any origin
        self.tls = httpx.create_ssl_context()  # built once: loading CA certificates costs ~35 ms
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.convert_seconds = convert_seconds  # an HTML page's conversion, in a child killed past it

    @activity.defn(name="crawl")
    async def crawl(self, request: CrawlRequest) -> ToolResult:
        """Fetch ``request.url``, store its markdown as a blob, return title and URL."""
        try:
            page = await self.read_page(request.url)
        except (UnsafeURL, CrawlRefused) as e:
            return ToolResult(error=True, content=f"Error: {one_line(str(e))}")
        ref = await self.blobs.put(page.markdown)
        return ToolResult(
            content=f"# {page.title}\nURL: {page.url}\n",
            blob=ref,
            sources=[Citation(title=page.title, url=page.url)],
            etag=page.etag,
            last_modified=page.last_modified,
        )

    async def read_page(self, url: str, conditional: dict[str, str] | None = None) -> Page:
        """The page at ``url`` as markdown. Raises ``UnsafeURL`` or
        ``CrawlRefused`` (``PageGone`` for 404 and 410) for what no retry
        mends, ``NotModified`` when a ``conditional`` request's answer is
        304, and a transient ``ApplicationError`` (network, timeout, 5xx,
        429) that Temporal retries."""
        try:
            async with heartbeating():  # the conversion too: a big PDF takes a while
                async with asyncio.timeout(self.timeout):
                    fetched = await self._download(url, conditional or {})
                title, markdown = await self._convert(fetched)
            if not markdown.strip():
                raise CrawlRefused(f"no readable text found on {fetched.url}")
        except (httpx.InvalidURL, httpx.DecodingError) as e:
            raise CrawlRefused(f"cannot fetch {url}: {one_line(str(e))}") from None
        except TimeoutError:
            raise _transient(f"timed out after {self.timeout:g} s fetching {url}") from None
        except httpx.TransportError as e:
            reason = one_line(str(e)) or type(e).__name__
            raise _transient(f"network error fetching {url}: {reason}") from e
        return Page(fetched.url, title or fetched.url, markdown, fetched.etag, fetched.last_modified)

    async def _convert(self, fetched: _Fetched) -> tuple[str, str]:
        """Title and markdown of the body: in a page-work thread, never the
        default executor; HTML in a child process with a time limit."""
        if CONVERTERS[fetched.mime] is not CONVERTERS["text/html"]:
            return await page_work(CONVERTERS[fetched.mime], fetched.body, fetched.charset, fetched.url)
        job = Job()
        convert = functools.partial(html_in_child, max_seconds=self.convert_seconds, job=job)
        return await page_work(convert, fetched.body, fetched.charset, fetched.url, job=job)

    async def _download(self, url: str, conditional: dict[str, str]) -> _Fetched:
        """Follow redirects (checking every hop, connecting only to the
        addresses checked) and read the body."""
        seen = {url}
        backend = PinnedBackend(self.allow_private)
        async with httpx.AsyncClient(
            headers=HEADERS,
            follow_redirects=False,
            timeout=self.timeout,
            transport=PinnedTransport(backend, self.tls),
        ) as client:
            for _ in range(self.max_redirects + 1):
                if self.only and _origin(url) not in self.only:
                    raise CrawlRefused(f"{url} is not on the web this worker may read ({', '.join(sorted(self.only))})")
                addresses = await check_url(url, self.allow_private)
                if addresses:
                    backend.pins[httpx.URL(url).host] = addresses
                async with client.stream("GET", url, headers=conditional) as response:
                    if response.status_code == 304 and conditional:  # httpx counts 304 among redirects
                        raise NotModified(str(response.url), *_validators(response))
                    if response.is_redirect:
                        location = response.headers.get("location")
                        if not location:
                            raise CrawlRefused(f"HTTP {response.status_code} redirect without a Location from {url}")
                        url = str(response.url.join(location))
                        if url in seen:
                            raise CrawlRefused(f"redirect loop at {url}")
                        seen.add(url)
                        continue
                    mime = self._check(response)
                    body = await self._read(response)
                    return _Fetched(str(response.url), mime, response.charset_encoding, body, *_validators(response))
        raise CrawlRefused(f"too many redirects (more than {self.max_redirects}), last to {url}")

    def _check(self, response: httpx.Response) -> str:
        """Raise for a bad status or content type; return the MIME type."""
        status, url = response.status_code, response.url
        if status in (408, 429) or status >= 500:
            raise _transient(
                f"HTTP {status} {response.reason_phrase} from {url}",
                response.headers.get("retry-after"),
            )
        if status in (404, 410):
            raise PageGone(f"HTTP {status} {response.reason_phrase} from {url}", status)
        if not response.is_success:
            raise CrawlRefused(f"HTTP {status} {response.reason_phrase} from {url}")
        content_type = response.headers.get("content-type", "text/html")
        mime = content_type.split(";")[0].strip().lower()
        if mime not in CONVERTERS:
            raise CrawlRefused(f"cannot read {mime or 'unknown'} content from {url}; only HTML, plain text and PDF")
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            raise CrawlRefused(f"page too large ({length} bytes, limit {self.max_bytes}) at {url}")
        return mime

    async def _read(self, response: httpx.Response) -> bytes:
        """The body, decompressed by us: one content coding at most (gzip or
        deflate), never more than ``max_bytes`` out of any chunk or in all,
        the decompression off the event loop."""
        codings = [c.strip().lower() for c in response.headers.get("content-encoding", "").split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        if len(codings) > 1:
            raise CrawlRefused(f"refusing stacked content encodings ({', '.join(codings)}) at {response.url}")
        if codings and codings[0] not in ("gzip", "x-gzip", "deflate"):
            raise CrawlRefused(f"cannot decode content encoding {codings[0]!r} at {response.url}")
        inflate = Inflater(codings[0] if codings else None, self.max_bytes)
        chunks: list[bytes] = []
        size = 0
        try:
            async for raw in response.aiter_raw():
                chunk = await page_work(inflate.feed, raw) if inflate.active else raw
                size += len(chunk)
                if size > self.max_bytes:
                    raise CrawlRefused(f"page too large (over {self.max_bytes:,} bytes) at {response.url}")
                chunks.append(chunk)
        except zlib.error as err:
            raise CrawlRefused(f"the page's compressed body is broken at {response.url}: {err}") from None
        return b"".join(chunks)


class Inflater:
    """gzip or deflate, decompressed at most ``limit`` + 1 bytes per feed, so
    a small answer can never make a huge one in memory at once."""

    def __init__(self, coding: str | None, limit: int) -> None:
        self.active = coding is not None
        self.limit = limit
        wbits = 16 + zlib.MAX_WBITS if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._zlib = zlib.decompressobj(wbits)
        self._raw_deflate = coding == "deflate"
        self._started = False

    def feed(self, data: bytes) -> bytes:
        if self._raw_deflate and not self._started:
            self._started = True
            if data and (data[0] & 0x0F) != 8:  # no zlib header: raw deflate, as some servers send
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
        out = self._zlib.decompress(data, self.limit + 1)
        if self._zlib.unconsumed_tail:  # more than the limit from this chunk alone
            return out + b"\0" * (self.limit + 1 - len(out))
        return out
