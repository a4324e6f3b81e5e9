"""The crawl tool: fetch one web page and turn it into clean markdown.

The markdown goes to the blob store; the workflow only sees the title, the
final URL and the blob reference. Permanent problems (refused URL, 4xx, wrong
content type, too large, redirect loops) come back as an error ``ToolResult``
the model can read; transient ones (network errors, timeouts, 5xx, 429) raise
``CrawlTransientError`` so Temporal retries the activity.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.documents import CONVERTERS, CrawlRefused, one_line
from activities.heartbeat import heartbeating
from activities.retry_after import retry_delay
from activities.url_guard import UnsafeURL, check_url
from infra.blobs import BlobStore
from workflows.models import Citation, CrawlRequest, ToolResult

TRANSIENT = "CrawlTransientError"
MAX_RETRY_AFTER = timedelta(seconds=60)
HEADERS = {
    "User-Agent": "Mozilla/5.0 (compatible; deepresearch-temporal/0.1; research agent)",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.5",
}


def _transient(message: str, retry_after: str | None = None) -> ApplicationError:
    return ApplicationError(message, type=TRANSIENT, next_retry_delay=retry_delay(retry_after, MAX_RETRY_AFTER))


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
        self.tls = httpx.create_ssl_context()  # built once: loading CA certificates costs ~35 ms
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_redirects = max_redirects

    @activity.defn(name="crawl")
    async def crawl(self, request: CrawlRequest) -> ToolResult:
        """Fetch ``request.url``, store its markdown as a blob, return title and URL."""
        url = request.url
        try:
            async with heartbeating(), asyncio.timeout(self.timeout):
                final_url, mime, charset, body = await self._download(url)
            title, markdown = await asyncio.to_thread(CONVERTERS[mime], body, charset, final_url)
            if not markdown.strip():
                raise CrawlRefused(f"no readable text found on {final_url}")
        except (UnsafeURL, CrawlRefused) as e:
            return ToolResult(error=True, content=f"Error: {one_line(str(e))}")
        except (httpx.InvalidURL, httpx.DecodingError) as e:
            return ToolResult(error=True, content=f"Error: cannot fetch {url}: {one_line(str(e))}")
        except TimeoutError:
            raise _transient(f"timed out after {self.timeout:g} s fetching {url}") from None
        except httpx.TransportError as e:
            reason = one_line(str(e)) or type(e).__name__
            raise _transient(f"network error fetching {url}: {reason}") from e
        title = title or final_url
        ref = await self.blobs.put(markdown)
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
            headers=HEADERS, follow_redirects=False, timeout=self.timeout, verify=self.tls
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
            raise CrawlRefused(f"cannot read {mime or 'unknown'} content from {url}; only HTML, plain text and PDF")
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            raise CrawlRefused(f"page too large ({length} bytes, limit {self.max_bytes}) at {url}")
        return mime

    async def _read(self, response: httpx.Response) -> bytes:
        """The (decompressed) body, stopping once it passes ``max_bytes``."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise CrawlRefused(f"page too large (over {self.max_bytes} bytes) at {response.url}")
            chunks.append(chunk)
        return b"".join(chunks)
