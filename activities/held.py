"""How much of a report what its writer was shown holds (``ModelReply.held``).

A small model can write a fluent report that states things nothing it was
given says ("The Harrowgate Ferry, the only vessel that travels from
Brackwater to Saltcombe…"): the names are the research's, the statements are
invented. What a report states is its sentences that carry a figure or a
name beyond the question's own; each is held when a paragraph of the
request as sent (the findings, the evidence passages, the sources)
plausibly states it (``claims.holds``: its numbers, and half of its other
words). The model activity measures this for
every request it keeps (the reporter's); the workflow decides what a low
share means (``workflows/reply_checks.py``).

No judgement (None) when a report states too little to tell, or when few of
its words are among the commonest words of what it was shown (the function
words of its language: "the", "of", "und", "的"): written in another
language than its material, its sentences cannot be matched word for word.

Linear in the texts, which are bounded first; the model activity runs it off
the event loop.
"""

from __future__ import annotations

import re
from collections import Counter

from activities import reading
from activities.claims import claim_lines, holds, judgeable
from workflows.grounding import items

MAX_REPORT = 60_000  # characters of a report looked at
MAX_SHOWN = 600_000  # characters of what it was shown looked at
MAX_PARAGRAPH = 2_000  # characters: a longer paragraph of what it was shown is looked at in pieces
MAX_STATEMENTS = 60  # distinct statements judged, the first ones
MIN_STATEMENTS = 2  # a report stating fewer is not judged
COMMON_WORDS = 50  # the commonest words of what a report was shown: its language's function words
MIN_COMMON_SHARE = 0.2  # a report with fewer of its words among them is in another language
_SENTENCE = re.compile(r"(?<=[.!?;。！？])\s+")
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_WORD = re.compile(r"[^\W\d_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def statements(report: str, question: str = "") -> list[str]:
    """The report's distinct sentences that carry a figure or a name the
    question does not give, and enough words to be matched (a reply looping
    on one sentence states it once; one that restates the question states
    nothing found)."""
    given = items(question[:MAX_REPORT])
    found: dict[str, None] = {}
    for _, line in claim_lines(report[:MAX_REPORT]):
        for sentence in _SENTENCE.split(line):
            if len(found) >= MAX_STATEMENTS:
                return list(found)
            if items(sentence) - given and judgeable(sentence):
                found.setdefault(" ".join(sentence.split()), None)
    return list(found)


def _words(text: str) -> list[str]:
    """Lower-cased words, stop words kept; CJK text character by character."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        out += _CJK.findall(word) if _CJK.search(word) else [word]
    return out


def same_language(report: str, shown: str) -> bool:
    """Whether the report is in the language of ``shown``: enough of its
    words are among the commonest words of ``shown`` (its function words,
    whatever its language)."""
    said = _words(report)
    if not said:
        return False
    common = {w for w, _ in Counter(_words(shown)).most_common(COMMON_WORDS)}
    return sum(1 for w in said if w in common) / len(said) >= MIN_COMMON_SHARE


def held_share(report: str, shown: str, question: str = "") -> float | None:
    """The share of the report's statements that a paragraph of ``shown``
    holds; None when it states fewer than ``MIN_STATEMENTS``, or is not in
    the language of ``shown`` (``same_language``)."""
    said = statements(report, question)
    if len(said) < MIN_STATEMENTS:
        return None
    shown = shown[:MAX_SHOWN]
    if not same_language(" ".join(said), shown):
        return None
    paragraphs = [
        p[i : i + MAX_PARAGRAPH] for p in _PARAGRAPH.split(shown) if p.strip() for i in range(0, len(p), MAX_PARAGRAPH)
    ]
    if not paragraphs:
        return 0.0
    index = reading.Index(paragraphs)
    held = sum(1 for s in said if any(holds(s, paragraphs[i]) for _, i in index.scores(s)[:3]))
    return held / len(said)
