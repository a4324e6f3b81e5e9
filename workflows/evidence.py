"""Evidence: every research step reads before its first model turn, whatever
the model does (a model that never calls a tool still writes from read
pages; one that does saves the turns of its first search and crawl).

    1. search the step's own queries (its title and description; the user's
       documents too when the run has them)   web_search, local_search
    2. read the best few results side by side     crawl (the URL guard, the cache)
    3. rank their passages against the step       rank_evidence
    ...the agent's loop, its first message holding the passages; beside it
    3b. follow the lead the best passages give    web_search, crawl
    4. find the passages its findings rest on     support_findings
    5. for the reporter: the steps' passages      join_evidence

Every call is an activity; pages and passages travel as blob references.
``step_queries``, ``candidates`` and ``without_evidence`` are the decisions,
pure functions.
"""

from __future__ import annotations

import asyncio
import re

from temporalio import workflow

from workflows.box import Box

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.evidence_models import (
        EvidenceJoin,
        EvidencePage,
        EvidenceSet,
        Gathered,
        GatherRequest,
        StepEvidence,
        Support,
        SupportRequest,
    )
    from workflows.models import Step
    from workflows.tool_models import ToolResult

MAX_QUERY_CHARS = 300
MAX_QUERIES = 2
LEAD_PAGES = 2  # pages the search for a step's lead may add
_WORD = re.compile(r"[^\W_]+")
_SMALL = frozenset("a an and are as at be by do does for from how in is it its of on or the to was were what".split())


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _SMALL}


def _clip(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_QUERY_CHARS else line[:MAX_QUERY_CHARS].rsplit(" ", 1)[0]


def step_queries(topic: str, step: Step) -> list[str]:
    """The step's own search queries: its title (with the topic's first words
    when the title shares none of them, so "Energy density" is searched about
    the question's subject), and its description when it adds words."""
    title = _clip(step.title)
    topic_words = " ".join(topic.split()[:12])
    first = title if _words(title) & _words(topic) or not title else _clip(f"{topic_words} {title}")
    queries = [first] if first else []
    description = _clip(" ".join(step.description.split()[:30]))
    if description and len(_words(description) - _words(first)) >= 2:
        queries.append(description)
    return queries[:MAX_QUERIES] or [_clip(topic)]


def candidates(results: list[ToolResult], wanted: int, skip: set[str]) -> list[tuple[str, str]]:
    """(url, title) of the pages to read: the results of the queries taken in
    turn (each query's best first), each URL once, at most ``wanted``."""
    lists = [[s for s in r.sources if s.url.startswith(("http://", "https://"))] for r in results if not r.error]
    out: list[tuple[str, str]] = []
    for depth in range(max((len(hits) for hits in lists), default=0)):
        for hits in lists:
            if depth < len(hits) and hits[depth].url not in skip and all(hits[depth].url != u for u, _ in out):
                out.append((hits[depth].url, hits[depth].title))
    return out[:wanted]


def without_evidence(problem: str) -> str:
    """The findings of a step that read nothing: said plainly, instead of
    whatever the model guessed."""
    return (
        f"**No evidence was gathered for this step** ({problem}). Nothing here rests on a source, "
        "so this step has no findings."
    )


def focus(topic: str, step: Step) -> str:
    return f"{step.title}\n{step.description}\n{topic}"


async def gather(box: Box, step: Step, where: str, given: list[EvidencePage] = ()) -> Gathered:
    """Steps 1-3: search, read the best results side by side, rank; with the
    pages the user gave while the run ran (``given``, workflows/steering.py)."""
    r, calls = box.request, box.calls
    gathered = Gathered(queries=step_queries(box.state.topic, step))
    label = f"{where} · evidence"
    # as many results as pages to read, so a step with one query can read them all
    width = max(r.max_search_results, r.evidence_pages) if workflow.patched("evidence-search-width") else None
    found = list(await asyncio.gather(*(calls.search(q, label, width) for q in gathered.queries)))
    if r.resources:
        local = await calls.local_search(gathered.queries[0], label)
        gathered.local = "" if local.error else local.content
    gathered.searched = any(not f.error and f.sources for f in found)
    tried: set[str] = set()
    for _ in range(2):  # a second round stands in for pages that could not be read
        todo = candidates(found, r.evidence_pages - len(gathered.pages), tried)
        tried.update(url for url, _ in todo)
        gathered.pages += await _read(box, todo, label)
        if len(gathered.pages) >= r.evidence_pages or not todo:
            break
    gathered.pages += [p for p in given if all(p.url != q.url for q in gathered.pages)]
    if gathered.pages or gathered.local:
        request = GatherRequest(
            focus=focus(box.state.topic, step),
            pages=gathered.pages,
            local=gathered.local,
            queries=gathered.queries,
            budget=r.evidence_tokens,
        )
        gathered.evidence = await calls.evidence("rank_evidence", request, EvidenceSet, f"{label}: ranking passages")
    gathered.problem = _problem(found, tried, gathered)
    return gathered


async def _read(box: Box, todo: list[tuple[str, str]], label: str) -> list[EvidencePage]:
    """The pages of ``todo`` (url, title) read side by side: those with text."""
    pages = await asyncio.gather(*(box.calls.crawl(url, label) for url, _ in todo))
    out = []
    for (url, title), page in zip(todo, pages):
        if not page.error and page.blob:
            name = page.sources[0].title if page.sources else title
            out.append(EvidencePage(url=page.source or url, title=name or url, blob=page.blob))
    return out


def follow_lead(box: Box, gathered: Gathered | None, where: str) -> asyncio.Task[None] | None:
    """Step 3b, beside the agent's loop: when the step's best passages point
    to something its searches did not ask about (their lead: a name they
    introduce, with the step's words they do not hold), search it and read up
    to ``LEAD_PAGES`` pages not read yet (never more than ``evidence_pages``). Their passages join the step's for
    its findings and the report. The task to await before the findings, or
    None when there is no lead."""
    lead = gathered.evidence.lead if gathered and gathered.evidence else ""
    if not lead or not workflow.patched("follow-leads"):
        return None
    return asyncio.create_task(_follow(box, gathered, lead, f"{where} · evidence"))


async def _follow(box: Box, gathered: Gathered, lead: str, label: str) -> None:
    r = box.request
    found = await box.calls.search(lead, label, max(r.max_search_results, r.evidence_pages))
    todo = candidates([found], min(LEAD_PAGES, r.evidence_pages), {p.url for p in gathered.pages})
    gathered.pages += await _read(box, todo, label)
    gathered.searched = gathered.searched or bool(not found.error and found.sources)


def _problem(found: list[ToolResult], tried: set[str], gathered: Gathered) -> str:
    if gathered.pages or gathered.local:
        return ""
    errors = [f.content.removeprefix("Error: ")[:200] for f in found if f.error]
    if errors and len(errors) == len(found):
        return f"the search failed: {errors[0]}"
    if not tried:
        return "the search found no page to read"
    return f"none of the {len(tried)} page(s) found could be read"


async def support(box: Box, step: Step, findings: str, history: str | None, gathered: Gathered, where: str) -> Support:
    """Step 4: the passages the findings rest on; findings of a step that read
    nothing and found nothing say so."""
    request = SupportRequest(
        findings=findings,
        focus=focus(box.state.topic, step),
        history=history,
        pages=gathered.pages,
        local=gathered.local,
        budget=box.request.evidence_tokens,
    )
    found = await box.calls.evidence("support_findings", request, Support, f"{where} · evidence behind the findings")
    if found is None:  # could not be told: the findings stand as written
        return Support(findings=findings, read=len(gathered.pages), searched=gathered.searched)
    if not found.read and not (found.searched or gathered.searched):
        found.findings = without_evidence(gathered.problem or "nothing readable was found")
    return found


async def passages_text(box: Box) -> str:
    """The passages the findings rest on, as text (a report the workflow
    writes itself: the reporter failed); "" when there are none."""
    ref = await for_report(box, box.state.evidence)
    found = (
        await box.calls.evidence("evidence_text", ref, str, "evidence behind the findings, for the report")
        if ref
        else None
    )
    return found or ""


async def for_report(box: Box, steps: list[StepEvidence]) -> str | None:
    """Step 5: one set of the steps' supporting passages, for the reporter."""
    usable = [s for s in steps if s.support]
    if not usable:
        return None
    request = EvidenceJoin(steps=usable, budget=box.request.evidence_tokens)
    return await box.calls.evidence("join_evidence", request, str | None, "reporter · evidence behind the findings")
