"""What a conversation has already shown its model, so that no passage is
sent twice in one research step.

A step's evidence (its first message, or a later one), a page it crawled
and the parts of pages it read all carry passages of the same pages, cut in
different places and rendered in different ways (an evidence passage starts
with a link to its page; a page's passage does not). So a passage is known
by its sentences: each sentence of at least ``KEY_CHARS`` characters by its
last ``KEY_CHARS`` characters, whitespace collapsed and lower-cased (a
table by its rows). A passage has been shown when every such sentence of it
has; a passage with none (only short lines) is never taken for shown.

The model activity keeps one ``Seen`` per request, message by message
(``activities/llm.py``); ``activities/reading.py`` leaves out what it holds.
Linear in the text: one split at sentence ends, set lookups.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

KEY_CHARS = 40  # a sentence shorter than this says too little to be known by
_SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？]")
_BLANK_LINE = re.compile(r"\n\s*\n")


def _sentences(paragraph: str) -> list[str]:
    if paragraph.lstrip().startswith("|") or "\n|" in paragraph:  # a table: by its rows
        return [line for line in paragraph.split("\n") if line.strip()]
    flat = " ".join(paragraph.split())
    out, start = [], 0
    for match in _SENTENCE_END.finditer(flat):
        out.append(flat[start : match.end()])
        start = match.end()
    out.append(flat[start:])
    return out


def keys(text: str) -> Iterator[str]:
    """The keys of ``text``'s sentences long enough to be known by."""
    for paragraph in _BLANK_LINE.split(text):
        for sentence in _sentences(paragraph):
            line = " ".join(sentence.lower().split()).rstrip(" .!?。！？|")
            if len(line) >= KEY_CHARS:
                yield line[-KEY_CHARS:]


class Seen:
    """The sentences shown so far in a conversation."""

    def __init__(self) -> None:
        self._keys: set[str] = set()

    def add(self, text: str) -> None:
        self._keys.update(keys(text))

    def holds(self, passage: str) -> bool:
        """Whether every sentence of ``passage`` that can be known has been
        shown (and it has at least one)."""
        known = False
        for key in keys(passage):  # (most passages: no further than their first sentence)
            if key not in self._keys:
                return False
            known = True
        return known

    def __bool__(self) -> bool:
        return bool(self._keys)
