"""Reading long tool outputs through a small context window without losing
anything.

A page (or a long MCP result or code output) that does not fit its share of
the request is shown as its start plus the passages most relevant to the
step and the model's queries (BM25 over the page's passages), with where it
is ("12 parts") and how to read on: ``read_page`` for a part,
``find_in_page`` for the passages on a query. The whole text stays in the
blob store; what is shown is decided here, when the model activity builds the
request, for the window of the model that reads it.

Pure functions; token counts from ``activities.tokens``.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from functools import lru_cache

from activities import tokens
from activities.seen import Seen

PASSAGE_TOKENS = 250  # a passage: about a paragraph
_GAP = "\n\n…\n\n"  # between passages that are not next to each other
_WORD = re.compile(r"[^\W_]+")
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK = re.compile(f"[{_CJK_CHARS}]")
_SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？]|\n")
_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+|[^{_CJK_CHARS}]+")  # a word's CJK runs and the runs between
_STOP = frozenset(
    "a an and are as at be by can do does for from how in is it its of on or that the their there these this to "
    "was were what when where which who why will with about into than then your step research question findings "
    "earlier steps".split()
)


def terms(text: str) -> list[str]:
    """Search terms: lower-cased words without stop words; CJK text as
    character bigrams (no spaces between its words)."""
    found: list[str] = []
    for word in _WORD.findall(text.lower()):
        if _CJK.search(word):
            for run in _CJK_RUN.findall(word):  # "tern-4潮位计": "tern", "4" and the bigrams of 潮位计
                chars = _CJK.findall(run)
                if chars:
                    found += [a + b for a, b in zip(chars, chars[1:])] or chars
                elif run not in _STOP and len(run) > 1:
                    found.append(run)
        elif word not in _STOP and len(word) > 1:
            found.append(word)
    return found


def passages(text: str, max_tokens: int = PASSAGE_TOKENS) -> list[str]:
    """The text in passages of at most ``max_tokens`` tokens: its paragraphs,
    long ones cut at sentence or line ends where possible."""
    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph, start = paragraph.strip(), 0
        while start < len(paragraph):
            # (no character costs under a third of a token: what fits lies in the next 3 * max_tokens)
            head = tokens.clip(paragraph[start : start + 3 * max_tokens + 3], max_tokens)
            if start + len(head) < len(paragraph):
                ends = [m.end() for m in _SENTENCE_END.finditer(head)]
                cut = ends[-1] if ends and ends[-1] > len(head) // 3 else max(len(head), 1)
                head = head[:cut]
            if head.strip():
                out.append(head.strip())
            start += len(head)
    return out


class Index:
    """BM25 over a fixed list of passages, built once and asked many
    queries (``rank`` asks one)."""

    def __init__(self, chunks: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(terms(chunk)) for chunk in chunks]
        self.lengths = [sum(d.values()) or 1 for d in self.docs]
        self.average = sum(self.lengths) / len(self.docs) if self.docs else 1.0
        postings: defaultdict[str, list[int]] = defaultdict(list)  # term -> the passages holding it
        for i, doc in enumerate(self.docs):
            for term in doc:
                postings[term].append(i)
        self.postings = dict(postings)
        self.frequency: Counter[str] = Counter({term: len(held) for term, held in self.postings.items()})
        self.k1, self.b = k1, b

    def scores(self, query: str, max_terms: int | None = None) -> list[tuple[float, int]]:
        """(score, index) of the passages that match ``query`` at all, best
        first; with ``max_terms``, by the query's rarest terms only."""
        wanted = set(terms(query))
        if max_terms is not None and len(wanted) > max_terms:
            wanted = set(sorted(wanted, key=lambda t: (self.frequency[t] or len(self.docs) + 1, t))[:max_terms])
        if not wanted or not self.docs:
            return []
        count, k1, b = len(self.docs), self.k1, self.b
        idf = {
            t: math.log(1 + (count - self.frequency[t] + 0.5) / (self.frequency[t] + 0.5))
            for t in wanted
            if self.frequency[t]
        }
        found: dict[int, float] = {}
        for term, weight in idf.items():  # only the passages holding a term of the query
            for i in self.postings[term]:
                tf = self.docs[i][term]
                found[i] = found.get(i, 0.0) + weight * tf * (k1 + 1) / (
                    tf + k1 * (1 - b + b * self.lengths[i] / self.average)
                )
        return sorted(((score, i) for i, score in found.items() if score > 0), key=lambda s: (-s[0], s[1]))


def rank(chunks: list[str], query: str, k1: float = 1.2, b: float = 0.75) -> list[int]:
    """Indexes of ``chunks`` by BM25 relevance to ``query``, best first (only
    those that match at all)."""
    if not chunks or not terms(query):
        return []
    return [i for _, i in Index(chunks, k1, b).scores(query)]


class Page:
    """A long text cut for a reader with ``share`` tokens: passages, and
    parts of consecutive passages (the same cut for the same share, so part
    numbers hold from one request to the next)."""

    def __init__(self, text: str, share: int) -> None:
        self.share = max(share, 200)
        self.chunks = passages(text, max(40, min(PASSAGE_TOKENS, self.share // 5)))
        self.cost = [tokens.count(chunk) + 2 for chunk in self.chunks]
        self.parts = self._group(int(self.share * 0.8))
        self._index: Index | None = None

    def rank(self, query: str) -> list[int]:
        """Indexes of the passages by BM25 relevance to ``query`` (the index
        built once per page)."""
        if not self.chunks or not terms(query):
            return []
        if self._index is None:
            self._index = Index(self.chunks)
        return [i for _, i in self._index.scores(query)]

    def _group(self, room: int) -> list[list[int]]:
        groups: list[list[int]] = [[]]
        size = 0
        for i, cost in enumerate(self.cost):
            if groups[-1] and size + cost > room:
                groups.append([])
                size = 0
            groups[-1].append(i)
            size += cost
        return groups

    def text(self, indexes: list[int], gap: str = "\n\n") -> str:
        return gap.join(self.chunks[i] for i in indexes)

    def best(self, ranked: list[int], room: int, skip: int = 0) -> list[int]:
        """The best-ranked passages (from ``skip`` on) that fit ``room`` tokens,
        in page order."""
        chosen, used = [], 0
        for i in ranked:
            if i >= skip and used + self.cost[i] <= room:
                chosen.append(i)
                used += self.cost[i]
        return sorted(chosen)


@lru_cache(maxsize=16)
def cut(text: str, share: int) -> Page:
    """``Page(text, share)``, kept for the next request: a conversation shows
    the same pages again every turn (at most 16 pages, a few MB)."""
    return Page(text, share)


def fits(text: str, share: int) -> bool:
    """Whether ``text`` is shown whole to a reader with ``share`` tokens."""
    return tokens.count(text) <= max(share, 200)


def view(
    text: str,
    share: int,
    *,
    source: str = "",
    part: int | None = None,
    query: str | None = None,
    hints: str = "",
    seen: Seen | None = None,
) -> str:
    """What of ``text`` to show in ``share`` tokens: all of it if it fits;
    else part ``part``; else the passages matching ``query``; else its start
    and the passages matching ``hints`` (the step and the queries). Passages
    ``seen`` holds (shown earlier in the conversation) are left out, saying
    so: a page already read for the step costs a note, not its passages again."""
    if part is None and query is None and fits(text, share):
        return text if not seen else _unseen_whole(text, share, source, seen)
    page = cut(text, share)
    shown = {i for i, chunk in enumerate(page.chunks) if seen and seen.holds(chunk)}
    count = len(page.parts)
    where = f" of {source}" if source else ""
    how = f'read_page(url="{source}", part=N)' if source else "read_page(url=…, part=N)"
    find = f'find_in_page(url="{source}", query="…")' if source else "find_in_page(url=…, query=…)"
    if part is not None:
        return _part(page, part, shown, where, how)
    if query is not None:
        ranked = page.rank(query)
        chosen = page.best([i for i in ranked if i not in shown], page.share - 60)
        if not chosen and not ranked:
            return f"[Nothing{where} matches {query!r}; its {count} parts can be read with {how}.]"
        if not chosen:
            return f"[The passages{where} matching {query!r} are already shown above; its {count} parts: {how}.]"
        left = " (those already shown above left out)" if shown & set(ranked) else ""
        header = f"[Passages{where} matching {query!r}{left}, in page order; {count} parts in all, read with {how}.]"
        return f"{header}\n\n{page.text(chosen, gap=_GAP)}"
    if shown:
        return _already_read(page, shown, hints, where, how, find)
    head, used = [], 0
    for i, cost in enumerate(page.cost):  # the start: up to 40% of the share
        if used + cost > page.share * 0.4 and head:
            break
        head.append(i)
        used += cost
    chosen = page.best(page.rank(hints), page.share - used - 80, skip=len(head))
    text = f"[This{where} is long: {count} parts. Shown: its start, then the passages most relevant to your step."
    text += f" Read more with {how}, or search it with {find}.]\n\n{page.text(head)}"
    if chosen:
        text += f"\n\n[… most relevant further passages, in page order …]\n\n{page.text(chosen, gap=_GAP)}"
    return text


def _unseen_whole(text: str, share: int, source: str, seen: Seen) -> str:
    """A text that fits, without the passages already shown."""
    chunks = cut(text, share).chunks
    new = [c for c in chunks if not seen.holds(c)]
    if len(new) == len(chunks):
        return text
    what = source or "this output"
    if not new:
        return f"[All of {what} is already shown above (your evidence or an earlier answer): nothing new in it.]"
    left = len(chunks) - len(new)
    return f"[{left} passage(s) of {what} already shown above are left out.]\n\n" + "\n\n".join(new)


def _part(page: Page, part: int, shown: set[int], where: str, how: str) -> str:
    count = len(page.parts)
    number = min(max(part, 1), count)
    more = f" Next: {how.replace('N', str(number + 1))}." if number < count else " This is the last part."
    indexes = page.parts[number - 1]
    new = [i for i in indexes if i not in shown]
    left = (
        f" {len(indexes) - len(new)} passage(s) of it already shown above are left out."
        if len(new) < len(indexes)
        else ""
    )
    body = page.text(new) if new else "(all of this part is already shown above)"
    return f"[Part {number} of {count}{where}.{more}{left}]\n\n{body}"


def _already_read(page: Page, shown: set[int], hints: str, where: str, how: str, find: str) -> str:
    """A long page some of whose passages were shown already (read for the
    step, or crawled before): a note on how to read on, and only its most
    relevant passages not shown yet, within a quarter of the share."""
    note = (
        f"[This page{where} was read already: {len(shown)} of its passages are shown above (your evidence or an "
        f"earlier answer). It is long: {len(page.parts)} parts. Read more with {how}, or search it with {find}.]"
    )
    chosen = page.best([i for i in page.rank(hints) if i not in shown], page.share // 4)
    if not chosen:
        return note
    return f"{note}\n\n[… its most relevant passages not shown yet, in page order …]\n\n{page.text(chosen, gap=_GAP)}"


def parts(text: str, share: int) -> list[str]:
    """The parts ``read_page`` gives of ``text`` for a reader with ``share`` tokens."""
    page = Page(text, share)
    return [page.text(group) for group in page.parts]


def excerpt(text: str, share: int, hints: str = "", seen: Seen | None = None) -> str:
    """``text`` (passages set apart by blank lines, e.g. an evidence set) in
    ``share`` tokens: all of it if it fits, else the passages most relevant
    to ``hints`` (the rest in their order when nothing matches), kept in
    their order, with a note saying how many were left out. For a reader
    that has no tools to read on with. Passages ``seen`` holds (shown
    earlier in the conversation) are left out, saying so."""
    repeated = 0
    if seen:
        chunks = [c.strip() for c in re.split(r"\n\s*\n", text) if c.strip()]
        new = [c for c in chunks if not seen.holds(c)]
        repeated = len(chunks) - len(new)
        text = "\n\n".join(new) if repeated else text
    said = f"\n\n[{repeated} passage(s) already shown above are left out.]" if repeated else ""
    if tokens.count(text) <= max(share, 100):
        return text + said
    chunks = [c.strip() for c in re.split(r"\n\s*\n", text) if c.strip()]
    cost = [tokens.count(c) + 2 for c in chunks]
    order = rank(chunks, hints)
    ranked = set(order)
    order += [i for i in range(len(chunks)) if i not in ranked]
    chosen, used, room = [], 0, max(share, 100) - 30
    for i in order:
        if used + cost[i] <= room:
            chosen.append(i)
            used += cost[i]
    left = len(chunks) - len(chosen)
    note = f"\n\n[{left} more passage(s) left out to fit the context window.]" if left else ""
    return "\n\n".join(chunks[i] for i in sorted(chosen)) + note + said
