"""Reading a page again and comparing it with what an earlier run read: the
crawl keeps the validators, the ``recheck_page`` activity asks conditionally
and tells unchanged, changed (passage by passage), gone, moved and not
comparable apart. Real HTTP to a loopback server, real trafilatura, a real
blob store; the comparison's pure function on hostile inputs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.crawl import CrawlActivities
from activities.page_diff import passages, sentences
from activities.recheck import RecheckActivities, same_place
from infra.blobs import FileBlobStore
from testkit.pages import PageServer, article
from workflows.recheck_models import MAX_PASSAGE_CHARS, MAX_PASSAGES, RecheckRequest
from workflows.tool_models import CrawlRequest

OLD = "The harbour counted 4417 ships in 1911."
NEW = "The harbour counted 5120 ships in 1911."
ROOT = Path(__file__).resolve().parent.parent
PARAGRAPHS = ["The harbour has kept a ledger since 1850.", OLD, "Its keeper wrote every entry by hand."]


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


@pytest.fixture
def checker(crawler, blobs):
    return RecheckActivities(crawler, blobs)


async def first_read(crawler: CrawlActivities, url: str) -> RecheckRequest:
    """What an earlier run kept of the page it crawled."""
    result = await crawler.crawl(CrawlRequest(url=url))
    assert not result.error, result.content
    source = result.sources[0]
    return RecheckRequest(
        url=source.url, title=source.title, blob=result.blob, etag=result.etag, last_modified=result.last_modified
    )


async def test_the_crawl_keeps_the_validators_the_server_gave(pages, crawler):
    pages.add("/ledger", article("Harbour ledger", PARAGRAPHS), validators=True)
    pages.add("/plain", article("Harbour ledger", PARAGRAPHS))
    kept = await first_read(crawler, pages.url("/ledger"))
    assert kept.etag and kept.etag.startswith('"') and "GMT" in (kept.last_modified or "")
    plain = await first_read(crawler, pages.url("/plain"))
    assert plain.etag is None and plain.last_modified is None


async def test_an_unchanged_page_is_asked_for_conditionally_and_answered_304(pages, crawler, checker):
    pages.add("/ledger", article("Harbour ledger", PARAGRAPHS), validators=True)
    earlier = await first_read(crawler, pages.url("/ledger"))
    check = await ActivityEnvironment().run(checker.recheck_page, earlier)
    assert check.outcome == "unchanged" and check.not_modified and not check.changes and check.moved_to is None
    assert check.page and check.page.blob == earlier.blob and check.page.etag == earlier.etag  # kept for next time
    path, headers = pages.requests[-1]
    assert path == "/ledger" and headers.get("If-None-Match") == earlier.etag
    assert headers.get("If-Modified-Since") == earlier.last_modified


async def test_a_page_without_validators_is_compared_by_its_text(pages, crawler, checker):
    pages.add("/ledger", article("Harbour ledger", PARAGRAPHS))
    earlier = await first_read(crawler, pages.url("/ledger"))
    same = await checker.recheck_page(earlier)
    assert same.outcome == "unchanged" and not same.not_modified and same.page.blob == earlier.blob
    assert "If-None-Match" not in pages.requests[-1][1]


async def test_a_changed_page_gives_each_changed_passage_with_its_figures(pages, crawler, checker):
    pages.add("/ledger", article("Harbour ledger", PARAGRAPHS), validators=True)
    earlier = await first_read(crawler, pages.url("/ledger"))
    changed = [PARAGRAPHS[0], NEW, "A second keeper joined in 1912."]  # one figure changed, one line replaced
    pages.add("/ledger", article("Harbour ledger", changed), validators=True)
    check = await checker.recheck_page(earlier)
    assert check.outcome == "changed" and not check.not_modified
    assert check.page.blob != earlier.blob and check.page.etag != earlier.etag  # the new reading, kept
    ship = next(c for c in check.changes if "ships" in c.old)
    assert (ship.old, ship.new) == (OLD, NEW)
    assert [(f.old, f.new) for f in ship.figures] == [("4417", "5120")]
    keeper = next(c for c in check.changes if "keeper" in c.old)
    assert keeper.new == "A second keeper joined in 1912."
    assert len(check.changes) == 2


@pytest.mark.parametrize("status", [404, 410])
async def test_a_page_that_is_gone_says_so(pages, crawler, checker, status):
    pages.add("/ledger", article("Harbour ledger", PARAGRAPHS))
    earlier = await first_read(crawler, pages.url("/ledger"))
    pages.add("/ledger", "gone", content_type="text/plain", status=status)
    check = await checker.recheck_page(earlier)
    assert check.outcome == "gone" and check.status == status and check.page is None
    assert f"HTTP {status}" in check.note


async def test_a_page_that_moved_names_where_it_went(pages, crawler, checker):
    pages.add("/ledger", article("Harbour ledger", PARAGRAPHS))
    earlier = await first_read(crawler, pages.url("/ledger"))
    pages.add("/archive/ledger", article("Harbour ledger", PARAGRAPHS))
    pages.redirect("/ledger", "/archive/ledger", status=301)
    check = await checker.recheck_page(earlier)
    assert check.moved_to == pages.url("/archive/ledger") and check.outcome == "unchanged"
    assert check.page.url == pages.url("/archive/ledger")


async def test_what_cannot_be_compared_is_read_and_says_why(pages, crawler, checker, blobs):
    pages.add("/ledger", article("Harbour ledger", PARAGRAPHS), validators=True)
    never_kept = RecheckRequest(url=pages.url("/ledger"), title="Harbour ledger")
    check = await checker.recheck_page(never_kept)
    assert check.outcome == "not_compared" and "kept no copy" in check.note
    assert check.page and check.page.blob  # read now: the next run can compare
    assert "If-None-Match" not in pages.requests[-1][1]

    earlier = await first_read(crawler, pages.url("/ledger"))
    (blobs.root / earlier.blob[7:9] / earlier.blob[7:]).unlink()  # deleted by hand, or gc
    lost = await checker.recheck_page(earlier)
    assert lost.outcome == "not_compared" and "no longer stored" in lost.note
    assert "If-None-Match" not in pages.requests[-1][1]  # a 304 would leave nothing to compare with
    assert lost.page and lost.page.blob == earlier.blob  # stored again


async def test_a_page_that_cannot_be_read_now_is_named_not_failed(pages, crawler, checker):
    pages.add("/ledger", article("Harbour ledger", PARAGRAPHS))
    earlier = await first_read(crawler, pages.url("/ledger"))
    pages.add("/ledger", b"\x89PNG", content_type="image/png")
    check = await checker.recheck_page(earlier)
    assert check.outcome == "unreadable" and "image/png" in check.note


def test_same_place_ignores_scheme_slash_and_fragment():
    assert same_place("http://a.example/x/", "https://A.example/x#top")
    assert not same_place("http://a.example/x", "http://a.example/y")
    assert not same_place("http://a.example/x?p=1", "http://a.example/x?p=2")


# --- the comparison -------------------------------------------------------------------


def test_sentences_split_on_full_stops_not_decimals():
    assert sentences("It rose 3.5 %. Then fell.\n\n## Heading\n- item one\n价格上涨。然后下跌。") == [
        "It rose 3.5 %.",
        "Then fell.",
        "## Heading",
        "- item one",
        "价格上涨。",
        "然后下跌。",
    ]


def test_whitespace_alone_is_no_change_and_additions_and_removals_are():
    text = "One. Two.\n\nThree."
    assert passages(text, "One.   Two.\nThree.\n") == ([], 0)
    added, _ = passages(text, text + "\n\nFour has 4 parts.")
    assert [(c.old, c.new, c.figures) for c in added] == [("", "Four has 4 parts.", [])]
    removed, _ = passages(text, "One. Three.")
    assert [(c.old, c.new) for c in removed] == [("Two.", "")]


def test_a_long_changed_passage_is_cut_around_the_change():
    words = " ".join(f"word{n}" for n in range(400))
    old, new = f"{words} 4417 ships {words}.", f"{words} 5120 ships {words}."
    [change], _ = passages(old, new)
    assert len(change.old) <= MAX_PASSAGE_CHARS + 2 and "4417 ships" in change.old and "5120 ships" in change.new
    assert change.old.startswith("…") and change.new.startswith("…")  # cut before the change, at a space
    assert change.old[1:].split()[0].startswith("word") and change.old.split()[-1] in old.split()  # whole words
    assert [(f.old, f.new) for f in change.figures] == [("4417", "5120")]


def test_many_changes_are_bounded_and_counted():
    old = "\n".join(f"Line {n} says {n}." for n in range(100))
    new = "\n".join(f"Line {n} says {n + 1}." for n in range(100))
    listed, more = passages(old, new)
    assert len(listed) == MAX_PASSAGES and more == 100 - MAX_PASSAGES


HOSTILE = {  # inputs that make a naive comparison quadratic or worse
    "repeated": '"a. " * 200_000, "a. " * 100_000 + "b. " + "a. " * 99_999',
    "alternating": '" ".join(f"x{i % 2}." for i in range(100_000)), " ".join(f"x{(i + 1) % 3}." for i in range(100_000))',
    "all-different": '" ".join(f"s{i}." for i in range(100_000)), " ".join(f"t{i}." for i in range(100_000))',
    "one-long-word": '"9" * (2 * MAX_TEXT), "8" * (2 * MAX_TEXT)',
    "number-soup": '" ".join(["1 2"] * 50_000) + ".", " ".join(["2 1"] * 50_000) + "."',
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_pages_are_compared_at_once(name):
    """Each runs in a child process killed after a generous bound (not a
    measurement): a comparison that went quadratic would fail, not hang."""
    code = (
        "from activities.page_diff import MAX_TEXT, passages\n"
        f"listed, more = passages({HOSTILE[name]})\n"
        "print(len(listed))"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"comparing the {name} pages still ran after 60 s")
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) <= MAX_PASSAGES
