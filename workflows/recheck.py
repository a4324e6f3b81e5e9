"""Keeping a topic current: a scheduled run (and ``--continue-from ID
--recheck``) re-checks the earlier run's sources before it plans.

The step (``recheck``), in the conductor right after the earlier run is
loaded, whatever any model will say: each page the earlier run cited is read
again by the ``recheck_page`` activity (conditionally, when the page gave
``ETag`` / ``Last-Modified``) and compared with the text that run read, kept
by hash in the blob store; the earlier run's searches are run again and
their new results noted. What it finds is ``RunState.recheck``: the planner
and the reporter are shown it, and the workflow itself writes the report's
"What changed since <date>" from it (``workflows/changes.py``).

When nothing changed (every page the same, no page gone or moved, no new
search result) the run writes no new report: the earlier one stands, under a
section that says so in one line, with no model call at all
(``unchanged_report``). Otherwise the run plans and reports as a run that
builds on an earlier one does.

A finished run keeps what the next re-check needs: the pages it read (URL,
title, blob reference of their text, validators) and the searches it ran
(``ResearchResult.pages`` and ``.searches``, from ``pages_read`` and
``searches_run``). An earlier run that ended before runs kept them has its
cited pages read again, and the report says they could not be compared.

Decisions are the pure functions here; the activity is ``activities/recheck.py``.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, is_cancelled_exception

from workflows.activity_calls import failure_reason, summary
from workflows.box import Box
from workflows.coordinator import Coordination
from workflows.reporter import verify_citations

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows import changes
    from workflows.changes import changes_section, without_changes
    from workflows.models import Citation, PageRead, RecheckSummary, ResearchInput, SearchRun
    from workflows.prior import PriorRun, with_changes
    from workflows.recheck_models import PageCheck, Recheck, RecheckRequest, SearchCheck
    from workflows.state import RunState
    from workflows.tool_models import ToolResult
    from workflows.topics import normal

PATCH = "recheck-sources"
MAX_PAGES = 20  # cited pages read again per run
MAX_SEARCHES = 8  # searches run again per run
MAX_KEPT_PAGES = 200  # pages a result keeps for the next re-check
MAX_KEPT_SEARCHES = 50
MEMO = "recheck"  # the memo key `schedule list` reads
RECHECK_CALL = dict(
    # a fetch (the crawler's own time limit) and the comparison (its own)
    start_to_close_timeout=timedelta(seconds=150),
    heartbeat_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=20), maximum_attempts=3
    ),
)


def wanted(request: ResearchInput) -> bool:
    """Whether a run re-checks: a scheduled run always, another when asked."""
    return bool(request.schedule or (request.continue_from and request.recheck))


def handed_on(request: ResearchInput, prior: PriorRun | None) -> Coordination | None:
    """The coordinator's decision when it needs no asking: the run asks the
    question the earlier run researched (a schedule's runs always do), so it
    goes to research as it did then. None: ask the coordinator."""
    if prior is None or request.enable_clarification or normal(request.question) != normal(prior.question):
        return None
    return Coordination("handoff", topic=request.question, locale=prior.locale or None)


def _key(url: str) -> str:
    return url.split("#", 1)[0].rstrip("/")


def pages_to_check(prior: PriorRun) -> tuple[list[RecheckRequest], int]:
    """The pages the earlier run cited, then those it read without citing
    (a finding may rest on one), each with what it kept of it; and how many
    more there were than are read again."""
    kept = {_key(p.url): p for p in prior.pages or []}
    behind = [*prior.citations, *(Citation(title=p.title, url=p.url) for p in prior.pages or [])]
    requests: dict[str, RecheckRequest] = {}
    for citation in behind:
        key = _key(citation.url)
        if key in requests or not citation.url.startswith(("http://", "https://")):
            continue
        page = kept.get(key)
        requests[key] = RecheckRequest(
            url=citation.url,
            title=citation.title or (page.title if page else ""),
            blob=page.blob if page else None,
            etag=page.etag if page else None,
            last_modified=page.last_modified if page else None,
        )
    found = list(requests.values())
    return found[:MAX_PAGES], max(len(found) - MAX_PAGES, 0)


def new_results(result: ToolResult, known: set[str]) -> list[Citation]:
    """The search's results that neither it nor the earlier run had."""
    fresh: dict[str, Citation] = {}
    for citation in result.sources:
        if _key(citation.url) not in known:
            fresh.setdefault(_key(citation.url), citation)
    return list(fresh.values())


def nothing_changed(recheck: Recheck, prior: PriorRun) -> bool:
    """Every page re-read is the same and where it was, every search found
    only what it found then, and the earlier report is whole: it stands."""
    if prior.report_cut or recheck.kept_nothing or not (recheck.pages or recheck.searches):
        return False
    pages_same = all(p.outcome == "unchanged" and not p.moved_to for p in recheck.pages)
    return pages_same and not any(s.new or s.error for s in recheck.searches)


def summarise(recheck: Recheck) -> RecheckSummary:
    pages = recheck.pages
    return RecheckSummary(
        since=recheck.since,
        run_id=recheck.run_id,
        pages=len(pages),
        changed=sum(p.outcome == "changed" for p in pages),
        gone=sum(p.outcome == "gone" for p in pages),
        moved=sum(bool(p.moved_to) for p in pages),
        not_compared=sum(p.outcome in ("not_compared", "unreadable") for p in pages),
        searches=len(recheck.searches),
        new_results=len(changes.new_results(recheck)),
    )


def memo_line(found: RecheckSummary) -> str:
    """One line on what a re-check found (`schedule list`, the progress stream)."""
    counts = ((found.changed, "changed"), (found.gone, "gone"), (found.moved, "moved"))
    parts = [f"{n} source(s) {what}" for n, what in counts if n]
    parts += [f"{found.new_results} new search result(s)"] if found.new_results else []
    text = f"changes since {found.since}: {', '.join(parts)}" if parts else f"no changes since {found.since}"
    return text + (f" ({found.not_compared} not compared)" if found.not_compared else "")


# --- the step ---------------------------------------------------------------------


async def recheck(box: Box) -> Recheck:
    """Read the earlier run's cited pages again and run its searches again,
    side by side; the pages read now become the run's (a later crawl of
    the same URL is answered from them)."""
    state, prior = box.state, box.state.prior
    assert prior is not None
    requests, left = pages_to_check(prior)
    runs = (prior.searches or [])[:MAX_SEARCHES]
    box.emit(
        "notice",
        f"re-checking what run {prior.run_id} of {prior.date} read: {len(requests)} source(s), {len(runs)} search(es)",
    )
    known = {_key(c.url) for c in prior.citations} | {_key(p.url) for p in prior.pages or []}
    done = await asyncio.gather(
        *(_check_page(box, request) for request in requests), *(_search_again(box, run, known) for run in runs)
    )
    pages = [d for d in done if isinstance(d, PageCheck)]
    for page in pages:
        _keep(state, page)
    found = Recheck(
        since=prior.date,
        run_id=prior.run_id,
        today=workflow.now().strftime("%Y-%m-%d"),
        pages=pages,
        searches=[d for d in done if isinstance(d, SearchCheck)],
        pages_left=left,
        kept_nothing=prior.pages is None and prior.searches is None,
    )
    line = memo_line(summarise(found))
    workflow.upsert_memo({MEMO: line})
    box.emit("notice", f"re-check: {line}")
    return found


async def _check_page(box: Box, request: RecheckRequest) -> PageCheck:
    box.state.usage.crawls += 1
    try:
        return await workflow.execute_activity(
            "recheck_page", request, result_type=PageCheck, summary=summary(f"re-check · {request.url}"), **RECHECK_CALL
        )
    except ActivityError as err:
        if is_cancelled_exception(err):
            raise
        reason = f"could not be read now: {failure_reason(err)}"[:300]
        return PageCheck(url=request.url, title=request.title, outcome="unreadable", note=reason)


async def _search_again(box: Box, run: SearchRun, known: set[str]) -> SearchCheck:
    result = await box.calls.search(run.query, "re-check")
    if result.error:
        return SearchCheck(query=run.query, error=result.content.removeprefix("Error: ")[:300])
    return SearchCheck(query=run.query, new=new_results(result, known | {_key(u) for u in run.urls}))


def _keep(state: RunState, check: PageCheck) -> None:
    """A page read now is the run's, as if it had crawled it."""
    page = check.page
    if page is None or not page.blob:
        return
    title = page.title or check.title
    result = ToolResult(
        content=f"# {title}\nURL: {page.url}\n",
        blob=page.blob,
        sources=[Citation(title=title, url=page.url)],
        etag=page.etag,
        last_modified=page.last_modified,
    )
    for url in dict.fromkeys((check.url, page.url)):
        state.crawled.setdefault(url, result)
    state.sources.setdefault(page.url, Citation(title=title, url=page.url))


def unchanged_report(box: Box) -> str:
    """Nothing changed: the earlier report, once, under a one-line section
    saying so; its findings stay the run's (for follow-ups and the next run)."""
    state, prior = box.state, box.state.prior
    assert prior is not None and state.recheck is not None
    state.observations = [prior.findings] if prior.findings else []
    box.emit("notice", f"nothing changed since {prior.date}: its report stands")
    report = with_changes(without_changes(prior.report), changes_section(state.recheck))
    return verify_citations(report, list(state.sources.values()))


# --- what a finished run keeps for the next re-check --------------------------------


def pages_read(state: RunState) -> list[PageRead]:
    """The pages this run read (newest reading first), then those of the
    earlier run it did not read again, so a page cited but not re-read keeps
    its old copy for the next comparison."""
    pages: dict[str, PageRead] = {}
    for result in state.pages_with_text():
        source = result.sources[0]
        pages.setdefault(
            _key(source.url),
            PageRead(
                url=source.url,
                title=source.title,
                blob=result.blob,
                etag=result.etag,
                last_modified=result.last_modified,
            ),
        )
    for page in (state.prior.pages or []) if state.prior else []:
        pages.setdefault(_key(page.url), page)
    return list(pages.values())[:MAX_KEPT_PAGES]


def searches_run(state: RunState) -> list[SearchRun]:
    runs = {q: SearchRun(query=q, urls=[c.url for c in r.sources]) for q, r in state.searched.items() if not r.error}
    for run in (state.prior.searches or []) if state.prior else []:
        runs.setdefault(run.query, run)
    return list(runs.values())[:MAX_KEPT_SEARCHES]


def kept(state: RunState) -> dict:
    """The result's fields for the next re-check (``ResearchResult``)."""
    return {
        "pages": pages_read(state),
        "searches": searches_run(state),
        "recheck": summarise(state.recheck) if state.recheck else None,
    }
