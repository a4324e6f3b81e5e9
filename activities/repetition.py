"""Spot a reply that has degenerated into repetition while it streams.

Small models caught in a loop write the same sentence (or token run) until
the output bound: thousands of tokens of nothing. ``LoopWatch`` is fed the
text as it arrives and says when the newest text is one unit repeated many
times over. Linear time: every ``CHECK_EVERY`` characters it runs the KMP
prefix function over the last ``WINDOW`` characters read backwards, which
gives, for every suffix of the text, its smallest period.
"""

from __future__ import annotations

WINDOW = 4_000  # characters looked at, from the end
CHECK_EVERY = 400  # characters between two looks (a look: about 2 ms)
# A loop: a run of at least MIN_RUN characters made of one unit repeated at
# least MIN_REPEATS times (or at least MANY_REPEATS times for a short unit,
# e.g. the same token again and again, over at least SHORT_RUN characters).
MIN_RUN, MIN_REPEATS = 1_500, 4
SHORT_RUN, MANY_REPEATS = 600, 40


def looping_suffix(text: str) -> tuple[int, int] | None:
    """(period, run length) of the longest suffix of ``text`` that is a unit
    repeated often enough to be a loop, or None. O(len(text))."""
    reverse = text[::-1]
    n = len(reverse)
    border = [0] * n  # KMP prefix function of the reversed text
    found = None
    k = 0
    for i in range(1, n):
        while k and reverse[i] != reverse[k]:
            k = border[k - 1]
        if reverse[i] == reverse[k]:
            k += 1
        border[i] = k
        length = i + 1
        period = length - k
        repeats = length / period
        if (length >= MIN_RUN and repeats >= MIN_REPEATS) or (length >= SHORT_RUN and repeats >= MANY_REPEATS):
            found = (period, length)
    return found


class LoopWatch:
    """Fed the reply as it streams; ``loop`` is set once it loops: (period,
    run length) of the repeated run at the end of the text seen so far."""

    def __init__(self) -> None:
        self.tail = ""
        self.unchecked = 0
        self.loop: tuple[int, int] | None = None

    def feed(self, piece: str) -> bool:
        """Whether the text, with ``piece`` added, now ends in a loop."""
        if not piece or self.loop:
            return bool(self.loop)
        self.tail = (self.tail + piece)[-WINDOW:]
        self.unchecked += len(piece)
        if self.unchecked >= CHECK_EVERY:
            self.unchecked = 0
            self.loop = looping_suffix(self.tail)
        return bool(self.loop)


def cut_loop(text: str, period: int, run: int) -> str:
    """``text`` with its looping run at the end reduced to one unit."""
    return text[: len(text) - run + period] if 0 < period <= run <= len(text) else text
