"""Whether a report uses the research it was written from: pure functions.

A weak reporter can write a fluent report that uses nothing it was given
("The report highlights the significant impact of a new product…"). Such a
report is as failed as one that repeats its instructions. What the findings
state is told by its figures and names (numbers, capitalised words inside a
sentence), those the question itself does not give; a report that holds
none of them, when the findings hold several, did not use the findings.

Every pattern here is linear; texts are bounded before they are read.
"""

from __future__ import annotations

import html
import re

MAX_TEXT = 200_000  # characters of a report or of findings looked at
MIN_ITEMS = 4  # findings with fewer figures and names than this are not judged
_LINK = re.compile(r"\[([^\[\]\n]{0,300})\]\([^()\s]{1,2000}\)")
_URL = re.compile(r"(?:https?|file)://[^\s)\]>]+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")


def items(text: str, references: bool = True) -> set[str]:
    """The figures (two digits or more) and names of ``text``: numbers without
    their separators, and capitalised words that do not start a sentence or
    a line, lower-cased; links' addresses left out, their words kept;
    character references read as the characters they stand for (unless
    ``references`` is False: runs recorded before read them as written)."""
    text = text[:MAX_TEXT]
    text = _URL.sub(" ", _LINK.sub(r"\1", html.unescape(text) if references else text))  # "&#39;" is no figure 39
    found = {n.replace(",", "") for n in _NUMBER.findall(text) if len(n.replace(",", "").replace(".", "")) >= 2}
    for match in _WORD.finditer(text):
        word = match.group()
        if word[0].isupper() and len(word) >= 3 and not _starts_sentence(text, match.start()):
            found.add(word.lower())
    return found


def _starts_sentence(text: str, at: int) -> bool:
    """Whether the word at ``at`` starts the text, a line (after a list,
    quote, table or heading mark) or a sentence."""
    before = text[max(0, at - 12) : at].rstrip(" \t")
    if before.endswith((".", "!", "?", ":", ";", "\n")):
        return True
    marks = before.rstrip("-*+>#|) \t0123456789")
    return marks.endswith("\n") or (not marks and at <= 12)


def findings_items(findings: list[str], question: str, references: bool = True) -> set[str]:
    """The figures and names the findings state that the question does not give."""
    if not findings:
        return set()
    return set().union(*(items(text, references) for text in findings)) - items(question, references)


def grounded(report: str, findings: list[str], question: str, references: bool = True) -> bool:
    """False when the findings state at least ``MIN_ITEMS`` figures and names
    the question does not give, and the report holds none of them."""
    stated = findings_items(findings, question, references)
    if len(stated) < MIN_ITEMS:
        return True  # too little to judge by
    return bool(stated & items(report, references))
