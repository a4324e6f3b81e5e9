"""The crawl tool: fetch one web page and turn it into clean markdown.

The markdown goes to the blob store; the workflow only sees the title, the
final URL and the blob reference. Permanent problems (refused URL, 4xx, wrong
content type, too large, redirect loops) come back as an error ``ToolResult``
the model can read; transient ones (network errors, timeouts, 5xx, 429) raise
``CrawlTransientError`` so Temporal retries the activity.
"""

from __future__ import annotations

import asyncio
import codecs
import html as html_lib
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime

import httpx
import trafilatura
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.blobs import BlobStore
from activities.url_guard import UnsafeURL, check_url
from workflows.models import Citation, CrawlRequest, ToolResult

TRANSIENT = "CrawlTransientError"
MAX_RETRY_AFTER = timedelta(seconds=60)
HEADERS = {
    "User-Agent": "Mozilla/5.0 (compatible; deepresearch-temporal/0.1; research agent)",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)""", re.I)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)


class CrawlRefused(Exception):
    """A permanent problem with the page; the message is shown to the model."""


def _decode(body: bytes, charset: str | None) -> str:
    """Decode with the declared charset; undeclared is UTF-8, else Windows-1252."""
    text = None
    if charset:
        try:
            text = body.decode(codecs.lookup(charset).name, errors="replace")
        except LookupError:
            pass  # unknown charset name: guess as if none was declared
    if text is None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text = body.decode("cp1252", errors="replace")
    if "\x00" in text:
        raise CrawlRefused("the page is binary or not decodable as text")
    return text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _html(body: bytes, charset: str | None, url: str) -> tuple[str, str]:
    """Title and markdown of an HTML page (trafilatura; plain text if it finds no article)."""
    if not charset and (meta := _META_CHARSET.search(body[:4096])):
        charset = meta.group(1).decode("ascii")
    html = _decode(body, charset)
    markdown = trafilatura.extract(
        html,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        with_metadata=False,
        url=url,
    ) or trafilatura.html2txt(html)
    metadata = trafilatura.extract_metadata(html, default_url=url)
    title = metadata.title if metadata and metadata.title else ""
    if not title and (tag := _TITLE.search(html)):
        title = html_lib.unescape(tag.group(1))
    return _one_line(title), markdown or ""


def _plain(body: bytes, charset: str | None, url: str) -> tuple[str, str]:
    """Title (the first line, if short) and text of a text/plain page."""
    text = _decode(body, charset)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return (first if len(first) <= 120 else ""), text


# Content types the crawler understands, by MIME type. PDF support plugs in
# here: a converter ``(body, charset, url) -> (title, markdown)`` for
# "application/pdf".
CONVERTERS: dict[str, Callable[[bytes, str | None, str], tuple[str, str]]] = {
    "text/html": _html,
    "application/xhtml+xml": _html,
    "text/plain": _plain,
}


def _transient(message: str, retry_after: str | None = None) -> ApplicationError:
    return ApplicationError(message, type=TRANSIENT, next_retry_delay=_retry_delay(retry_after))


def _retry_delay(value: str | None) -> timedelta | None:
    """A Retry-After header (seconds or HTTP date) as a delay of at most 60 s."""
    if not value:
        return None
    try:
        delay = timedelta(seconds=float(value))
    except (ValueError, OverflowError):
        try:
            delay = parsedate_to_datetime(value) - datetime.now(timezone.utc)
        except (TypeError, ValueError):
            return None
    return min(max(delay, timedelta(0)), MAX_RETRY_AFTER)


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
    ) -> None:
        self.blobs = blobs
        self.allow_private = allow_private
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_redirects = max_redirects

    @activity.defn(name="crawl")
    async def crawl(self, request: CrawlRequest) -> ToolResult:
        """Fetch ``request.url``, store its markdown as a blob, return title and URL."""
        url = request.url
        try:
            async with asyncio.timeout(self.timeout):
                final_url, mime, charset, body = await self._download(url)
            title, markdown = await asyncio.to_thread(CONVERTERS[mime], body, charset, final_url)
            if not markdown.strip():
                raise CrawlRefused(f"no readable text found on {final_url}")
        except (UnsafeURL, CrawlRefused) as e:
            return ToolResult(error=True, content=f"Error: {_one_line(str(e))}")
        except (httpx.InvalidURL, httpx.DecodingError) as e:
            return ToolResult(error=True, content=f"Error: cannot fetch {url}: {_one_line(str(e))}")
        except TimeoutError:
            raise _transient(f"timed out after {self.timeout:g} s fetching {url}") from None
        except httpx.TransportError as e:
            reason = _one_line(str(e)) or type(e).__name__
            raise _transient(f"network error fetching {url}: {reason}") from e
        title = title or final_url
        ref = self.blobs.put(markdown)
        return ToolResult(
            content=f"# {title}\nURL: {final_url}\n",
            blob=ref,
            sources=[Citation(title=title, url=final_url)],
        )

    async def _download(self, url: str) -> tuple[str, str, str | None, bytes]:
        """Follow redirects (checking every hop) and read the body:
        (final URL, MIME type, charset, body)."""
        seen = {url}
        async with httpx.AsyncClient(
            headers=HEADERS, follow_redirects=False, timeout=self.timeout
        ) as client:
            for _ in range(self.max_redirects + 1):
                await check_url(url, self.allow_private)
                async with client.stream("GET", url) as response:
                    if response.is_redirect:
                        url = str(response.url.join(response.headers["location"]))
                        if url in seen:
                            raise CrawlRefused(f"redirect loop at {url}")
                        seen.add(url)
                        continue
                    mime = self._check(response)
                    body = await self._read(response)
                    return str(response.url), mime, response.charset_encoding, body
        raise CrawlRefused(f"too many redirects (more than {self.max_redirects}), last to {url}")

    def _check(self, response: httpx.Response) -> str:
        """Raise for a bad status or content type; return the MIME type."""
        status, url = response.status_code, response.url
        if status in (408, 429) or status >= 500:
            raise _transient(
                f"HTTP {status} {response.reason_phrase} from {url}",
                response.headers.get("retry-after"),
            )
        if not response.is_success:
            raise CrawlRefused(f"HTTP {status} {response.reason_phrase} from {url}")
        content_type = response.headers.get("content-type", "text/html")
        mime = content_type.split(";")[0].strip().lower()
        if mime not in CONVERTERS:
            raise CrawlRefused(
                f"cannot read {mime or 'unknown'} content from {url}; only HTML and plain text"
            )
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            raise CrawlRefused(f"page too large ({length} bytes, limit {self.max_bytes}) at {url}")
        return mime

    async def _read(self, response: httpx.Response) -> bytes:
        """The (decompressed) body, stopping once it passes ``max_bytes``."""
        heartbeat = activity.in_activity()
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise CrawlRefused(f"page too large (over {self.max_bytes} bytes) at {response.url}")
            chunks.append(chunk)
            if heartbeat:
                activity.heartbeat(size)
        return b"".join(chunks)
