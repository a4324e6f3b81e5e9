"""A step's lead: what its best passages point to that its own searches did
not ask about, as one more search (workflows/evidence.py follows it beside
the agent's loop).

A question of two hops ("which ferry serves the site of the largest seal
colony?") is answered by two pages: the first names the site ("Hallow
Point"), the second, found only by searching that name, the ferry. The lead
is the name the best passages introduce that the step does not mention, in
a sentence that shares the step's words (the relation the step asks about),
followed by the words of the step's queries the best passages do not hold
(what is still unanswered): "Hallow Point ferry serves crossing".

Names are runs of capitalised words (Latin, Greek and Cyrillic scripts);
a word the passages also write in lower case is no name ("The", "Built"). A step
whose best passages introduce no name has no lead. Pure functions, bounded
patterns; the caller runs them off the event loop.
"""

from __future__ import annotations

import re

from activities import reading

BEST = 3  # passages the lead is taken from: the step's best ones
MAX_LEAD_CHARS = 200
# A capitalised word, and up to four more (joined by a small word: "Isle of Man").
_CAPITAL = "A-ZÀ-ÖØ-ÞΑ-ΩА-ЯЁ"  # Latin (Latin-1 accents), Greek and Cyrillic capitals
_NAME = re.compile(
    rf"[{_CAPITAL}][\w'’-]{{0,40}}"
    rf"(?:[ \t]{{1,3}}(?:(?:of|the|de|del|la|le|van|von|and|&)[ \t]{{1,3}})?[{_CAPITAL}0-9][\w'’-]{{0,40}}){{0,4}}"
)
_SENTENCE_END = re.compile(r"[.!?。！？]\s|\n| — ")  # " — ": a heading before its text (activities/evidence.readable)
_LOWER = re.compile(r"(?<![\w'’-])[a-zß-öø-ÿα-ωа-яё][\w'’-]{0,40}")


def names_in(best: list[str], known: str, whole: str) -> list[str]:
    """Names in ``best`` (best passage first) that ``known`` does not hold,
    in a sentence that shares words with ``known``; most prominent first:
    each counts the words its sentence shares / (rank of its passage)."""
    known_terms = set(reading.terms(known))
    common = set(_LOWER.findall(whole))
    score: dict[str, float] = {}
    inside: set[str] = set()  # names seen inside a sentence, not only at its start
    for rank, passage in enumerate(best):
        for match in _NAME.finditer(passage):
            words = match.group(0).rstrip("'’-").split()
            first = _starts_sentence(passage, match.start())
            while words and (words[0].lower() in common or not reading.terms(words[0])):  # "The Selkie"
                words, first = words[1:], False
            name = " ".join(words)
            found = set(reading.terms(name))
            if not found or found <= known_terms or (len(words) == 1 and (len(name) < 3 or name.lower() in common)):
                continue
            shared = len(known_terms & set(reading.terms(_sentence(passage, match.start(), match.end()))))
            if not shared:  # said in no relation to the step ("By Jane Reporter, 3 March")
                continue
            score[name] = score.get(name, 0.0) + shared / (rank + 1)
            if not first or len(words) > 1:
                inside.add(name)
    return sorted((name for name in score if name in inside), key=lambda name: -score[name])


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` around ``start:end`` (at most 300 characters each side)."""
    before = _SENTENCE_END.split(text[max(0, start - 300) : start])[-1]
    after = _SENTENCE_END.split(text[end : end + 300])[0]
    return before + text[start:end] + after


def _starts_sentence(text: str, at: int) -> bool:
    """Whether position ``at`` of ``text`` begins a sentence, a line or a cell
    (where any word is capitalised)."""
    before = text[max(0, at - 3) : at].rstrip(" \t*_\"'(")
    return not before or before[-1] in ".!?:;\n|#>-—–•"


def unanswered(queries: list[str], best: list[str]) -> list[str]:
    """The words of the queries that none of ``best`` holds, in order, once."""
    held = {t for passage in best for t in reading.terms(passage)}
    out: list[str] = []
    for term in (t for q in queries for t in reading.terms(q)):
        if term not in held and term not in out:
            out.append(term)
    return out


def lead(queries: list[str], focus: str, best: list[str], whole: str) -> str:
    """The step's lead as a search query, or "" when its best passages name
    nothing new."""
    names = names_in(best[:BEST], focus, whole)
    if not names:
        return ""
    query = " ".join([names[0], *unanswered(queries, best[:BEST])])
    return query if len(query) <= MAX_LEAD_CHARS else query[:MAX_LEAD_CHARS].rsplit(" ", 1)[0]
