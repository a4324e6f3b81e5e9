"""``recheck_page``: one page an earlier run cited, read again and compared
with the text that run read.

The request asks conditionally (``If-None-Match`` / ``If-Modified-Since``)
when the earlier run kept the page's validators and its text is still in the
blob store; a 304 means unchanged. Otherwise the page is read as the crawl
reads it (``CrawlActivities.read_page``: same guard, limits and converters),
its markdown stored by hash, and compared: the same hash is the same text;
another is compared passage by passage (``activities/page_diff.py``, in a
thread, with a time limit). 404 and 410 say the page is gone; a redirect to another place
says it moved. A network failure or a 5xx raises, so Temporal retries; the
workflow names a page it still could not read.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from temporalio import activity

from activities.crawl import CrawlActivities, NotModified, PageGone, conditional_headers
from activities.documents import CrawlRefused, one_line
from activities.heartbeat import heartbeating
from activities.page_diff import passages
from activities.url_guard import UnsafeURL
from infra.blobs import BlobNotFound, BlobStore
from workflows.models import PageRead
from workflows.recheck_models import PageCheck, RecheckRequest

COMPARE_SECONDS = 60.0  # the comparison's input is bounded (page_diff.MAX_TEXT): seconds at worst


def same_place(a: str, b: str) -> bool:
    """Whether two URLs name the same page (scheme, a trailing slash and a
    fragment aside): a redirect between them is not a move."""
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.netloc.lower(), pa.path.rstrip("/"), pa.query) == (pb.netloc.lower(), pb.path.rstrip("/"), pb.query)


class RecheckActivities:
    """The ``recheck_page`` activity; one instance per worker, sharing the
    crawler's settings (private addresses, the web it may read)."""

    def __init__(self, crawler: CrawlActivities, blobs: BlobStore) -> None:
        self.crawler = crawler
        self.blobs = blobs

    @activity.defn(name="recheck_page")
    async def recheck_page(self, request: RecheckRequest) -> PageCheck:
        url = request.url
        old, note = await self._earlier_text(request)
        ask = conditional_headers(request.etag, request.last_modified) if old is not None else {}
        try:
            page = await self.crawler.read_page(url, ask)
        except NotModified as same:
            moved = None if same_place(url, same.url) else same.url
            kept = PageRead(
                url=same.url,
                title=request.title,
                blob=request.blob,
                etag=same.etag or request.etag,
                last_modified=same.last_modified or request.last_modified,
            )
            return PageCheck(
                url=url, title=request.title, outcome="unchanged", moved_to=moved, page=kept, not_modified=True
            )
        except PageGone as gone:
            return PageCheck(url=url, title=request.title, outcome="gone", status=gone.status, note=str(gone))
        except (UnsafeURL, CrawlRefused) as refused:
            return PageCheck(url=url, title=request.title, outcome="unreadable", note=one_line(str(refused))[:300])
        ref = await self.blobs.put(page.markdown)
        now = PageRead(url=page.url, title=page.title, blob=ref, etag=page.etag, last_modified=page.last_modified)
        check = PageCheck(
            url=url,
            title=request.title or page.title,
            outcome="unchanged",
            moved_to=None if same_place(url, page.url) else page.url,
            page=now,
        )
        if old is None:
            return check.model_copy(update={"outcome": "not_compared", "note": note})
        if ref == request.blob:
            return check
        try:
            async with heartbeating(), asyncio.timeout(COMPARE_SECONDS):
                changes, more = await asyncio.to_thread(passages, old, page.markdown)
        except TimeoutError:
            note = f"comparing the two readings took longer than {COMPARE_SECONDS:g} s"
            return check.model_copy(update={"outcome": "not_compared", "note": note})
        if not changes:  # whitespace aside, the same text
            return check
        return check.model_copy(update={"outcome": "changed", "changes": changes, "more_changes": more})

    async def _earlier_text(self, request: RecheckRequest) -> tuple[str | None, str]:
        """The text the earlier run read, or None and why there is none."""
        if not request.blob:
            return None, "the earlier run kept no copy of this page"
        try:
            return await self.blobs.get(request.blob), ""
        except BlobNotFound:
            return None, "the copy the earlier run read is no longer stored"
