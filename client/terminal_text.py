"""What the CLI writes reaches the terminal without C1 control characters.

Text from runs is cleaned on its way in (``workflows.clean.clean_text``), but
a terminal also shows what never passed through a data model: run ids,
failure messages, memo text of other runs. U+0080–U+009F (U+009B is a
terminal's CSI, as ESC [ is) are taken out of everything the CLI writes to
stdout and stderr; U+0085 (NEL) becomes a newline. Rich's colours use 7-bit
ESC sequences and are untouched.
"""

from __future__ import annotations

import sys
from typing import TextIO

C1 = {code: None for code in range(0x80, 0xA0)} | {0x85: "\n"}


class C1Free:
    """A text stream that writes through to ``stream`` without C1 controls."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(text.translate(C1))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def guard_terminal() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, C1Free):
            setattr(sys, name, C1Free(stream))
