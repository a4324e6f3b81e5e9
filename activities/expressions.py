"""The arithmetic a statement shows, checked: "£486.3m ÷ 211,840 =
£2,295.60", "(22,340 / 18,420)^(1/5) − 1 ≈ 0.0393", "(88.9 × 55.9 + 90.6 ×
57.8) ÷ 113.7 ≈ 89.8 %", "18 420 × 1,0393⁵ ≈ 22 335". A strong model shows
its working; when every relation it writes holds (within the rounding of
the figure it gives) and every figure it starts from is known (the
material's, the report's own supported figures, a count), the statement is
derived by that arithmetic (``activities/support.py``).

An expression is a run of figures joined by operators (+ − × ÷ / ^,
parentheses), units and currency signs between them; a relation is "=",
"≈" or "~" between two sides. Bounded: a statement's text is cut, an
expression has at most ``MAX_TOKENS`` tokens; one left-to-right pass and a
recursive descent of its tokens: linear.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from activities.figures import Figure, joined_thousands, placed_figures, plain

MAX_TOKENS = 80
MAX_STEP_FIGURES = 24  # of an expression's figures, those a written-out step may combine
MAX_TEXT = 2_000
_SUPER = re.compile(r"(?<=[\d)])([⁰¹²³⁴⁵⁶⁷⁸⁹]{1,2})")  # an exponent as superscript: 1.0393⁵
_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")
_OPERATORS = {"+": "+", "-": "-", "−": "-", "–": "-", "×": "*", "*": "*", "·": "*", "÷": "/", "/": "/", "^": "^"}
_RELATIONS = {"=": "=", "≈": "~", "≃": "~", "~": "~", "≅": "~"}
_GAP = re.compile(r"\s+|[£€$¥%]|[()]|[^\W\d_]{1,4}\.?|.", re.UNICODE)  # a gap's pieces, one at a time


@dataclass
class Shown:
    """The arithmetic a statement shows: each relation as written, and the
    values it computes."""

    how: list[str]
    values: list[float]
    constants: list[float] = field(default_factory=list)  # the counts it computes with unstated ("× 100")


def _prepared(text: str) -> str:
    """``text`` as its figures are read (``plain``, thousands grouped by
    spaces joined), an exponent written as superscript as "^5", without
    markdown emphasis ("≈ **89.68 %**": no product)."""
    text = _SUPER.sub(lambda m: "^" + m.group(1).translate(_DIGITS), text[:MAX_TEXT])
    return joined_thousands(plain(text.replace("**", " ").replace("__", " ")))


def _gap_tokens(gap: str) -> list[str] | None:
    """The operators, relations and parentheses of the text between two
    figures; None when it holds anything else (a word, a comma: the
    expression ends there). Units, currency signs and blanks are skipped;
    "x" between blanks is a product."""
    out: list[str] = []
    for piece in _GAP.findall(gap):
        if piece.isspace() or piece in "£€$¥%|":
            continue  # blanks, currency, a table's cell wall ("| 21.3 % ÷ 5 | ≈ 4.26 % |")
        if piece in _OPERATORS:
            out.append(_OPERATORS[piece])
        elif piece in _RELATIONS:
            out.append(_RELATIONS[piece])
        elif piece in "()":
            out.append(piece)
        elif piece.lower() == "x":
            out.append("*")
        elif piece[0].isalpha() and not out:
            continue  # a unit after the figure: "1,284,600 t − …"
        elif piece[0].isalpha() and out and out[-1] not in "()" and len(piece) <= 4:
            continue  # a unit before the next figure's operator: "… + 3 t"
        else:
            return None
    return out


def segments(text: str, writing: str | None) -> list[list[object]]:
    """The runs of figures and operators of ``text``: lists of Figure and
    operator strings ("+", "-", "*", "/", "^", "(", ")", "=", "~")."""
    prepared = _prepared(text)
    placed = placed_figures(prepared, writing)
    out: list[list[object]] = []
    current: list[object] = []
    for n, (start, _, figure) in enumerate(placed):
        before = prepared[placed[n - 1][1] : start] if n else ""
        joined = _gap_tokens(before) if n else None
        if joined is None or not joined:
            if len(current) > 2:
                out.append(current)
            lead = prepared[max(0, start - 3) : start]
            current = ["("] * lead.count("(") + ["-"] * lead.rstrip().endswith(("−", "-"))
        else:
            current += joined
        current.append(figure)
        if len(current) > MAX_TOKENS:
            current = []
    tail = prepared[placed[-1][1] : placed[-1][1] + 6] if placed else ""
    current += [")"] * (tail.split(" ")[0].count(")") if current else 0)
    if len(current) > 2:
        out.append(current)
    return out


class _Parser:
    """A recursive descent over one side's tokens: sums of products of
    powers of (signed) atoms."""

    def __init__(self, tokens: list[object]) -> None:
        self.tokens, self.at, self.used = tokens, 0, []

    def peek(self) -> object:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> object:
        self.at += 1
        return self.tokens[self.at - 1]

    def sum(self) -> float:
        value = self.product()
        while self.peek() in ("+", "-"):
            value = value + self.product() if self.take() == "+" else value - self.product()
        return value

    def product(self) -> float:
        value = self.power()
        while self.peek() in ("*", "/"):
            op, right = self.take(), self.power()
            value = value * right if op == "*" else value / right
        return value

    def power(self) -> float:
        base = self.atom()
        if self.peek() == "^":
            self.take()
            exponent = self.power()
            if abs(exponent) > 50 or (base < 0 and not float(exponent).is_integer()):
                raise ValueError("exponent")
            return math.pow(base, exponent)
        return base

    def atom(self) -> float:
        token = self.take() if self.peek() is not None else None
        if token == "-":
            return -self.atom()
        if token == "(":
            value = self.sum()
            if self.peek() == ")":
                self.take()
            return value
        if isinstance(token, Figure):
            self.used.append(token)
            return token.values[0]
        raise ValueError("not an expression")


def _side(tokens: list[object]) -> tuple[float, list[Figure]] | None:
    """The value of one side and the figures it uses; None when it is no
    expression (or does not compute)."""
    parser = _Parser([t for t in tokens if t != ")"] if tokens.count(")") > tokens.count("(") else tokens)
    try:
        value = parser.sum()
    except (ValueError, ZeroDivisionError, OverflowError, IndexError):
        return None
    if parser.at < len(parser.tokens) or not math.isfinite(value):
        return None
    return value, parser.used


def _equal(value: float, figure: Figure, approx: bool) -> bool:
    """Whether ``figure`` gives ``value`` within its rounding (a
    percentage of a fraction, "0.1419 = 14.19 %", too)."""
    values = [value] + ([value * 100, value / 100] if figure.percent else [])
    return any(figure.matches(v, approx) or _close(v, figure) for v in values)


def _close(value: float, figure: Figure) -> bool:
    r = figure.readings[0]
    return abs(r.value - value) <= r.derived_tolerance(False)


def shown_arithmetic(text: str, writing: str | None, known: Callable[[Figure], bool]) -> Shown | None:
    """The arithmetic ``text`` shows when it has at least one relation and
    every one holds, each compound side from figures ``known`` holds (or
    computed on its left); else None."""
    how: list[str] = []
    values: list[float] = []
    constants: list[float] = []
    for tokens in segments(text, writing):
        sides: list[list[object]] = [[]]
        relations: list[str] = []
        for token in tokens:
            if token in ("=", "~"):
                relations.append(str(token))
                sides.append([])
            else:
                sides[-1].append(token)
        if not relations:
            continue
        computed = [_side(side) for side in sides]
        if any(c is None for c in computed):
            return None
        for left, right, relation in zip(computed, computed[1:], relations, strict=False):
            (lv, lused), (rv, rused) = left, right  # type: ignore[misc]
            compound_left, compound_right = len(lused) > 1, len(rused) > 1
            if not (compound_left or compound_right):
                continue  # "= 89.7 %" after "≈ 89.68 %": a rounding, checked below
            if any(len(used) == 1 and used[0].year for used in (lused, rused)):
                continue  # "2022 ≈ 1,300,000 ÷ 1.05": a year labels what follows
            if compound_left and len(rused) == 1 and not _equal(lv, rused[0], relation == "~"):
                return None
            if compound_right and len(lused) == 1 and not _equal(rv, lused[0], relation == "~"):
                return None
            if compound_left and compound_right and not math.isclose(lv, rv, rel_tol=0.005):
                return None
            starts = lused if compound_left else rused
            steps = _one_step([f.values[0] for f in starts])
            if not all(known(f) or _count(f) or _written_out(f, starts, values) for f in starts):
                return None
            values += [lv, rv] + [v for v in steps if any(_close(v, f) for f in starts)]  # and its written-out steps
            constants += [f.values[0] for f in starts if _count(f)]
        how.append(_written(tokens))
    return Shown(how, values, constants) if how else None


def _written_out(figure: Figure, starts: list[Figure], values: list[float]) -> bool:
    """Whether ``figure`` is one computed before it (``values``) or written
    out by one step from the expression's other figures: never from itself
    ("24,340 × 1" is no step that gives 24,340)."""
    others = [f.values[0] for f in starts if f is not figure]
    return any(_close(v, figure) for v in values + _one_step(others))


def _one_step(values: list[float]) -> list[float]:
    """What two of an expression's figures give by one operation: a figure
    it writes out from them ("(22,340 / 18,420)^(1/5) = 1.21281^(0.2)")."""
    values = values[:MAX_STEP_FIGURES]
    out: list[float] = []
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            out += [a + b, abs(a - b), a * b] + ([a / b] if b else []) + ([b / a] if a else [])
    return out


def _count(figure: Figure) -> bool:
    """A count or a constant a computation may use unstated: 1 to 12, 100, 1,000."""
    v = figure.values[0]
    return (v.is_integer() and 0 < v <= 12) or v in (100.0, 1000.0)


def _written(tokens: list[object]) -> str:
    symbols = {"*": "×", "/": "÷", "-": "−", "~": "≈"}
    return " ".join(t.text if isinstance(t, Figure) else symbols.get(str(t), str(t)) for t in tokens)
