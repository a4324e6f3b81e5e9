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
import io
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx
import pypdf
import trafilatura
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.url_guard import UnsafeURL, check_url
from infra.blobs import BlobStore
from workflows.models import Citation, CrawlRequest, ToolResult

TRANSIENT = "CrawlTransientError"
MAX_RETRY_AFTER = timedelta(seconds=60)
HEADERS = {
    "User-Agent": "Mozilla/5.0 (compatible; deepresearch-temporal/0.1; research agent)",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.5",
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


# pypdf logs a warning for every oddity of a broken file; the error result
# already says what matters.
logging.getLogger("pypdf").setLevel(logging.ERROR)

# Bounds on the work spent on one PDF: pages read, characters kept, seconds spent.
PDF_MAX_PAGES = 200
PDF_MAX_CHARS = 1_000_000
PDF_MAX_SECONDS = 60.0


def pdf_to_markdown(
    data: bytes,
    source: str,
    *,
    max_pages: int = PDF_MAX_PAGES,
    max_chars: int = PDF_MAX_CHARS,
    max_seconds: float = PDF_MAX_SECONDS,
) -> tuple[str, str]:
    """Title and markdown of a PDF: one ``## Page N`` section per page with text.

    The title comes from the document information, else the first line of text.
    Work stops after ``max_pages`` pages, ``max_chars`` characters or
    ``max_seconds`` seconds, with a note saying so. Encrypted, broken and
    image-only PDFs raise ``CrawlRefused`` with a readable reason (``source``,
    e.g. "at <url>", names the document in it; empty leaves it out).
    """
    where = f" {source}" if source else ""
    if b"%PDF-" not in data[:1024]:
        raise CrawlRefused(f"the file{where} is not a PDF (no %PDF header)")
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")  # many PDFs only restrict printing/copying
            except Exception:  # noqa: BLE001 - unsupported algorithm, broken keys...
                opened = pypdf.PasswordType.NOT_DECRYPTED
            if opened == pypdf.PasswordType.NOT_DECRYPTED:
                raise CrawlRefused(f"the PDF{where} is encrypted (password protected)")
        total = len(reader.pages)
        title = _pdf_title(reader)
    except CrawlRefused:
        raise
    except Exception as e:  # noqa: BLE001 - pypdf raises many types on broken files
        reason = _one_line(str(e)) or type(e).__name__
        raise CrawlRefused(f"cannot read the PDF{where}: {reason}") from e

    deadline = time.monotonic() + max_seconds
    parts: list[str] = []
    size = 0
    read = 0
    stopped = ""
    for number in range(1, total + 1):
        if number > max_pages:
            stopped = f"stopped after {max_pages} of {total} pages"
        elif size >= max_chars:
            stopped = f"stopped after {read} of {total} pages (text limit {max_chars:,} characters)"
        elif time.monotonic() > deadline:
            stopped = f"stopped after {read} of {total} pages (time limit {max_seconds:g} s)"
        if stopped:
            break
        read = number
        try:
            text = reader.pages[number - 1].extract_text() or ""
        except Exception as e:  # noqa: BLE001 - one bad page must not lose the others
            logging.getLogger(__name__).debug("PDF %s page %d: %s", source, number, e)
            continue
        text = _clean_pdf_text(text)
        if not text:
            continue
        text = text[: max(max_chars - size, 0)]
        size += len(text)
        parts.append(f"## Page {number}\n\n{text}")
    if not parts:
        raise CrawlRefused(f"no extractable text in the PDF{where} (it may be scanned images)")
    if stopped:
        parts.append(f"[{stopped}]")
    if not title:
        first = parts[0].split("\n\n", 1)[1]
        line = next((ln.strip() for ln in first.splitlines() if ln.strip()), "")
        title = line if len(line) <= 120 else ""
    return _one_line(title), "\n\n".join(parts) + "\n"


def _pdf_title(reader: pypdf.PdfReader) -> str:
    try:
        title = reader.metadata.title if reader.metadata else None
    except Exception:  # noqa: BLE001 - broken info dictionary: fall back to the text
        return ""
    title = _one_line(str(title or ""))
    # Generators often leave placeholders such as "untitled" or a file name.
    lowered = title.lower()
    if lowered in {"untitled", "title", "unknown"} or lowered.endswith((".doc", ".docx", ".pdf")):
        return ""
    return title


def _clean_pdf_text(text: str) -> str:
    """Strip NULs and trailing spaces; keep at most one blank line in a row."""
    lines = [line.rstrip() for line in text.replace("\x00", "").splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _pdf(body: bytes, charset: str | None, url: str) -> tuple[str, str]:
    """Title and markdown of a PDF document (see ``pdf_to_markdown``)."""
    return pdf_to_markdown(body, f"at {url}")


# Content types the crawler understands, by MIME type: a converter
# ``(body, charset, url) -> (title, markdown)``, run in a thread.
CONVERTERS: dict[str, Callable[[bytes, str | None, str], tuple[str, str]]] = {
    "text/html": _html,
    "application/xhtml+xml": _html,
    "text/plain": _plain,
    "application/pdf": _pdf,
    "application/x-pdf": _pdf,
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
            delay = parsedate_to_datetime(value) - datetime.now(UTC)
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
            return ToolResult(error=True, content=f"Error: {_one_line(str(e))}")
        except (httpx.InvalidURL, httpx.DecodingError) as e:
            return ToolResult(error=True, content=f"Error: cannot fetch {url}: {_one_line(str(e))}")
        except TimeoutError:
            raise _transient(f"timed out after {self.timeout:g} s fetching {url}") from None
        except httpx.TransportError as e:
            reason = _one_line(str(e)) or type(e).__name__
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
