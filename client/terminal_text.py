"""What the CLI writes reaches the terminal without hostile control characters.

Text from runs is cleaned on its way in (``workflows.clean.clean_text``), but
a terminal also shows what never passed through a data model: run ids,
failure messages, memo text and search attributes of other runs. Out of
everything the CLI writes to stdout and stderr:

- U+0080–U+009F (U+009B is a terminal's CSI, as ESC [ is) are taken out;
  U+0085 (NEL) becomes a newline;
- C0 controls but tab, newline and carriage return are taken out;
- an ESC stays only where it starts a CSI sequence (Rich's colours and its
  live panel's cursor moves) or an OSC 8 hyperlink (Rich's links); any other
  (OSC 52 writing the clipboard, OSC 0/2 setting the window title, DCS, ...)
  is taken out, so what followed it shows as plain text.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

C1 = {code: None for code in range(0x80, 0xA0)} | {0x85: "\n"}
C0 = {code: None for code in range(0x20) if code not in (0x09, 0x0A, 0x0D, 0x1B)} | {0x7F: None}
CONTROLS = C1 | C0
# Linear: a CSI's parameter, intermediate and final bytes are disjoint classes; a link is bounded.
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\]8;[^\x07\x1b]{0,4096}(?:\x1b\\|\x07))?")


def _kept(found: re.Match) -> str:
    return found.group(0) if len(found.group(0)) > 1 else ""


def terminal_safe(text: str) -> str:
    """``text`` without the controls above."""
    text = text.translate(CONTROLS)
    return _ESCAPE.sub(_kept, text) if "\x1b" in text else text


def visible(text: str) -> str:
    """``text`` with every control character but tab and newline shown as a
    symbol (ESC as ␛), for what other runs put in a table row: an id, a title,
    a memo. Even a CSI sequence in it (a cursor move, a screen clear) is then
    shown, not obeyed."""
    return text.translate(_PICTURES)


_PICTURES = (
    {code: 0x2400 + code for code in range(0x20) if code not in (0x09, 0x0A)}
    | {0x7F: 0x2421}
    | dict.fromkeys(range(0x80, 0xA0), 0xFFFD)
)


def one_line(text: str) -> str:
    """``text`` as ``visible`` shows it, and on one line whatever it holds:
    a newline, tab or line separator shown as a symbol (␊, ␉, ␤), a
    bidirectional override as �. For a run id: one from another client may
    hold a newline, and printed raw it made two rows of `list`, so a crafted
    id could fake a row."""
    return text.translate(_ONE_LINE)


_ONE_LINE = (
    _PICTURES
    | {0x09: 0x2409, 0x0A: 0x240A, 0x2028: 0x2424, 0x2029: 0x2424}
    | dict.fromkeys((*range(0x202A, 0x202F), *range(0x2066, 0x206A)), 0xFFFD)
)


class C1Free:
    """A text stream that writes through to ``stream`` without hostile controls."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(terminal_safe(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def guard_terminal() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, C1Free):
            setattr(sys, name, C1Free(stream))
