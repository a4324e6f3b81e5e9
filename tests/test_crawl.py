"""The crawl tool against a loopback web server, and the URL guard."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import os
import socket
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pypdf
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import activities.crawl as crawl_activity
import activities.documents as documents
import activities.url_guard as url_guard
from activities.crawl import CrawlActivities
from activities.url_guard import UnsafeURL, check_url
from infra.blobs import FileBlobStore
from testkit.pages import PageServer, article
from workflows.tool_models import CrawlRequest

FACT = "The Okavango survey counted 4,217 zebras crossing the Boteti river on 3 August."
PARAGRAPHS = [
    "Every year thousands of zebras leave the dry Makgadikgadi pans and walk west "
    "towards the Boteti river, a journey that researchers have followed for decades.",
    FACT + " That is the largest number recorded since the survey began in 2009, "
    "and it surprised the team, who had expected a smaller herd after a wet season.",
    "The researchers say the migration depends on rainfall patterns that are "
    "changing quickly, and they plan to repeat the count with drones next year.",
]


@pytest.fixture
def pages():
    with PageServer() as server:
        yield server


@pytest.fixture
def blobs(tmp_path):
    return FileBlobStore(tmp_path / "blobs")


@pytest.fixture
def crawler(blobs):
    return CrawlActivities(blobs, allow_private=True, timeout=5.0)


async def crawl(crawler: CrawlActivities, url: str):
    return await crawler.crawl(CrawlRequest(url=url))


# --- pages ---------------------------------------------------------------------


async def test_article_body_becomes_markdown(pages, crawler, blobs):
    pages.add("/zebras", article("Zebra migration breaks record", PARAGRAPHS))
    url = pages.url("/zebras")
    result = await crawl(crawler, url)
    assert not result.error, result.content
    assert result.content == f"# Zebra migration breaks record\nURL: {url}\n"
    assert [(s.title, s.url) for s in result.sources] == [("Zebra migration breaks record", url)]
    markdown = await blobs.get(result.blob)
    assert "4,217 zebras" in markdown
    for boilerplate in ("Subscribe to our newsletter", "All rights reserved", "Cookie settings"):
        assert boilerplate not in markdown


PRESS_RELEASE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>Marrow Air: record 2023 traffic</title></head><body>
<nav><a href="/">Home</a> <a href="/news">News</a></nav>
<h1>Marrow Air flies 3.1 million passengers in record 2023</h1>
<p><strong>Press release, 15 January 2024</strong></p>
<p>Marrow Air, the island's regional airline, today announced its traffic results for the year to 31 December 2023.</p>
<ul>
<li>Passengers carried: <strong>3,118,400</strong>, up 12 per cent on 2022 (2,784,300).</li>
<li>Flights operated: 21,450 (2022: 19,870).</li>
<li>On-time performance: 88 per cent of departures within 15 minutes of schedule.</li>
</ul>
<h2>Fleet</h2>
<p>The airline operated 24 aircraft at the end of the year, with an average age of 6.2 years, and has four more on order.</p>
<h2>Comment</h2>
<p>The chief executive, Ilse Varga, said the airline had grown on every route it flies and expected another record in 2024.</p>
<footer>All rights reserved. Cookie settings.</footer>
</body></html>"""


async def test_a_list_of_key_figures_and_the_headings_both_reach_the_markdown(pages, crawler, blobs):
    """trafilatura's default extraction leaves out this press release's list
    of figures, its recall-first one the headings of some pages: the page's
    markdown holds both, each line once, in the page's order."""
    pages.add("/release", PRESS_RELEASE)
    result = await crawl(crawler, pages.url("/release"))
    assert not result.error, result.content
    markdown = await blobs.get(result.blob)
    order = ["Press release, 15 January 2024", "3,118,400", "21,450", "88 per cent", "## Fleet", "24 aircraft"]
    at = [markdown.find(text) for text in order]
    assert -1 not in at and at == sorted(at), markdown
    lines = [line for line in markdown.splitlines() if line.strip()]
    assert len(lines) == len(set(lines)), markdown


def test_lines_merged_keep_both_orders_and_each_line_once():
    main = "# Minutes\n\n## Meeting of 20 January 2019\n\nIncome was £250,335.\n\n## Meeting of 15 February 2019\n\nIncome was £223,223."
    extra = "Income was £250,335.\n\n- Landings: 87 t\n- Arrivals: 63\nIncome was  £223,223.\n\nNotes\nNotes"
    assert documents.merged_lines(main, extra).split("\n") == [
        "# Minutes", "", "## Meeting of 20 January 2019", "", "Income was £250,335.", "",
        "- Landings: 87 t", "- Arrivals: 63", "", "## Meeting of 15 February 2019", "", "Income was £223,223.",
        "", "Notes",
    ]  # fmt: skip
    assert documents.merged_lines("a\nb", "") == "a\nb"


async def test_runs_as_activity_and_heartbeats(pages, crawler):
    pages.add("/zebras", article("Zebras", PARAGRAPHS))
    env = ActivityEnvironment()
    beats = []
    env.on_heartbeat = lambda *details: beats.append(details)
    result = await env.run(crawler.crawl, CrawlRequest(url=pages.url("/zebras")))
    assert not result.error
    assert beats


async def test_plain_text(pages, crawler, blobs):
    pages.add("/notes.txt", "Field notes\n\n" + FACT, content_type="text/plain")
    result = await crawl(crawler, pages.url("/notes.txt"))
    assert result.content.startswith("# Field notes\n")
    assert FACT in (await blobs.get(result.blob))
    pages.add("/notes.md", "## Field notes\n\n" + FACT, content_type="text/plain")  # markdown served as text
    assert (await crawl(crawler, pages.url("/notes.md"))).sources[0].title == "Field notes"


async def test_short_page_falls_back_to_text(pages, crawler, blobs):
    pages.add("/short", "<html><body><div>Answer: 42.</div></body></html>")
    result = await crawl(crawler, pages.url("/short"))
    assert not result.error, result.content
    assert "Answer: 42." in (await blobs.get(result.blob))
    assert result.sources[0].title == pages.url("/short")  # no title: the URL


async def test_empty_page_is_error(pages, crawler):
    pages.add("/empty", "<html><head><title>Nothing</title></head><body></body></html>")
    result = await crawl(crawler, pages.url("/empty"))
    assert result.error and result.content.startswith("Error: no readable text")


@pytest.mark.parametrize(
    ("content_type", "meta"),
    [("text/html; charset=iso-8859-1", ""), ("text/html", '<meta charset="iso-8859-1">')],
)
async def test_latin1_page(pages, crawler, blobs, content_type, meta):
    paragraphs = [p + " Café crème à Besançon, naïve façade." for p in PARAGRAPHS]
    page = article("Zèbres", paragraphs).replace('<meta charset="utf-8">', meta)
    pages.add("/latin1", page.encode("latin-1"), content_type=content_type)
    result = await crawl(crawler, pages.url("/latin1"))
    assert result.content.startswith("# Zèbres\n")
    assert "Café crème à Besançon" in (await blobs.get(result.blob))


# --- redirects -----------------------------------------------------------------


async def test_redirects_followed_and_rechecked(pages, crawler, monkeypatch):
    pages.add("/new", article("Moved", PARAGRAPHS))
    pages.redirect("/old", "/middle", status=301)
    pages.redirect("/middle", pages.url("/new"))
    checked = []

    async def recording_check(url, allow_private):
        checked.append(url)
        return []

    monkeypatch.setattr(crawl_activity, "check_url", recording_check)
    result = await crawl(crawler, pages.url("/old"))
    assert result.sources[0].url == pages.url("/new")
    assert pages.hits == ["/old", "/middle", "/new"]
    assert checked == [pages.url(p) for p in ("/old", "/middle", "/new")]


async def test_redirect_target_refused(pages, crawler):
    pages.redirect("/to-file", "file:///etc/passwd")
    result = await crawl(crawler, pages.url("/to-file"))
    assert result.error and "only http and https" in result.content


async def test_redirect_to_private_refused_before_fetch(pages, blobs, monkeypatch):
    pages.redirect("/public", "/secret")
    pages.add("/secret", "top secret")

    async def guard(url, allow_private):  # pretend only /public is a public address
        if not url.endswith("/public"):
            raise UnsafeURL(f"refusing to fetch {url}")
        return ["127.0.0.1"]

    monkeypatch.setattr(crawl_activity, "check_url", guard)
    result = await crawl(CrawlActivities(blobs), pages.url("/public"))
    assert result.error and "refusing" in result.content
    assert pages.hits == ["/public"]


async def test_redirect_loop(pages, crawler):
    pages.redirect("/a", "/b")
    pages.redirect("/b", "/a")
    result = await crawl(crawler, pages.url("/a"))
    assert result.error and "redirect loop" in result.content


async def test_too_many_redirects(pages, blobs):
    for i in range(5):
        pages.redirect(f"/r{i}", f"/r{i + 1}")
    pages.add("/r5", article("End", PARAGRAPHS))
    result = await crawl(CrawlActivities(blobs, allow_private=True, max_redirects=4), pages.url("/r0"))
    assert result.error and "too many redirects" in result.content
    ok = await crawl(CrawlActivities(blobs, allow_private=True, max_redirects=5), pages.url("/r0"))
    assert not ok.error


# --- refusals and failures -----------------------------------------------------


async def test_too_large(pages, blobs):
    crawler = CrawlActivities(blobs, allow_private=True, max_bytes=1000)
    pages.add("/big", article("Big", PARAGRAPHS * 10))
    result = await crawl(crawler, pages.url("/big"))
    assert result.error and "too large" in result.content


async def test_too_large_after_decompression(pages, blobs):
    crawler = CrawlActivities(blobs, allow_private=True, max_bytes=10_000)
    bomb = gzip.compress(b"<html><body>" + b"a" * 1_000_000 + b"</body></html>")
    assert len(bomb) < 10_000
    pages.add("/bomb", bomb, headers={"Content-Encoding": "gzip"})
    result = await crawl(crawler, pages.url("/bomb"))
    assert result.error and "too large" in result.content


@pytest.mark.parametrize("content_type", ["application/octet-stream", "image/png", "video/mp4"])
async def test_unsupported_content_type(pages, crawler, content_type):
    pages.add("/file", b"\x89PNG\r\n\x1a\n\x00\x00binary", content_type=content_type)
    result = await crawl(crawler, pages.url("/file"))
    assert result.error and content_type in result.content


async def test_binary_body_with_text_type(pages, crawler):
    pages.add("/lying", b"\x00\x01\x02binary\x00" * 50, content_type="text/plain")
    result = await crawl(crawler, pages.url("/lying"))
    assert result.error and "binary" in result.content


async def test_404_is_error_result(pages, crawler):
    result = await crawl(crawler, pages.url("/missing"))
    assert result.error and "HTTP 404" in result.content


async def test_500_raises_transient(pages, crawler):
    pages.add("/broken", "oops", status=500)
    with pytest.raises(ApplicationError) as info:
        await crawl(crawler, pages.url("/broken"))
    assert info.value.type == "CrawlTransientError"
    assert not info.value.non_retryable


@pytest.mark.parametrize(("status", "retry_after", "delay"), [(429, "7", 7), (503, "3600", 60)])
async def test_retry_after(pages, crawler, status, retry_after, delay):
    pages.add("/busy", "slow down", status=status, headers={"Retry-After": retry_after})
    with pytest.raises(ApplicationError) as info:
        await crawl(crawler, pages.url("/busy"))
    assert info.value.type == "CrawlTransientError"
    assert info.value.next_retry_delay == timedelta(seconds=delay)


async def test_timeout_raises_transient(pages, blobs):
    pages.add("/slow", article("Slow", PARAGRAPHS), delay=1.5)
    with pytest.raises(ApplicationError, match="timed out|network error") as info:
        await crawl(CrawlActivities(blobs, allow_private=True, timeout=0.3), pages.url("/slow"))
    assert info.value.type == "CrawlTransientError"


async def test_connection_refused_raises_transient(crawler):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ApplicationError) as info:
        await crawl(crawler, f"http://127.0.0.1:{port}/")
    assert info.value.type == "CrawlTransientError"


async def test_loopback_refused_without_fetching(pages, blobs):
    pages.add("/zebras", article("Zebras", PARAGRAPHS))
    result = await crawl(CrawlActivities(blobs), pages.url("/zebras"))
    assert result.error and result.content.startswith("Error: refusing to fetch")
    assert pages.hits == []


# --- url guard -----------------------------------------------------------------

BLOCKED = [
    "http://127.0.0.1/",
    "http://127.1/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[2002:7f00:1::]/",
    "http://0.0.0.0/",
    "http://0/",
    "http://[::]/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://100.100.100.200/",
    "http://[fe80::1%25eth0]/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "https://localhost:8443/x",
    "http://LOCALHOST./",
]


@pytest.mark.parametrize("url", BLOCKED)
async def test_guard_refuses_private_addresses(url):
    with pytest.raises(UnsafeURL):
        await check_url(url, allow_private=False)
    await check_url(url, allow_private=True)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/file",
        "gopher://example.com/",
        "data:text/html,<b>hi</b>",
        "javascript:alert(1)",
        "example.com/page",
        "http:///no-host",
        "http://0177.0.0.1/",  # httpx rejects leading zeros
    ],
)
@pytest.mark.parametrize("allow_private", [False, True])
async def test_guard_refuses_bad_urls(url, allow_private):
    with pytest.raises(UnsafeURL):
        await check_url(url, allow_private=allow_private)


@pytest.mark.parametrize(
    "url", ["http://93.184.216.34/", "HTTPS://8.8.8.8:443/q?x=1", "https://[2606:4700:4700::1111]/"]
)
async def test_guard_allows_public_addresses(url):
    await check_url(url, allow_private=False)


# --- PDF ----------------------------------------------------------------------


def make_pdf(pages: list[list[str]], title: str | None = None) -> bytes:
    """A minimal valid PDF: one text line per list item, Helvetica, ASCII text."""

    def escape(line: str) -> str:
        return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    n = len(pages)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (5 + 2 * i) for i in range(n)), n),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Title (%s) /Producer (tests) >>" % escape(title or "").encode("latin-1"),
    ]
    for i, lines in enumerate(pages):
        text = " T* ".join(f"({escape(line)}) Tj" for line in lines)
        stream = f"BT /F1 12 Tf 14 TL 72 750 Td {text} ET".encode("latin-1")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (6 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    trailer = b"<< /Size %d /Root 1 0 R" % (len(objects) + 1)
    if title is not None:
        trailer += b" /Info 4 0 R"
    out += b"trailer\n%s >>\nstartxref\n%d\n%%%%EOF\n" % (trailer, xref)
    return bytes(out)


PDF_PAGES = [
    ["Boteti River Survey 2024", "Annual report of the Okavango zebra count."],
    [FACT, "The count used three observation posts along the river."],
    ["Appendix: the team plans a drone survey next year."],
]


async def test_pdf_text_reaches_markdown(pages, crawler, blobs):
    pdf = make_pdf(PDF_PAGES, title="Zebra survey report")
    pages.add("/report.pdf", pdf, content_type="application/pdf")
    url = pages.url("/report.pdf")
    result = await crawl(crawler, url)
    assert not result.error, result.content
    assert result.content == f"# Zebra survey report\nURL: {url}\n"
    assert [(s.title, s.url) for s in result.sources] == [("Zebra survey report", url)]
    markdown = await blobs.get(result.blob)
    assert "## Page 1\n" in markdown and "## Page 3\n" in markdown
    assert markdown.index("## Page 2") < markdown.index("4,217 zebras") < markdown.index("## Page 3")
    assert "drone survey" in markdown


async def test_pdf_title_falls_back_to_first_line(pages, crawler):
    pages.add("/untitled.pdf", make_pdf(PDF_PAGES), content_type="application/pdf")
    result = await crawl(crawler, pages.url("/untitled.pdf"))
    assert result.content.startswith("# Boteti River Survey 2024\n")


def test_pdf_page_limit():
    title, markdown = documents.pdf_to_markdown(
        make_pdf([[f"Text of page {n}."] for n in range(1, 8)]), "test", max_pages=3
    )
    assert "Text of page 3." in markdown and "Text of page 4." not in markdown
    assert "## Page 4" not in markdown
    assert "[stopped after 3 of 7 pages]" in markdown


def test_pdf_text_limit():
    _, markdown = documents.pdf_to_markdown(make_pdf([["x" * 80] * 10] * 10), "test", max_chars=1000)
    assert markdown.count("x") <= 1000
    assert "text limit" in markdown


@pytest.mark.parametrize(
    "body",
    [
        make_pdf(PDF_PAGES)[:300],  # truncated download
        b"%PDF-1.7\n" + b"\x00garbage\xff" * 50,  # header, then nonsense
        b"<html><body>not a pdf</body></html>",  # mislabelled
    ],
)
async def test_broken_pdf_is_error_result(pages, crawler, body):
    pages.add("/broken.pdf", body, content_type="application/pdf")
    result = await crawl(crawler, pages.url("/broken.pdf"))
    assert result.error
    assert result.content.startswith("Error: ")
    assert "PDF" in result.content and pages.url("/broken.pdf") in result.content


async def test_pdf_without_text_is_error_result(pages, crawler):
    pages.add("/scan.pdf", make_pdf([[], []]), content_type="application/pdf")
    result = await crawl(crawler, pages.url("/scan.pdf"))
    assert result.error and "no extractable text" in result.content


def _encrypted(data: bytes, user_password: str) -> bytes:
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(data))
    writer.encrypt(user_password, owner_password="owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


async def test_password_protected_pdf_is_error_result(pages, crawler):
    locked = _encrypted(make_pdf(PDF_PAGES), "secret")
    pages.add("/locked.pdf", locked, content_type="application/pdf")
    result = await crawl(crawler, pages.url("/locked.pdf"))
    assert result.error and "encrypted" in result.content


async def test_pdf_with_only_an_owner_password_is_read(pages, crawler, blobs):
    restricted = _encrypted(make_pdf(PDF_PAGES), "")
    pages.add("/restricted.pdf", restricted, content_type="application/pdf")
    result = await crawl(crawler, pages.url("/restricted.pdf"))
    assert not result.error, result.content
    assert "4,217 zebras" in (await blobs.get(result.blob))


# --- hostile pages (issue "Twenty-five ways…": 10, 14, 21, 22) ------------------------


async def test_10_stacked_content_encodings_are_refused(pages, crawler):
    body = gzip.compress(gzip.compress(gzip.compress(b"\0" * 10_000_000)))
    pages.add("/bomb", body, headers={"Content-Encoding": "gzip, gzip, gzip"})
    result = await crawl(crawler, pages.url("/bomb"))
    assert result.error and "stacked content encodings" in result.content


async def test_10_a_gzip_bomb_stops_at_the_size_limit(pages, blobs):
    body = gzip.compress(b"<p>" + b"a" * 50_000_000 + b"</p>", compresslevel=9)  # 50 MB in ~50 KB
    pages.add("/bomb", body, headers={"Content-Encoding": "gzip"})
    crawler = CrawlActivities(blobs, allow_private=True, max_bytes=1_000_000, timeout=5.0)
    tracemalloc.start()
    result = await crawl(crawler, pages.url("/bomb"))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result.error and "page too large" in result.content
    assert peak < 40_000_000  # never the whole 50 MB at once


async def test_14_a_redirect_without_location_is_a_readable_error(pages, crawler):
    pages.add("/nowhere", "", status=302)
    result = await crawl(crawler, pages.url("/nowhere"))
    assert result.error and "redirect without a Location" in result.content


async def test_21_dns_rebinding_never_reaches_the_private_address(pages, blobs, monkeypatch):
    """The name resolves to a public address for the check and to 127.0.0.1
    afterwards: the crawler connects to the checked address only."""
    pages.add("/internal", article("Internal", ["secret payroll"]))
    answers = iter([[(0, 0, 0, "", ("198.51.100.7", 0))], [(0, 0, 0, "", ("127.0.0.1", 0))]])
    asked = []

    async def rebinding(host):
        asked.append(host)
        return next(answers, [(0, 0, 0, "", ("127.0.0.1", 0))])

    # 198.51.100.0/24 is documentation space: pretend it is public.
    monkeypatch.setattr(url_guard, "_blocked", lambda ip: str(ip).startswith("127."))
    monkeypatch.setattr(url_guard, "resolve", rebinding)
    crawler = CrawlActivities(blobs, allow_private=False, timeout=2.0)
    url = f"http://rebind.example:{pages.port}/internal"
    with pytest.raises(ApplicationError):  # 198.51.100.7 does not answer: a transient failure
        await crawl(crawler, url)
    assert asked == ["rebind.example"] and pages.hits == []  # resolved once; 127.0.0.1 never contacted


async def test_21_connections_go_to_the_checked_address(pages, blobs, monkeypatch):
    pages.add("/page", article("Pinned", PARAGRAPHS))

    async def resolves_to_loopback(host):
        return [(0, 0, 0, "", ("127.0.0.1", 0))]

    monkeypatch.setattr(url_guard, "_blocked", lambda ip: False)
    monkeypatch.setattr(url_guard, "resolve", resolves_to_loopback)
    crawler = CrawlActivities(blobs, allow_private=False, timeout=5.0)
    result = await crawl(crawler, f"http://pinned.example:{pages.port}/page")  # no such name in DNS
    assert not result.error and pages.hits == ["/page"]


@pytest.mark.parametrize(
    "host", ["[64:ff9b::a9fe:a9fe]", "[::127.0.0.1]", "[::ffff:0:127.0.0.1]", "[::ffff:169.254.169.254]"]
)
async def test_22_ipv4_inside_ipv6_forms_is_checked(host):
    with pytest.raises(UnsafeURL, match="not a public address"):
        await url_guard.check_url(f"http://{host}/", allow_private=False)


def operator_bomb_pdf(operators: int = 1_000_000) -> bytes:
    """A one-page PDF of a few KB whose page holds ``operators`` text
    operators: quick to send, slow to extract."""
    import zlib

    stream = zlib.compress(b"BT /F1 12 Tf 72 720 Td " + b"(a) Tj " * operators + b"ET", 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_11_a_pdf_that_takes_too_long_is_stopped_at_its_time_limit():
    data = operator_bomb_pdf()
    assert len(data) < 20_000
    started = time.monotonic()
    with pytest.raises(documents.CrawlRefused, match="took longer than 1 s"):
        documents.pdf_in_child(data, "at http://example.com/bomb.pdf", max_seconds=1)
    assert time.monotonic() - started < 10  # killed, not waited for


# --- HTML conversion: a time limit, in a child; never the model's threads (issue 36 item 3) ---


def our_children() -> list[tuple[int, str, str]]:
    """(pid, state, command line) of this process's page converters (its
    children running activities.html_text; the session's dev server and
    other children are not theirs to count)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == os.getpid() and "activities.html_text" in command:
            found.append((int(entry), state, command))
    return found


def many_paragraphs(count: int) -> bytes:
    """A small page whose conversion takes long: time grows faster than the page."""
    return b"<html><head><title>P</title></head><body>" + b"<p>word</p>" * count + b"</body></html>"


async def test_36_a_page_too_complex_to_convert_in_time_is_refused_and_nothing_of_it_runs_on(pages, blobs):
    """30,000 bare paragraphs (330 KB) take trafilatura seconds; with a limit
    of 0.3 s the crawl says so in one line, and the child that converted it
    is killed and reaped: no process of the conversion is left."""
    pages.add("/paragraphs", many_paragraphs(30_000))
    documents.HTML_CHILDREN.close()  # no idle converter from earlier tests
    crawler = CrawlActivities(blobs, allow_private=True, timeout=5.0, convert_seconds=0.3)
    result = await crawl(crawler, pages.url("/paragraphs"))
    assert result.error, result.content
    assert result.content == (
        f"Error: the page at {pages.url('/paragraphs')} is too complex to convert to text: it took longer than 0.3 s"
    )
    assert our_children() == []  # killed and reaped (no zombie either)
    pages.add("/zebras", article("Zebras", PARAGRAPHS))  # the next page gets a new converter
    ok = await crawl(CrawlActivities(blobs, allow_private=True, timeout=5.0), pages.url("/zebras"))
    assert not ok.error and "4,217 zebras" in (await blobs.get(ok.blob))


def test_36_a_model_reply_is_read_while_page_work_holds_every_default_thread():
    """Pages converting used to take the default executor's threads, and a
    trivial reply then failed as unreadable after 30 s: the reading of
    replies has threads of its own. (A loop of its own: its default executor
    is replaced.)"""
    from activities.off_loop import off_loop

    async def read_while_busy():
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=2))
        release = threading.Event()
        held = [loop.run_in_executor(None, release.wait) for _ in range(2)]  # e.g. two pages converting
        try:
            return await off_loop(json.loads, '{"reply": "short"}', seconds=3)
        finally:
            release.set()
            await asyncio.gather(*held)

    assert asyncio.run(read_while_busy()) == {"reply": "short"}


async def test_36_a_crawl_cancelled_while_its_page_converts_leaves_no_converter_running(pages, blobs):
    """A cancelled crawl (its run cancelled, its heartbeat lost) kills the
    child converting its page at once, rather than letting it run its limit."""
    pages.add("/zebras", article("Zebras", PARAGRAPHS))
    pages.add("/paragraphs", many_paragraphs(60_000))  # seconds of conversion
    documents.HTML_CHILDREN.close()
    crawler = CrawlActivities(blobs, allow_private=True, timeout=5.0, convert_seconds=120)
    assert not (await crawl(crawler, pages.url("/zebras"))).error
    [(converter, _, _)] = our_children()  # idle, waiting for the next page
    task = asyncio.create_task(crawl(crawler, pages.url("/paragraphs")))
    for _ in range(3000):  # until it works on the page
        if any(pid == converter and state == "R" for pid, state, _ in our_children()) or task.done():
            break
        await asyncio.sleep(0.02)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):  # the page-work thread reaps the killed child
        if not our_children():
            break
        await asyncio.sleep(0.05)
    assert our_children() == []
