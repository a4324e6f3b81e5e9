"""What a text states, and whether a passage states it: pure functions on
text, shared by the tracing of findings to their passages
(``activities/evidence.py``) and the measure of what a report's material
holds (``activities/held.py``). Every pattern is linear."""

from __future__ import annotations

import re

from activities import reading

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def claim_terms(text: str) -> set[str]:
    return set(reading.terms(text))


def numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def _parts(claim: str) -> tuple[set[str], set[str]]:
    """A claim's words (no bare numbers) and its figures."""
    return {t for t in claim_terms(claim) if not t.isdigit()}, numbers(claim)


def judgeable(claim: str) -> bool:
    """Whether ``holds`` can tell anything of ``claim``: three words and
    figures in all, one of them a word."""
    wanted, figures = _parts(claim)
    return bool(wanted) and len(wanted) + len(figures) >= 3


def holds(claim: str, passage: str) -> bool:
    """Whether ``passage`` plausibly states ``claim``: every number of the
    claim, and most of its other words (half of them beside its numbers,
    three in five without); never for a claim too short to judge."""
    wanted, figures = _parts(claim)
    if not wanted or len(wanted) + len(figures) < 3:
        return False
    shared = len(wanted & claim_terms(passage)) / len(wanted)
    if figures:
        return figures <= numbers(passage) and shared >= 0.5
    return shared >= 0.6


def claim_lines(findings: str) -> list[tuple[int, str]]:
    """(line number, text) of the findings' lines that state something: not
    headings, rules, table rows, code, links-only or very short lines."""
    out, fenced = [], False
    for n, line in enumerate(findings.split("\n")):
        bare = line.strip()
        if bare.startswith("```"):
            fenced = not fenced
            continue
        note = bare.startswith("(") and bare.endswith(")")  # "(no findings)", a note of the workflow's
        if fenced or note or len(bare) < 20 or bare.startswith(("#", "|", "---", ">")) or "://" in bare:
            continue
        out.append((n, bare))
    return out


_LINKED = re.compile(r"\[([^\[\]\n]{0,300})\]\([^()\s]{0,2000}\)")


def states_something(findings: str) -> bool:
    """Whether the findings say anything: a line of twenty characters or more
    beside its links' addresses, not a heading, a rule or a note in
    parentheses ("(no findings)")."""
    for line in _LINKED.sub(r"\1", findings).split("\n"):
        bare = line.strip()
        if len(bare) >= 20 and not bare.startswith(("#", "---")) and not (bare[0] == "(" and bare[-1] == ")"):
            return True
    return False
