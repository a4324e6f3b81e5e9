"""Text that any JSON encoder can write.

Models, pages and clients can send lone UTF-16 surrogates (``"\\ud83d"`` in
JSON), NUL and other control characters. Python strings hold them happily,
but serialising them for Temporal fails — inside workflow code that would
fail the workflow task over and over — a C1 control (U+009B is a terminal's
CSI) reaches the terminal raw, and U+FFFE / U+FFFF break a slide deck (no
XML document may hold them). Every data model of the project cleans
its strings on the way in (``workflows.models.Model``).
"""

from __future__ import annotations

import re
from typing import Any

SURROGATE = re.compile(r"[\ud800-\udfff]")
# C0 and C1 control characters but tab and newlines (U+009B is a terminal's
# CSI as ESC [ is, U+0085 a line break), and U+FFFE / U+FFFF, which no XML
# document (a slide deck) may hold.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")


def clean_text(value: object) -> str:
    """Text that any JSON encoder, XML document and terminal can take: lone
    surrogates become U+FFFD, NEL (U+0085) a newline, NUL and other C0 and
    C1 control characters (but tab and newlines) and U+FFFE / U+FFFF are
    dropped."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    if SURROGATE.search(text):
        text = SURROGATE.sub("\ufffd", text)
    if _CONTROL.search(text):
        text = _CONTROL.sub("", text.replace("\x85", "\n"))
    return text


_LINE_END = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """``text`` split into lines at CR, LF and CRLF only. ``str.splitlines``
    also ends a line at U+2028, U+2029, U+0085, form feed and others, which
    JSON Lines, markdown, Python source and event streams hold as ordinary
    characters (a JSON encoder may leave them unescaped inside a string)."""
    parts = _LINE_END.split(text)
    if parts[-1] == "":
        parts.pop()
    return parts


def clean_deep(value: Any) -> Any:
    """``clean_text`` applied to every string in nested lists and dicts."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_deep(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_deep(v) for k, v in value.items()}
    return value
