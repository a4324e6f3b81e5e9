"""Documents to markdown: HTML (trafilatura), plain text and PDF (pypdf),
shared by the crawler and the local documents. Each converter takes the raw
bytes, the declared charset and where they came from, and returns the title
and the markdown; a permanent problem raises ``CrawlRefused`` with a reason
the model can read. HTML and PDF are converted in child processes with a
time limit (``html_in_child``, ``pdf_in_child``): a thread could not be
stopped, and their time can grow far faster than the document."""

from __future__ import annotations

import codecs
import html as html_lib
import io
import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Callable

import pypdf
import trafilatura

from activities.child_pool import ChildFailed, ChildPool, ChildTimeout, Job

# Linear in the page: a tag's inside stops at the next "<" (patterns that
# scanned to the next ">" from every "<title" or "<meta" were quadratic).
# Between "=" and the name one class, not ``\s*["']?\s*`` (two runs of spaces
# either side of an optional quote split a run of spaces every way: quadratic).
_META_CHARSET = re.compile(rb"""<meta[^<>]+charset\s*=[\s"']*([\w.:-]+)""", re.I)
_TITLE_OPEN = re.compile(r"<title[^<>]*>", re.I)
_TITLE_CLOSE = re.compile(r"</title>", re.I)


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


def one_line(text: str) -> str:
    return " ".join(text.split())


RECALL_SECONDS = 5.0  # a page whose extraction took longer is not extracted a second time (its time limit)


def merged_lines(main: str, extra: str) -> str:
    """``main`` with each line of ``extra`` it lacks (spaces aside) set after
    the last line the two share before it, in ``extra``'s order: one pass
    over each. trafilatura's default extraction of a page can leave out a
    list of its key figures (a press release's "Passengers carried:
    5,418,900", a "Notes" block) that its recall-first extraction keeps,
    and the recall-first one can leave out headings (a meeting's date) that
    the default keeps; neither holds all of the page."""
    lines = main.split("\n")
    where: dict[str, int] = {}
    for i, line in enumerate(lines):
        key = " ".join(line.split())
        if key:
            where.setdefault(key, i)
    after: dict[int, list[str]] = {}
    added: set[str] = set()  # a line twice in ``extra`` is kept once
    at, gap = -1, False
    for line in extra.split("\n"):
        key = " ".join(line.split())
        if key in where:
            at = where[key]
        elif key and key not in added:
            added.add(key)
            group = after.setdefault(at, [])
            group += ["", line] if gap and group else [line]  # its blank lines too: a heading after a list
        gap = not key
    out = [*after.get(-1, []), ""] if -1 in after else []
    for i, line in enumerate(lines):
        out.append(line)
        if i in after:
            out += ["", *after[i]]
    return "\n".join(out)


def html_to_markdown(body: bytes, charset: str | None, url: str) -> tuple[str, str]:
    """Title and markdown of an HTML page (trafilatura; plain text if it finds
    no article). Its time grows faster than the page: run it in a child
    (``html_in_child``)."""
    if not charset and (meta := _META_CHARSET.search(body[:4096])):
        charset = meta.group(1).decode("ascii")
    html = _decode(body, charset)
    options = {"output_format": "markdown", "include_links": True, "include_tables": True, "with_metadata": False}
    started = time.monotonic()
    markdown = trafilatura.extract(html, url=url, **options)
    if markdown and time.monotonic() - started < RECALL_SECONDS:  # what it left out, a recall-first one may keep
        markdown = merged_lines(markdown, trafilatura.extract(html, url=url, favor_recall=True, **options) or "")
    markdown = markdown or trafilatura.html2txt(html)
    metadata = trafilatura.extract_metadata(html, default_url=url)
    title = metadata.title if metadata and metadata.title else ""
    if not title:
        title = html_lib.unescape(title_tag(html))
    return one_line(title), markdown or ""


# Seconds one HTML page may take to convert (trafilatura takes about one on a
# 1 MB article; 100,000 bare paragraphs take 25 s, 270,000 over three minutes).
HTML_MAX_SECONDS = 30.0
HTML_CHILDREN = ChildPool("activities.html_text")


def html_in_child(
    body: bytes, charset: str | None, url: str, *, max_seconds: float = HTML_MAX_SECONDS, job: Job | None = None
) -> tuple[str, str]:
    """``html_to_markdown`` in a child process (``activities/child_pool.py``),
    killed once it has run ``max_seconds``: the page is then refused."""
    try:
        answer = HTML_CHILDREN.run({"charset": charset, "url": url}, body, max_seconds, job)
    except ChildTimeout:
        raise CrawlRefused(
            f"the page at {url} is too complex to convert to text: it took longer than {max_seconds:g} s"
        ) from None
    except ChildFailed as err:
        raise CrawlRefused(f"cannot convert the page at {url} to text: the converter failed ({err})") from None
    if "title" in answer:
        return str(answer["title"]), str(answer["markdown"])
    if "refused" in answer:
        raise CrawlRefused(str(answer["refused"]))
    raise CrawlRefused(f"cannot convert the page at {url} to text: {answer.get('failed', 'no answer')}")


def _html(body: bytes, charset: str | None, url: str) -> tuple[str, str]:
    """Title and markdown of an HTML page (see ``html_in_child``)."""
    return html_in_child(body, charset, url)


def _plain(body: bytes, charset: str | None, url: str) -> tuple[str, str]:
    """Title (the first line, if short, without a markdown heading's marks)
    and text of a text/plain page."""
    text = _decode(body, charset)
    first = next((line.strip() for line in text.split("\n") if line.strip()), "").lstrip("#").strip()
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
        reason = one_line(str(e)) or type(e).__name__
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
    return one_line(title), "\n\n".join(parts) + "\n"


def _pdf_title(reader: pypdf.PdfReader) -> str:
    try:
        title = reader.metadata.title if reader.metadata else None
    except Exception:  # noqa: BLE001 - broken info dictionary: fall back to the text
        return ""
    title = one_line(str(title or ""))
    # Generators often leave placeholders such as "untitled" or a file name.
    lowered = title.lower()
    if lowered in {"untitled", "title", "unknown"} or lowered.endswith((".doc", ".docx", ".pdf")):
        return ""
    return title


def title_tag(html: str) -> str:
    """The text of the page's first ``<title>`` element, or ""."""
    opening = _TITLE_OPEN.search(html)
    closing = _TITLE_CLOSE.search(html, opening.end()) if opening else None
    return html[opening.end() : closing.start()] if closing else ""


def _clean_pdf_text(text: str) -> str:
    """Strip NULs and trailing spaces; keep at most one blank line in a row."""
    lines = [line.rstrip() for line in text.replace("\x00", "").splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def pdf_in_child(
    data: bytes,
    source: str,
    *,
    max_pages: int = PDF_MAX_PAGES,
    max_chars: int = PDF_MAX_CHARS,
    max_seconds: float = PDF_MAX_SECONDS,
) -> tuple[str, str]:
    """``pdf_to_markdown`` in a child process that is killed once it has run
    ``max_seconds`` (one page can hold enough text operators to keep pypdf
    busy for minutes, and a thread cannot be stopped), with a memory limit."""
    where = f" {source}" if source else ""
    limits = json.dumps([source, max_pages, max_chars, max_seconds])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "activities.pdf_text", limits],
            input=data,
            capture_output=True,
            timeout=max_seconds + 1.5,  # the interpreter's start, then the limit
        )
    except subprocess.TimeoutExpired:
        raise CrawlRefused(f"reading the PDF{where} took longer than {max_seconds:g} s") from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        detail = one_line(done.stderr.decode("utf-8", "replace"))[-300:] or f"exit code {done.returncode}"
        raise CrawlRefused(f"cannot read the PDF{where}: {detail}") from None
    if "refused" in answer:
        raise CrawlRefused(answer["refused"])
    return answer["title"], answer["markdown"]


def _pdf(body: bytes, charset: str | None, url: str) -> tuple[str, str]:
    """Title and markdown of a PDF document (see ``pdf_to_markdown``)."""
    return pdf_in_child(body, f"at {url}")


# Content types the crawler understands, by MIME type: a converter
# ``(body, charset, url) -> (title, markdown)``, run in a page-work thread
# (``child_pool.page_work``); HTML and PDF are converted in child processes.
CONVERTERS: dict[str, Callable[[bytes, str | None, str], tuple[str, str]]] = {
    "text/html": _html,
    "application/xhtml+xml": _html,
    "text/plain": _plain,
    "application/pdf": _pdf,
    "application/x-pdf": _pdf,
}
