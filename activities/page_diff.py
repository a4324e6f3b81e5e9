"""What changed between two readings of a page: the passages (sentences, or
runs of them) that differ, each with its old and new text and the figures
that changed inside it ("4417" became "5120").

Pure and CPU-bound: the re-check activity runs it off the event loop with a
time limit (``activities/off_loop.py``). Every input is bounded (characters
compared, sentences, tokens per passage), and sentences are found by one
scan of the text, never by a regular expression.
"""

from __future__ import annotations

from difflib import SequenceMatcher

from workflows.recheck_models import (
    MAX_FIGURES,
    MAX_PASSAGE_CHARS,
    MAX_PASSAGES,
    FigureChange,
    PassageChange,
)

MAX_TEXT = 300_000  # characters of each reading compared
MAX_SENTENCES = 4_000  # sentences of each reading compared
MAX_SENTENCE = 800  # characters; a longer run without a full stop is cut in pieces (at a space)
MAX_TOKENS = 300  # words of a passage compared for changed figures
_STOPS = ".!?;"
_WIDE_STOPS = "。！？；"  # CJK full stops: a sentence ends there, no space needed
_TRIM = " \t\"'()[]{}*_,.;:!?“”‘’«»「」"


def sentences(text: str) -> list[str]:
    """The text's sentences, whitespace collapsed, in order; markdown lines
    (headings, list items, table rows) end a sentence too."""
    out: list[str] = []
    for line in text[:MAX_TEXT].splitlines():
        line = " ".join(line.split())
        start = 0
        for i, char in enumerate(line):
            ends = char in _WIDE_STOPS or (char in _STOPS and (i + 1 == len(line) or line[i + 1] == " "))
            long = i - start + 1 >= MAX_SENTENCE and (char == " " or i - start + 1 >= 2 * MAX_SENTENCE)
            if ends or long:
                _keep(out, line[start : i + 1])
                start = i + 1
        _keep(out, line[start:])
        if len(out) >= MAX_SENTENCES:
            return out[:MAX_SENTENCES]
    return out


def _keep(out: list[str], piece: str) -> None:
    piece = piece.strip()
    if piece.strip(_TRIM):
        out.append(piece)


def passages(old_text: str, new_text: str) -> tuple[list[PassageChange], int]:
    """The passages that differ (at most ``MAX_PASSAGES``) and how many more
    there are. Empty when the two readings say the same (whitespace aside)."""
    old, new = sentences(old_text), sentences(new_text)
    found: list[PassageChange] = []
    matcher = SequenceMatcher(None, old, new)  # autojunk: a sentence repeated all over cannot make it quadratic
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        found += [_change(a, b) for a, b in _pairs(old[i1:i2], new[j1:j2]) if a != b]
    return found[:MAX_PASSAGES], max(len(found) - MAX_PASSAGES, 0)


MAX_PAIRING = 400  # sentence comparisons to pair a replaced run; beyond, it is one passage
SIMILAR = 0.5  # share of words two sentences must have in common to be one changed sentence


def _pairs(old: list[str], new: list[str]) -> list[tuple[str, str]]:
    """A replaced run of sentences as changes: sentence for sentence when the
    counts agree; else each old sentence with its most similar new one (in
    order), the others added or removed on their own; a run too long to
    pair is one passage."""
    if not old or not new or len(old) == len(new):
        return list(zip(old, new)) if len(old) == len(new) else [(" ".join(old), " ".join(new))]
    if len(old) * len(new) > MAX_PAIRING:
        return [(" ".join(old), " ".join(new))]
    pairs: list[tuple[str, str]] = []
    j = 0
    for sentence in old:
        words = sentence.split()[:MAX_TOKENS]
        ratios = [(SequenceMatcher(None, words, new[k].split()[:MAX_TOKENS]).ratio(), k) for k in range(j, len(new))]
        best, k = max(ratios, default=(0.0, -1))
        if best < SIMILAR:
            pairs.append((sentence, ""))
            continue
        pairs += [("", added) for added in new[j:k]] + [(sentence, new[k])]
        j = k + 1
    return pairs + [("", added) for added in new[j:]]


def _change(old: str, new: str) -> PassageChange:
    start = _common_prefix(old, new)
    return PassageChange(old=_cut(old, start), new=_cut(new, start), figures=figures(old, new))


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _cut(text: str, around: int) -> str:
    """At most ``MAX_PASSAGE_CHARS`` of ``text``, around where it first
    differs from the other reading, cut at spaces and marked with "…"."""
    if len(text) <= MAX_PASSAGE_CHARS:
        return text
    start = max(0, min(around - MAX_PASSAGE_CHARS // 3, len(text) - MAX_PASSAGE_CHARS))
    if start:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + 40 else start
    end = start + MAX_PASSAGE_CHARS
    if end < len(text):
        space = text.rfind(" ", end - 40, end)
        end = space if space > start else end
    return ("…" if start else "") + text[start:end].strip() + ("…" if end < len(text) else "")


def figures(old: str, new: str) -> list[FigureChange]:
    """The words with digits that differ between two versions of a passage:
    "4417" → "5120", "$3.2 million" → "$4.1 million"."""
    if not old or not new:
        return []
    a, b = old.split()[:MAX_TOKENS], new.split()[:MAX_TOKENS]
    found: list[FigureChange] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        was, now = " ".join(a[i1:i2]).strip(_TRIM), " ".join(b[j1:j2]).strip(_TRIM)
        if was and now and was != now and any(c.isdigit() for c in was + now):
            found.append(FigureChange(old=was[:80], new=now[:80]))
        if len(found) >= MAX_FIGURES:
            break
    return found
