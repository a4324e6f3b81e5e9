"""The crawl tool against a loopback web server, and the URL guard."""

from __future__ import annotations

import gzip
import socket
from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import activities.crawl as crawl_module
from activities.blobs import BlobStore
from activities.crawl import CrawlActivities
from activities.url_guard import UnsafeURL, check_url
from tests.harness.pages import PageServer, article
from workflows.models import CrawlRequest

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
    return BlobStore(tmp_path / "blobs")


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
    markdown = blobs.get(result.blob)
    assert "4,217 zebras" in markdown
    for boilerplate in ("Subscribe to our newsletter", "All rights reserved", "Cookie settings"):
        assert boilerplate not in markdown


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
    assert FACT in blobs.get(result.blob)


async def test_short_page_falls_back_to_text(pages, crawler, blobs):
    pages.add("/short", "<html><body><div>Answer: 42.</div></body></html>")
    result = await crawl(crawler, pages.url("/short"))
    assert not result.error, result.content
    assert "Answer: 42." in blobs.get(result.blob)
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
    assert "Café crème à Besançon" in blobs.get(result.blob)


# --- redirects -----------------------------------------------------------------


async def test_redirects_followed_and_rechecked(pages, crawler, monkeypatch):
    pages.add("/new", article("Moved", PARAGRAPHS))
    pages.redirect("/old", "/middle", status=301)
    pages.redirect("/middle", pages.url("/new"))
    checked = []

    async def recording_check(url, allow_private):
        checked.append(url)

    monkeypatch.setattr(crawl_module, "check_url", recording_check)
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

    monkeypatch.setattr(crawl_module, "check_url", guard)
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


@pytest.mark.parametrize("content_type", ["application/octet-stream", "image/png", "application/pdf"])
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


@pytest.mark.parametrize("url", ["http://93.184.216.34/", "HTTPS://8.8.8.8:443/q?x=1", "https://[2606:4700:4700::1111]/"])
async def test_guard_allows_public_addresses(url):
    await check_url(url, allow_private=False)
