"""Evidence: the passages of what a research step read, ranked against the
step, for its first model turn (``rank_evidence``); the passages its findings
rest on, for the reporter (``support_findings``, ``join_evidence``).

Pages live in the blob store (the crawl's markdown); this module cuts them in
passages (``activities/reading.py``), ranks them with BM25, and writes what it
picked back to the blob store, so workflow history carries only references.
The CPU work runs in a thread, never on the worker's event loop.

Every passage is rendered as one paragraph, ``[Title](URL): text``, so each
keeps its page wherever it is shown (a reader cut for a small window drops
whole passages, never their links); nothing in a page's text can read as
such a header (``body``).
"""

from __future__ import annotations

import asyncio
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import quote

from temporalio import activity

from activities import leads, reading, tokens
from activities.claims import claim_lines, holds, states_something
from activities.heartbeat import heartbeating
from activities.llm import render_prompt
from activities.off_loop import in_pool
from activities.support import support_of as statement_support
from infra.blobs import BlobStore
from workflows.evidence_models import (
    NOT_FOUND,
    NOTHING_WRITTEN,
    EvidenceJoin,
    EvidencePage,
    EvidenceSet,
    GatherRequest,
    Support,
    SupportRequest,
)
from workflows.models import Citation
from workflows.statements import mostly_invention
from workflows.support_models import SupportCounts

PASSAGE_TOKENS = 220  # a passage of evidence, before its link
MAX_PAGE_CHARS = 2_000_000  # of one page's text looked at
MAX_SHOWN = 60_000  # characters of passages put into a report the workflow writes
MAX_AGENT_PAGES = 12  # pages an agent read itself that its findings are traced to (its last ones)
UNMATCHED_SHARE = 1 / 10  # of a step's evidence budget, for passages that share no word with the step
MIN_PASSAGE = 12  # tokens: a budget with less room left takes no more passages
READING_AT_ONCE = 2  # ranking and tracing activities at work at once per worker
# Their threads, not behind the crawls' page conversions in the default pool.
READING = ThreadPoolExecutor(max_workers=READING_AT_ONCE, thread_name_prefix="evidence")
LOCAL_TITLE = "Local documents"
FICTION_JUDGED = 2  # statements of a step's findings judged before they can be told fiction (one may be knowledge)


@dataclass(frozen=True)
class Chunk:
    page: int  # index into the pages
    at: int  # position in its page
    text: str


@dataclass(frozen=True)
class Source:
    title: str
    url: str
    text: str


def render(source: Source, text: str) -> str:
    """One passage as one paragraph, after a link to its page: the header
    ``[Title](URL): `` (``[Title]: `` without a URL), which nothing a page
    holds can forge (``body``, ``header_url``)."""
    title = " ".join(source.title.replace("[", "(").replace("]", ")").split()) or source.url or LOCAL_TITLE
    return f"[{title}]({header_url(source.url)}): {body(text)}" if source.url else f"[{title}]: {body(text)}"


# A link followed by a colon, "[text](url):" or "[text]:", the shape of a
# passage's header. Linear: its text stops at the next bracket, its URL at
# the next parenthesis or space, so no two tries read the same characters twice.
_HEADER_LIKE = re.compile(r"\[[^\[\]\n]*\](?:[ \t]*\((?:[^()\s]|\([^()\s]*\))*\))?[ \t]*:")
_LINKABLE_URL = re.compile(r"(?:[^\s()\[\]]|\([^\s()\[\]]*\))+")  # the URLs a report's link may cite


def body(text: str) -> str:
    """A passage's text as shown after its header: one line, but for the
    rows of a table (lines starting with "|"), one line each; no blank line,
    so the passage stays one paragraph. No line of it starts with "[" (the
    first follows the header; the others are rows), and every link in it
    followed by a colon is escaped (``\\[``): a page cannot pass off its text
    as another page's passage, whatever its type (issue 36)."""
    lines: list[list[str]] = []
    for line in text.splitlines():  # (every line break: CR, U+2028, U+0085 too)
        words = line.split()
        if words and (not lines or words[0].startswith("|")):
            lines.append(words)
        elif words:
            lines[-1] += words
    return _HEADER_LIKE.sub(_escaped, "\n".join(" ".join(words) for words in lines))


def _escaped(match: re.Match[str]) -> str:
    """The match with its "[" escaped, unless a backslash already escapes it."""
    at, slashes = match.start(), 0
    while at - slashes > 0 and match.string[at - slashes - 1] == "\\":
        slashes += 1
    return match.group(0) if slashes % 2 else "\\" + match.group(0)


def header_url(url: str) -> str:
    """The URL as a header's link holds it: as it is when a report's link can
    cite it (no space or bracket, parentheses in pairs), else with those
    percent-encoded, so a crafted URL cannot end the link and write a header
    of its own ("http://x/a):%20[Official](https://…")."""
    if _LINKABLE_URL.fullmatch(url):
        return url
    return "".join(quote(c, safe="") if c in "()[]" or c.isspace() else c for c in url)


def chunks_of(sources: list[Source]) -> list[Chunk]:
    out: list[Chunk] = []
    for n, source in enumerate(sources):
        found = readable(reading.passages(source.text[:MAX_PAGE_CHARS], PASSAGE_TOKENS))
        out += [Chunk(n, i, c) for i, c in enumerate(found)]
    return out


def readable(passages: list[str]) -> list[str]:
    """Passages that read on their own: a heading (or another line too short
    to say anything) goes with the passage after it, and a table cut in
    passages keeps its header rows in each."""
    out: list[str] = []
    carried, header = "", ""
    for passage in passages:
        lines = passage.split("\n")
        if passage.startswith("|") and header and not _is_header(lines):
            passage = f"{header}\n{passage}"  # the rest of a table: its header again
        header = (
            "\n".join(lines[:2])
            if passage.startswith("|") and _is_header(lines)
            else (header if passage.startswith("|") else "")
        )
        if carried:  # a heading before a table stays a heading; before prose it leads the text
            title = carried.lstrip("#").strip()
            passage = f"{carried}\n{passage}" if passage.startswith("|") else f"{title} — {passage}"
            carried = ""
        short = len(passage) < 36 and tokens.count(passage) < 12  # (no character costs under a third of a token)
        if (passage.startswith("#") or short) and "\n" not in passage:
            carried = passage  # a heading, a dateline: said with what follows
            continue
        out.append(passage)
    return out + ([carried] if carried else [])


def _is_header(lines: list[str]) -> bool:
    """Whether a table's first two lines are its header and rule (``|---|``)."""
    return len(lines) >= 2 and lines[1].startswith("|") and set(lines[1]) <= set("|-: ")


def pick(
    sources: list[Source], chunks: list[Chunk], order: list[int], budget: int, unmatched: int | None = None
) -> list[int]:
    """Passages in ``order`` (best first) within ``budget`` tokens: first the
    best of each page, so every page read has its say, then the rest. With
    ``unmatched``, the passages of ``order`` from that position on (they
    share no word with the step) fill at most ``UNMATCHED_SHARE`` of the
    budget beyond each page's first."""
    first: list[int] = []
    seen: set[int] = set()
    for i in order:
        if chunks[i].page not in seen:
            seen.add(chunks[i].page)
            first.append(i)
    taken = set(first)
    filler = set(order[unmatched:]) if unmatched is not None else set()
    room = int(budget * UNMATCHED_SHARE)
    chosen, used, spare = [], 0, 0
    for i in first + [i for i in order if i not in taken]:
        if budget - used < MIN_PASSAGE:
            break  # (nothing more fits)
        if i in filler and i not in taken and spare >= room:
            continue
        cost = tokens.count(render(sources[chunks[i].page], chunks[i].text)) + 2
        if used + cost <= budget and (i not in filler or i in taken or spare + cost <= room):
            chosen.append(i)
            used += cost
            spare += cost if i in filler and i not in taken else 0
    return chosen


def arrange(sources: list[Source], chunks: list[Chunk], chosen: list[int], order: list[int]) -> str:
    """The chosen passages grouped by page (the page of the best passage
    first), in page order within a page."""
    rank_of = {i: r for r, i in enumerate(order)}
    best = {}
    for i in chosen:
        best[chunks[i].page] = min(best.get(chunks[i].page, len(order)), rank_of.get(i, len(order)))
    ordered = sorted(chosen, key=lambda i: (best[chunks[i].page], chunks[i].page, chunks[i].at))
    return "\n\n".join(render(sources[chunks[i].page], chunks[i].text) for i in ordered)


@dataclass(frozen=True)
class Ranked:
    text: str  # the evidence set: header and passages
    pages: list[Citation]  # the pages that gave passages
    passages: int
    lead: str = ""  # what the best passages point to (activities/leads.py)


def evidence_set(request: GatherRequest, sources: list[Source]) -> Ranked:
    """The step's evidence set, and its lead."""
    chunks = chunks_of(sources)
    if not chunks:
        return Ranked("", [], 0)
    order = [i for _, i in reading.Index([c.text for c in chunks]).scores(request.focus)]
    found, matched = "", None
    if not order:  # nothing matches the step's words: each page's start
        order = sorted(range(len(chunks)), key=lambda i: (chunks[i].at, chunks[i].page))
    else:
        matched = len(order)  # then the passages that match nothing, a little of them (pick)
        whole = "\n".join(s.text[:MAX_PAGE_CHARS] for s in sources)
        found = leads.lead(request.queries, request.focus, [chunks[i].text for i in order[: leads.BEST]], whole)
        ranked = set(order)
        order += sorted(
            (i for i in range(len(chunks)) if i not in ranked), key=lambda i: (chunks[i].at, chunks[i].page)
        )
    queries = "; ".join(f'"{q}"' for q in request.queries) or "the step"
    header = render_prompt("evidence", {"queries": queries, "pages": str(len([s for s in sources if s.url]))})
    chosen = pick(sources, chunks, order, request.budget - tokens.count(header), matched)
    pages = {chunks[i].page for i in chosen}
    cited = [Citation(title=s.title, url=s.url) for n, s in enumerate(sources) if n in pages and s.url]
    return Ranked(f"{header.strip()}\n\n{arrange(sources, chunks, chosen, order)}", cited, len(chosen), found)


# --- the findings and the passages they rest on -------------------------------------


def supported(findings: str, sources: list[Source], chunks: list[Chunk]) -> tuple[str, list[int]]:
    """The findings with each line that a read page holds followed by a link
    to that page (when it names none), and the passages found, in the order
    of the findings."""
    lines = findings.split("\n")
    index = reading.Index([c.text for c in chunks])
    found: list[int] = []
    for n, line in claim_lines(findings):
        pages: list[int] = []
        for sentence in re.split(r"(?<=[.!?;。！？])\s+", line):
            for _, i in index.scores(sentence)[:3]:
                if holds(sentence, chunks[i].text):
                    if i not in found:
                        found.append(i)
                    if chunks[i].page not in pages:
                        pages.append(chunks[i].page)
                    break
        links = [f"[source]({sources[p].url})" for p in pages[:2] if sources[p].url]
        if links:
            lines[n] = f"{lines[n].rstrip()} ({', '.join(links)})"
    return "\n".join(lines), found


def conversation_reads(history: str) -> tuple[list[tuple[str, str, str]], str, bool]:
    """From an agent's conversation (the JSON of its messages): the pages it
    read ((url, title, blob) of tool results with a page), what its local
    searches found, and whether a web search of its found anything."""
    try:
        messages = json.loads(history)
    except ValueError:
        return [], "", False
    names: dict[str, str] = {}
    pages: list[tuple[str, str, str]] = []
    local: list[str] = []
    searched = False
    for m in messages if isinstance(messages, list) else []:
        for call in m.get("tool_calls") or []:
            names[str(call.get("id"))] = str(call.get("name"))
        if m.get("role") != "tool":
            continue
        content = str(m.get("content") or "")
        name = names.get(str(m.get("tool_call_id")), "")
        if content.startswith("Error"):
            continue
        if m.get("blob") and str(m.get("source") or "").startswith(("http://", "https://")):
            title = content.split("\n", 1)[0].removeprefix("# ").strip()
            pages.append((str(m["source"]), title, str(m["blob"])))
        elif name == "local_search" and content.strip():
            local.append(content)
        elif name == "web_search" and "URL:" in content:
            searched = True
    return pages, "\n\n".join(local), searched


class EvidenceActivities:
    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs
        # The pages' texts, their passages and index, for a few steps at a time:
        # the work is Python under the GIL, so more at once would only hold more
        # of them in memory, not finish sooner.
        self.reading = asyncio.Semaphore(READING_AT_ONCE)

    async def _sources(self, pages: list[EvidencePage], local: str) -> list[Source]:
        unique = list({p.url: p for p in pages}.values())
        texts = await asyncio.gather(*(self.blobs.get(p.blob) for p in unique))
        sources = [Source(p.title or p.url, p.url, text) for p, text in zip(unique, texts) if text.strip()]
        return sources + ([Source(LOCAL_TITLE, "", local)] if local.strip() else [])

    @activity.defn(name="rank_evidence")
    async def rank_evidence(self, request: GatherRequest) -> EvidenceSet:
        async with heartbeating(), self.reading:  # (waiting its turn too)
            sources = await self._sources(request.pages, request.local)
            ranked = await in_pool(READING, evidence_set, request, sources)
            del sources
        if not ranked.passages:
            return EvidenceSet()
        return EvidenceSet(
            blob=await self.blobs.put(ranked.text),
            pages=ranked.pages,
            passages=ranked.passages,
            tokens=tokens.count(ranked.text),
            lead=ranked.lead,
        )

    @activity.defn(name="support_findings")
    async def support_findings(self, request: SupportRequest) -> Support:
        pages, local, searched = list(request.pages), request.local, False
        async with heartbeating(), self.reading:  # (waiting its turn too)
            if request.history:
                read, more, searched = conversation_reads(await self.blobs.get(request.history))
                pages += [EvidencePage(url=u, title=t, blob=b) for u, t, b in read[-MAX_AGENT_PAGES:]]
                local = "\n\n".join(x for x in (local, more) if x)
            sources = await self._sources(pages, local)
            traced = await in_pool(READING, traced_findings, request, sources)
            findings, text, count = await in_pool(READING, support_of, request, sources, fiction(traced))
            read = len(sources)
            del sources
        blob = await self.blobs.put(text) if count else None
        return Support(findings=findings, blob=blob, read=read, searched=searched, passages=count, statements=traced)

    @activity.defn(name="evidence_text")
    async def evidence_text(self, ref: str) -> str:
        """A set of passages as text (at most ``MAX_SHOWN`` characters), for a
        report the workflow writes itself (the reporter failed)."""
        async with heartbeating():
            return (await self.blobs.get(ref))[:MAX_SHOWN]

    @activity.defn(name="join_evidence")
    async def join_evidence(self, request: EvidenceJoin) -> str | None:
        """The steps' supporting passages as one set, a passage from each step
        in turn, within the budget; None when there are none."""
        async with heartbeating():
            texts = await asyncio.gather(*(self.blobs.get(s.support) for s in request.steps if s.support))
            text = await in_pool(READING, joined, texts, request.budget)
            return await self.blobs.put(text) if text else None


def support_of(request: SupportRequest, sources: list[Source], invented: bool = False) -> tuple[str, str, int]:
    """The findings with their pages named, the passages they rest on (then
    the step's best passages, to fill the budget) and how many. Findings
    that state nothing, or that are ``invented`` (``fiction``), are not
    passed on: the passages read for the step stand for them."""
    chunks = chunks_of(sources)
    if not chunks:
        return request.findings, "", 0
    findings, found = supported(request.findings, sources, chunks)
    taken = set(found)
    order = found + [i for _, i in reading.Index([c.text for c in chunks]).scores(request.focus) if i not in taken]
    chosen = pick(sources, chunks, order, request.budget) if order else []
    passages = arrange(sources, chunks, chosen, order)
    if chosen and (invented or not states_something(request.findings)):  # what it read stands for them
        short = arrange(sources, chunks, pick(sources, chunks, order, request.budget // 2), order)
        said = "" if invented else request.findings.strip()  # a note of the workflow's: why nothing was written
        head = NOT_FOUND if invented else NOTHING_WRITTEN
        findings = f"{said}\n\n{head}\n\n{short}" if said else f"{head}\n\n{short}"
    return findings, passages, len(chosen)


def fiction(counts: SupportCounts | None) -> bool:
    """Whether a step's findings are a weak model's fiction, not research:
    of their statements (two or more), more than half found in none of the
    pages the step read, and one at least carrying a figure or a name found
    nowhere in them (``mostly_invention``, a report's bar; SmolLM2's orrins-ford-population
    findings: one census figure stated, eight statements not, six of them
    invented: "Tesla Motors has invested $8 million"). A strong model's
    findings, stated by their pages, are never so; findings the pages hold
    mostly are kept (the reporter's check judges the report)."""
    return counts is not None and counts.judged >= FICTION_JUDGED and mostly_invention(counts)


def traced_findings(request: SupportRequest, sources: list[Source]) -> SupportCounts | None:
    """How the findings' statements are supported by every passage the step
    read (``activities/support.py``); None when they state nothing."""
    material = "\n\n".join(render(sources[c.page], c.text) for c in chunks_of(sources))
    return statement_support(request.findings, material, request.focus)[0]


def joined(texts: list[str], budget: int) -> str:
    queues = [[p for p in text.split("\n\n") if p.strip()] for text in texts]
    chosen: list[list[str]] = [[] for _ in queues]
    used, seen = 0, set()
    for depth in range(max((len(q) for q in queues), default=0)):
        for n, queue in enumerate(queues):
            if depth >= len(queue) or queue[depth] in seen:
                continue
            cost = tokens.count(queue[depth]) + 2
            if used + cost <= budget:
                seen.add(queue[depth])
                chosen[n].append(queue[depth])
                used += cost
    return "\n\n".join(p for group in chosen for p in group)
