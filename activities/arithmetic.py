"""Whether a figure follows by one step of arithmetic from others: what a
bounded pool of stated figures gives (difference, sum, product, ratio, share
and percentage change, compound annual rate, averages and sums of a run of
figures, common unit conversions) and ``Derivations.find``, a figure among
them within its rounding (``activities/figures.py`` reads the figures;
``activities/derivation.py`` builds the pool). Bounded: at most ``MAX_POOL``
figures and ``MAX_RUN`` in a run, so a statement costs a few thousand
operations whatever the texts.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import date

from activities.figures import Figure
from activities.units import CONVERSIONS, TEMPERATURES, named_conversions, per_scales

MAX_POOL = 30  # figures a statement's arithmetic may start from
MAX_RUN = 24  # figures of one passage or table column whose runs are summed and averaged
MAX_YEARS = 6  # spans of years between the pool's years tried as a compound rate's periods (else 2 to 5)


@dataclass(frozen=True)
class Derivation:
    value: float
    how: str  # e.g. "(2,675 − 1,960) / 1,960 = 36.48 %"
    uses: tuple[float, ...]  # the figures it starts from


# What a candidate is: (value, rank, op, operands); rank orders the simpler
# first, and a derivation from the statement's own figures before others.
_Candidate = tuple[float, int, str, tuple[float, ...]]
# The operations a statement's words name: a derivation of that kind is preferred.
NAMED_OPS = {
    "rate": ("cagr", "compound", "annual rate", "a year", "per year", "yearly", "annualised", "annualized"),
    "yearly": (" a year", " per year", " each year", " every year", "yearly", "annually", " per annum", " p.a."),
    "share": ("% of ", "per cent of ", "percent of ", " level"),
    "mean": ("average", "mean", "per month", "a month"),
    "total": ("total", "in all", "altogether", "combined"),
    "part": ("share of", "of all", "of the total", "took"),
    "change": (" increase", "decrease", " grew", " rose", " fell", "growth", "decline", " change", "higher", "lower"),
    "diff": (" more ", " fewer ", " less ", "difference", "margin", " by "),
}
RISING = (" grew", " grow", " rose", " rise", "increase", "growth", " up ", "higher", " gain")
FALLING = (" fell", " fall", "decline", "decrease", " down ", "lower", " drop", "reduc")
POINT_WORDS = (" pp", "point", "punkt", "punto", "ponto", "pt.", "pts")  # a difference of percentages, unsigned
INDEX_WORDS = ("index", "= 100", "=100", "índice", "indice", "indizes")
ROOT_WORDS = ("root", "factor", "wurzel", "racine", "raíz", "radice", "raiz")  # a growth factor named
_PERCENT_OPS = frozenset({"share", "change", "rate", "fraction", "part"})
DAY_OPS = frozenset({"days", "days-far"})  # days between two dates: one the statement's, or any two (3 digits)
_POINT_OPS = frozenset({"sum%", "diff%"})


def _unit(x: float) -> bool:
    """A count of two to ten: added to a figure or taken from it, it gives
    that figure nearly, by chance; it multiplies or divides ("5 mm / 2 mm",
    "420 / 4" for "a quarter")."""
    return x.is_integer() and 2 <= x <= 10


def _pairs(
    pool: list[tuple[float, bool]],
    periods: list[int],
    percent: bool,
    years: set[float] = frozenset(),
    roots: bool = False,
    strict: bool = False,
    yearly: bool = False,
) -> list[_Candidate]:
    """One step from two figures; shares, changes and rates only when a
    percentage is looked for. A year (one of ``years``) only ever meets
    another year, in a difference ("52 years newer"): 5,000 / 2023 is
    chance, not arithmetic. ``yearly``: the statement speaks of so much a
    year, so a difference over a span of the years (``periods``) is tried
    ("around 179 t a year": (2,675 − 1,960) / 4)."""
    out: list[_Candidate] = []
    for i, (a, pa) in enumerate(pool):
        for j, (b, pb) in enumerate(pool):
            if i == j:
                continue
            if a in years or b in years:
                if i < j and a in years and b in years:
                    out.append((abs(a - b), 1, "diff", (max(a, b), min(a, b))))
                continue
            mixed = 3 if pa != pb else 0  # a percentage and a count seldom make one figure
            if mixed and strict:
                continue  # and from a wide pool, never
            if a in (0.0, 1.0) or b in (0.0, 1.0):
                continue  # 11.7 / 1 is 11.7 as stated, not arithmetic
            counted = _unit(a) or _unit(b)  # a count of two to ten multiplies or divides ("5 / 2", "× 4")
            if i < j and not counted and not mixed:  # 83.9 % − 18 is no count of aircraft
                points = "%" if pa and pb else ""  # percentages added or set apart: points
                out += [
                    (a + b, 2, "sum" + points, (a, b)),
                    (abs(a - b), 1, "diff" + points, (max(a, b), min(a, b))),
                ]  # (4.4 + 4 beside "four times" is chance)
                if yearly:
                    out += [(abs(a - b) / n, 5, "yearly", (max(a, b), min(a, b), float(n))) for n in periods]
            if i < j:
                out.append((a * b, 4 + mixed, "product", (a, b)))
            if pa and not pb:  # so much per cent of a count: "83.9 % of 180 seats, about 151"
                out.append((a * b / 100, 3, "of", (a, b)))
            r = a / b
            out.append((r, 3, "ratio", (a, b)))
            if not percent or mixed:  # a share or change of a count against a percentage: chance (15 / 79.2 %)
                # the yearly growth factor its words name: "fifth root = 1.0393"
                if roots and not mixed and r > 0 and a != b:
                    out += [(r ** (1 / n), 6, "root", (a, b, float(n))) for n in periods]
                continue
            out += [(r * 100, 3, "share", (a, b)), (abs(r - 1) * 100, 3, "change", (a, b))]
            if a + b and not counted:
                out.append((a / (a + b) * 100, 4, "part", (a, b)))
            if r > 0 and a != b:
                out += [(abs(r ** (1 / n) - 1) * 100, 5, "rate", (a, b, float(n))) for n in periods]
    return out


def _conversions(pool: list[tuple[float, bool]], units: str) -> list[_Candidate]:
    """Unit conversions the statement's words name (``units``, lower-cased,
    spaced), and a fraction as a percentage."""
    named = named_conversions(units)
    degrees = any(w in units for w in TEMPERATURES)
    out: list[_Candidate] = []
    for a, _ in pool:
        out.append((a, 6, "same", (a,)))  # only with a scale: "2,675 t" as "2,675,000 kg"
        for n in named:
            k = CONVERSIONS[n][0]
            out += [(a * k, 2, f"times{n}", (a,)), (a / k, 2, f"per{n}", (a,))]
        if degrees:
            out += [(a * 1.8 + 32, 2, "fahrenheit", (a,)), ((a - 32) / 1.8, 2, "celsius", (a,))]
        if a < 10:
            out.append((a * 100, 2, "fraction", (a,)))
    return out


def run_candidates(runs: list[list[float]]) -> list[_Candidate]:
    """Sums and averages of each run of three or more consecutive figures of
    a sequence (a passage's figures in order, a table's column), sorted by
    value: computed once per passage."""
    out: list[_Candidate] = []
    for seq in runs:
        seq = seq[:MAX_RUN]
        for i in range(len(seq)):
            total = seq[i]
            for j in range(i + 1, len(seq)):
                total += seq[j]
                if j - i >= 2:
                    part = tuple(seq[i : j + 1])
                    out += [(total, 4, "total", part), (total / len(part), 4, "mean", part)]
    out.sort(key=lambda c: c[0])
    return out


def _n(x: float) -> str:
    """A figure of a derivation, as a reader writes it: 2,675, 18.4, 36.48."""
    if abs(x) >= 1e15 or (x and abs(x) < 1e-4):
        return f"{x:.4g}"
    if abs(x) >= 1000:
        return f"{x:,.0f}" if abs(x - round(x)) < 0.005 else f"{x:,.2f}"
    return f"{x:.4g}"


def explain(op: str, uses: tuple[float, ...], value: float) -> str:
    """The arithmetic of a derivation, as a reader checks it."""
    a = uses[0]
    b = uses[1] if len(uses) > 1 else 0.0
    pct = f"{_n(value)} %"
    if op.startswith("sum"):
        return f"{_n(a)} + {_n(b)} = {_n(value)}"
    if op.startswith("diff"):
        if is_year(a) and is_year(b):
            return f"{a:.0f} − {b:.0f} = {_n(value)}"  # years as written: 1923 − 1871
        return f"{_n(a)} − {_n(b)} = {_n(value)}"
    if op.startswith(("times", "per")):
        k, name, _ = CONVERSIONS[int(op.removeprefix("times").removeprefix("per"))]
        return f"{_n(a)} {'×' if op.startswith('times') else '/'} {_n(k)} ({name}) = {_n(value)}"
    simple = {
        "same": _n(value),
        "product": f"{_n(a)} × {_n(b)} = {_n(value)}",
        "ratio": f"{_n(a)} / {_n(b)} = {_n(value)}",
        "of": f"{_n(a)} % × {_n(b)} = {_n(value)}",
        "share": f"{_n(a)} / {_n(b)} = {pct}",
        "change": f"({_n(a)} − {_n(b)}) / {_n(b)} = {_n((a - b) / b * 100 if b else value)} %",
        "fraction": f"{_n(a)} × 100 = {pct}",
        "part": f"{_n(a)} / ({_n(a)} + {_n(b)}) = {pct}",
        "fahrenheit": f"{_n(a)} °C × 1.8 + 32 = {_n(value)} °F",
        "celsius": f"({_n(a)} °F − 32) / 1.8 = {_n(value)} °C",
        "total": f"{' + '.join(_n(x) for x in uses)} = {_n(value)}",
        "mean": f"({' + '.join(_n(x) for x in uses)}) / {len(uses)} = {_n(value)}",
    }
    if op in DAY_OPS:
        return f"{date.fromordinal(int(a))} − {date.fromordinal(int(b))} = {value:.0f} days"
    if op == "rate":
        n = int(uses[2])
        return f"({_n(a)} / {_n(b)})^(1/{n}) − 1 = {_n(((a / b) ** (1 / n) - 1) * 100)} %"
    if op == "yearly":
        return f"({_n(a)} − {_n(b)}) / {int(uses[2])} years = {_n(value)}"
    if op == "root":
        n = int(uses[2])
        return f"({_n(a)} / {_n(b)})^(1/{n}) = {_n(value)}"
    return simple[op]


class Derivations:
    """What a pool of stated figures gives by one step of arithmetic, sorted
    by value for ``find``."""

    def __init__(
        self,
        pool: list[tuple[float, bool]],
        runs: list[list[_Candidate]] = (),
        own: set[float] = (),
        percent: bool = True,
        units: str = "",
        years: set[float] = frozenset(),
        anchored: bool = False,
        strict: bool = False,
    ) -> None:
        """``pool``: (value, whether a percentage) of the stated figures, the
        most relevant first; ``runs``: ``run_candidates`` of the passages;
        ``own``: the figures the statement itself gives; ``percent``: whether
        percentages are looked for; ``units``: the statement's text, whose
        unit words allow their conversions; ``years``: the pool's values
        written as years; ``anchored``: the statement gives figures of its
        own, so a compound rate, or arithmetic with a change of scale, starts
        from one of ``find``'s anchors (168 / 860 over five years is no
        growth rate of £21.7m: chance); ``strict``: the pool is wide (the
        report's figures around a statement): a percentage and a count are
        never combined."""
        cap = MAX_POOL + (MAX_POOL // 2 if strict else 0)  # a wide pool: the report's figures around it
        pool = list(dict.fromkeys((float(v), bool(pc)) for v, pc in pool if math.isfinite(v)))[:cap]
        found_years = [a for a, _ in pool if is_year(a)]
        spans = sorted({abs(int(a - b)) for a in found_years for b in found_years if 0 < abs(a - b) <= 40})
        periods = spans[:MAX_YEARS]  # a compound rate over the span of the years it speaks of
        low = f" {units.lower()} "
        roots = any(w in low for w in ROOT_WORDS)
        self.indexed = any(w in low for w in INDEX_WORDS)  # an index of a base year's 100: shares, unsigned
        self.named = {op for op, words in NAMED_OPS.items() if any(w in low for w in words)}  # what the words say
        self.points = any(w in low for w in POINT_WORDS)  # "+0.2 pp": percentages set apart, written bare
        self.per = set(per_scales(low))  # "per 1,000 residents": a ratio counted in thousands
        self.rising = any(w in low for w in RISING) and not any(w in low for w in FALLING)
        self.falling = any(w in low for w in FALLING) and not any(w in low for w in RISING)
        yearly = "yearly" in self.named and not percent
        pairs = _pairs(pool, periods, percent or self.indexed, set(years), roots, strict, yearly)
        found = [c for c in pairs + _conversions(pool, low) if math.isfinite(c[0])]
        found.sort(key=lambda c: c[0])
        self.lists = [(found, [c[0] for c in found])] + [(r, [c[0] for c in r]) for r in runs]
        self.own = set(own)
        self.anchored = anchored

    def _against(self, c: _Candidate) -> int:
        """1 for a change or rate the other way than the words say (a fall
        of 7.48 % a year for "grew by about 8 % a year"), else 0: of two
        derivations as simple, the one that reads as written is shown."""
        if c[2] not in ("change", "rate"):
            return 0
        a, b = c[3][0], c[3][1]
        return int((self.rising and a < b) or (self.falling and a > b))

    def find(
        self,
        figure: Figure,
        hedge: bool = False,
        anchors: set[float] = frozenset(),
        close: set[float] | None = None,
        free_digits: int = 0,
    ) -> Derivation | None:
        """The simplest derivation that rounds to ``figure``, or None; one
        from the statement's own figures first. A year is never computed; a
        figure of fewer than three significant digits ("20 %", "0.7") is
        matched by too much by chance: a two-digit one must start from one
        of ``anchors`` (what the question, the statement, the sentence before
        it or the report stated), a one-digit one from ``close`` anchors only
        (the same but what the report stated before the sentence before it;
        default: ``anchors``). ``free_digits``: a figure of fewer significant
        digits starts from an anchor, whatever the operation (a pool of the
        whole report's figures)."""
        if figure.year:
            return None
        close = anchors if close is None else close
        best: tuple[int, _Candidate, float] | None = None
        for reading in figure.readings:
            # a scale the material states once ("£ million") and the statement writes out
            shifts = (1.0,) if figure.percent else (1.0, 1e3, 1e6, 1e9, 1e-3, 1e-6, 1e-9)
            for shift in shifts:
                tol = reading.derived_tolerance(hedge) / shift
                value = reading.value / shift
                for items, keys in self.lists:
                    lo = bisect.bisect_left(keys, value - tol)
                    hi = bisect.bisect_right(keys, value + tol)
                    for c in items[lo:hi]:
                        if c[2] == "same" and shift == 1.0:
                            continue  # a figure stated as it is: not derived
                        if c[2] in DAY_OPS:
                            if shift == 1.0 and (c[2] == "days" or figure.digits >= 3) and _fits(c[2], figure):
                                if best is None or c[1] < best[0]:
                                    best = (c[1], c, shift)
                            continue  # days between dates: no figure's rules, no scale
                        operands = set(c[3][:2])
                        per = shift in self.per and c[2] == "ratio" and operands <= anchors  # "50 per 1,000"
                        if shift != 1.0 and c[2] != "same" and figure.digits < 3 and not per:
                            continue  # arithmetic and a change of scale both, to two digits: chance
                        if c[2] == "yearly" and (
                            shift != 1.0
                            or figure.digits < 2
                            or not (operands <= self.own or (figure.digits >= 3 and operands <= anchors))
                        ):
                            continue  # so much a year, as written: from its own figures, or to 3 digits from anchors
                        if c[2] == "of" and not operands <= self.own:
                            continue  # "83.9 % of 180 seats, about 151": both named by the statement, else chance
                        if c[2] == "product" and figure.digits < 2 and not any(_unit(u) for u in operands):
                            continue  # "£5 million" as 1,960 × 2,675: two figures' product, to one digit, is chance
                        if figure.digits >= 2 and all(_digit(u) for u in operands) and not operands & self.own:
                            continue  # "75 %" as (2 − 8) / 8, of a page's "Page 2" and a "8": chance
                        if figure.digits < free_digits and not operands & anchors:
                            continue
                        exotic = c[2] == "rate" or (shift != 1.0 and c[2] != "same" and not per)
                        if self.anchored and exotic and not operands & anchors:
                            continue  # a compound rate, or arithmetic and a scale: from what it speaks of
                        if figure.digits < 3 and sum(
                            u in (close if figure.digits < 2 else anchors) for u in operands
                        ) < min(3 - figure.digits, len(operands)):
                            continue  # "20 %": from one anchored figure; "5 %", "0.7": from close ones only
                        own = all(u in self.own for u in c[3][:2])
                        rank = c[1] + (shift != 1.0) - (10 if own else 0) - (3 if c[2] in self.named else 0)
                        rank += self._against(c)
                        bare_points = c[2] in _POINT_OPS and not figure.percent and not self.points
                        if _fits(c[2], figure, self.indexed) and not bare_points and (best is None or rank < best[0]):
                            best = (rank, c, shift)
        if best is None:
            return None
        _, (value, _, op, uses), shift = best
        how = explain(op, uses, value) + (f" (× {_n(shift)})" if shift != 1.0 else "")
        if op in DAY_OPS:
            return Derivation(value, how, ())  # its dates are in ``how``, not figures of the material
        return Derivation(value * shift, how, uses[:2] if op in ("rate", "root") else uses)


def _digit(x: float) -> bool:
    """A whole number of one digit: a count, a page, a list's mark."""
    return x.is_integer() and abs(x) < 10


def _fits(op: str, figure: Figure, indexed: bool = False) -> bool:
    """A percentage comes from a share, a change, a rate, or a difference of
    percentages (points); a plain figure never from a share, change or rate,
    but an index's from a share ("2019 = 100": 102.9 for 18,960 / 18,420)."""
    if figure.percent:
        return op in _PERCENT_OPS or op in _POINT_OPS
    return op not in _PERCENT_OPS or (indexed and op == "share")


def is_year(x: float) -> bool:
    """A whole value of a year (1800 to 2100)."""
    return x.is_integer() and 1800 <= x <= 2100
