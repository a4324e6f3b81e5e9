"""The report's statements as the desk's page shows them (SPEC 3d): each with
the text to find it by in the rendered report, and what a reader checks it
by (the passage and its page, or the arithmetic)."""

from __future__ import annotations

import re

_LINKED = re.compile(r"\[([^\[\]\n]{0,400})\]\([^()\s]{0,2000}\)")
_MARKUP = re.compile(r"[*_`]+|\[\^?\d{1,3}\]|<[^<>\n]{0,200}>")


def traced(statements: list) -> list[dict]:
    """The report's statements as the page shows them: ``plain`` is the text
    as rendered (markdown marks, links' addresses and footnote markers out),
    to find it in the page; the rest is what a reader checks it by."""
    out = []
    for s in statements:
        text = s.text.strip().strip("|").replace("|", " ") if s.text.startswith("|") else s.text  # a row's cells
        plain = " ".join(_MARKUP.sub("", _LINKED.sub(r"\1", text)).split())
        out.append({"plain": plain, **s.model_dump(mode="json", by_alias=True, exclude={"invented"})})
    return out
