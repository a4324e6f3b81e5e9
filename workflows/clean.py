"""Text that any JSON encoder can write.

Models, pages and clients can send lone UTF-16 surrogates (``"\\ud83d"`` in
JSON), NUL and other control characters. Python strings hold them happily,
but serialising them for Temporal fails — inside workflow code that would
fail the workflow task over and over. Every data model of the project cleans
its strings on the way in (``workflows.models.Model``).
"""

from __future__ import annotations

import re
from typing import Any

SURROGATE = re.compile(r"[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_text(value: object) -> str:
    """Text that any JSON encoder can write: lone surrogates become U+FFFD,
    NUL and other control characters (but tab and newlines) are dropped."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    if SURROGATE.search(text):
        text = SURROGATE.sub("\ufffd", text)
    if _CONTROL.search(text):
        text = _CONTROL.sub("", text)
    return text


def clean_deep(value: Any) -> Any:
    """``clean_text`` applied to every string in nested lists and dicts."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_deep(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_deep(v) for k, v in value.items()}
    return value
