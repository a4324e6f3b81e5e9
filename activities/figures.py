"""Figures in text: pure functions for the statement support of a report
(``activities/support.py``; the arithmetic between figures is
``activities/arithmetic.py``).

A figure is a number as a writer wrote it: ``1,960``, ``36.5 %``, ``£3.2
million``, ``4.312`` (German thousands), ``3,2`` (a decimal comma). It keeps
every value it may mean and the rounding its writing shows (``36.5`` is
anything from 36.45 to 36.55; ``about 2,700`` anything from 2,650 to 2,750),
so a statement's figure matches the material's when the material's rounds to
it. Not figures: footnote markers (``[3]``, ``[^3]``, ``¹``), numbers inside
links' addresses, model names (``Tern-4``, ``RP-9``, ``CO2``), ordinals, list
numbering.

Every pattern is linear.
"""

from __future__ import annotations

import html
import re
from typing import NamedTuple

from activities.units import constants, word_factors  # noqa: F401 (re-exported)

_MARKERS = re.compile(r"\[\^?\d{1,3}(?:\s{0,3}[,–-]\s{0,3}\^?\d{1,3}){0,20}\]|【\d{1,3}】|[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
_LINK = re.compile(r"\[([^\[\]\n]{0,400})\]\([^()\s]{0,2000}\)")
# A list's number run into the text (a PDF's "… in 2028. 3. Repeat the survey"): after a sentence's end,
# before a capital; a sentence of one number is no figure. A line's own list mark: activities/support.py.
_RUN_IN_ITEM = re.compile(r"(?<=[.!?:;] )\d{1,2}[.)] (?=[A-Z])")
_URL = re.compile(r"(?:https?|file)://[^\s<>\"'”’»）)\]]{1,2000}")
# A number not glued to a Latin, Greek or Cyrillic letter before it (``Tern-4``,
# ``CO2``, ``Q3`` are names; CJK text has no spaces), then a per cent sign or
# word, or the word after it (a scale, a unit, or what makes it a name).
_LETTER = "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0370-\u03ff\u0400-\u04ff"  # not × (U+00D7) nor ÷ (U+00F7)
_FIGURE = re.compile(
    rf"(?<![{_LETTER}])(?<![{_LETTER}][-‐‑/])(?<![\d.,\u2009])(\d{{1,15}}(?:[.,]\d{{1,15}}|\u2009\d{{3}}){{0,6}})(?![\d])"
    r"(?:(\s?(?:%|％|per ?cent\b|pct\b|percentage points?\b|prozent\b|por ciento\b|pour cent\b))"
    r"|(\s?[^\W\d_]{1,12}))?",
    re.IGNORECASE,
)
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "millions": 1e6,
    "mn": 1e6,
    "m": 1e6,
    "mio": 1e6,
    "millionen": 1e6,
    "millones": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "mrd": 1e9,
    "milliarden": 1e9,
    "trillion": 1e12,
    "万": 1e4,
    "亿": 1e8,
    "千": 1e3,
}
_ORDINAL = ("st", "nd", "rd", "th")
HEDGES = (
    "about",
    "around",
    "approximately",
    "approx",
    "roughly",
    "nearly",
    "almost",
    "some ",
    "close to",
    "just over",
    "just under",
    "over ",
    "more than",
    "less than",
    "under ",
    "circa",
    "c.",
    "~",
    "≈",
    "estimated",
    "rund",
    "etwa",
    "fast",
    "knapp",
    "aproximadamente",
    "alrededor",
    "casi",
    "cerca de",
    "environ",
    "près de",
    "约",
    "大约",
    "近",
    "約",
)


class Reading(NamedTuple):
    value: float  # scaled
    precision: float  # the unit of its last written digit, scaled
    coarse: float  # the unit of its last non-zero digit (2,700: 100), scaled

    def tolerance(self, hedged: bool = False) -> float:
        """How far a value may lie from it and round to it: half its last
        digit (and a tenth more, for a figure rounded from a rounded one);
        after a hedge ("about 2,700") half its last non-zero digit, and at
        least one last digit."""
        if hedged:
            return max(self.coarse * 0.5, self.precision) * 1.0001 + 1e-9
        return self.precision * 0.55 + 1e-9

    def derived_tolerance(self, hedged: bool = False) -> float:
        """The same for a figure computed from others: a hedge allows at
        most half a per cent more ("about £122,600" for 122,641; "about 20
        years" is 20)."""
        if hedged:
            return max(self.precision * 0.55, min(self.coarse * 0.5, abs(self.value) * 0.005)) * 1.0001 + 1e-9
        return self.tolerance(False)


class Figure(NamedTuple):
    text: str  # as written, e.g. "36.5 %"
    readings: tuple[Reading, ...]  # what it may mean (4.312: 4312, or 4.312 with a decimal point)
    percent: bool = False
    small: bool = False  # a bare whole number up to 10: a count, not a figure to check
    digits: int = 3  # its significant digits as written (20: 1, 36.5: 3, 2.50: 3)

    @property
    def year(self) -> bool:
        """A year (four digits from 1000 to 2199 written without a separator,
        not a percentage): never computed."""
        return self.text.isdigit() and len(self.text) == 4 and 1000 <= int(self.text) <= 2199

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(r.value for r in self.readings)

    def matches(self, value: float, hedged: bool = False) -> bool:
        return any(abs(r.value - value) <= r.tolerance(hedged) for r in self.readings)


# A thousands group after a no-break, narrow no-break or thin space (French and SI style: "2 150"),
# written with a thin space (``GROUP``): one figure, and never a year ("2 150" pairs are no year 2150).
GROUP = "\u2009"
_GROUP_SPACE = re.compile(r"(?<=\d)[\u00a0\u202f\u2009](?=\d{3}(?!\d))")
# A span of years with its end cut to two digits: "2018–23", "FY2021-22".
_SHORT_SPAN = re.compile(r"(?<![\d.,])((?:19|20)\d\d)([–—‐‑-]|/)(\d\d)(?![\d%]|[.,]\d|[-‐‑/]\d)")  # not "2021-03-03"
# A document's part named by its number ("Table 2.1", "Tab. 4.1", "§ 2", "Abb. 3"): a label, no figure.
_REFERENCE = re.compile(
    r"(?<![^\W\d_])(?:Table|Tab\.|Tabelle|Tabla|Tableau|Tabella|Tabela|Figure|Fig\.|Abb\.|Section|Chapter|Kapitel"
    r"|Annex|Anhang|Appendix|Anexo|Cuadro)\s?\d{1,3}(?:\.\d{1,3}){0,3}(?![\d,.]\d)|§\s?\d{1,3}(?:\.\d{1,3}){0,3}(?![\d,.]\d)",
    re.IGNORECASE,
)
# A fiscal or calendar year's label: "FY2023", "FY22", "CY'21" (not a quarter's or a half's: "H2 50 kg" is hydrogen).
_PERIOD = re.compile(r"\b(FY|CY)\s?['’]?(\d{4}|\d{2})\b")
# Whole numbers grouped by thousands with plain spaces ("31 600", "1 402"): at most five groups, so
# no run is tried more than five groups deep (linear).
_SPACED = re.compile(r"(?<![\d.,\u2009])\d{1,3}(?: \d{3}){1,5}(?:[.,]\d{1,6})?(?![\d]|[.,]\d)")


# A formula written in LaTeX, as a strong model shows its working ("$\frac{2675-1960}{1960} \approx 36.5\%$"):
# its fractions, operators and braces read as the plain arithmetic they write. One pass each, bounded.
_FRAC = re.compile(r"\\[dt]?frac\{([^{}]{1,200})\}\{([^{}]{1,200})\}")
_BRACED = re.compile(r"\\(?:text|mathrm|textrm|mathbf|operatorname)\{([^{}]{0,200})\}|\^\{([^{}]{1,40})\}")
_LATEX = {
    "\\left": "", "\\right": "", "\\times": "×", "\\cdot": "×", "\\div": "÷", "\\approx": "≈",
    "\\simeq": "≈", "\\sim": "~", "\\%": "%", "{,}": ",", "{.}": ".", "\\,": "\u2009", "\\;": " ",
    "\\!": "", "\\quad": " ", "\\to": "→", "\\rightarrow": "→", "\\pm": "±", "\\$": "$", "\\ ": " ",
    "\\pounds": "£", "\\euro": "€",
}  # fmt: skip
_LATEX_WORD = re.compile("|".join(re.escape(k) for k in sorted(_LATEX, key=len, reverse=True)))


def unlatex(text: str) -> str:
    """``text`` with the arithmetic it writes in LaTeX as plain arithmetic:
    "\\frac{a}{b}" as (a)/(b), "^{1/4}" as ^(1/4), "\\times" as ×,
    "\\%" as %, "2{,}675" as 2,675; text without a backslash unchanged."""
    if "\\" not in text and "{" not in text:
        return text
    text = _BRACED.sub(_unbraced, _LATEX_WORD.sub(lambda m: _LATEX[m.group(0)], text))
    return _BRACED.sub(_unbraced, _FRAC.sub(r"(\1)/(\2)", text))  # again: an exponent that was a fraction


def _unbraced(match: re.Match[str]) -> str:
    """A text command's text; an exponent in parentheses."""
    return match.group(1) if match.group(1) is not None else f"^({match.group(2)})"


def plain(text: str) -> str:
    """``text`` without what is not a figure of it: links' addresses (their
    text kept), bare URLs, footnote markers and list numbers run into the
    text; character references read (``&#39;`` is a quote, not 39);
    thousands grouped by a no-break or thin space written with ``GROUP``
    ("2 150" is one figure, 2150, and no year); a span of years' two-digit end written whole ("2018–23" is
    2018–2023, not a figure 23), a period's label apart from its year
    ("FY2023" is FY 2023), and a document part's number left out ("Table
    2.1")."""
    text = _RUN_IN_ITEM.sub(" ", _MARKERS.sub(" ", _URL.sub(" ", _LINK.sub(r"\1", unlatex(html.unescape(text))))))
    text = _REFERENCE.sub(_label, text)
    return _SHORT_SPAN.sub(_whole_span, _PERIOD.sub(_period_year, _GROUP_SPACE.sub(GROUP, text)))


def _period_year(match: re.Match[str]) -> str:
    """A fiscal year's label apart from its year, written whole ("FY2023"
    as FY 2023, "FY22" as FY 2022): its year a figure, the label no name,
    and "22" no figure."""
    year = match.group(2)
    return f"{match.group(1)} {year if len(year) == 4 else 2000 + int(year)}"


def _whole_span(match: re.Match[str]) -> str:
    """ "2018–23" as 2018–2023, "1998-02" as 1998-2002; "2021-03" (a month)
    left as written."""
    start, end = int(match.group(1)), int(match.group(3))
    if end <= start % 100 and start >= 2000:
        return match.group()
    century = start - start % 100 + (100 if end < start % 100 else 0)
    return f"{match.group(1)}{match.group(2)}{century + end}"


def _label(match: re.Match[str]) -> str:
    """A document part's label without its number ("Table 2.1" as "Table")."""
    return re.sub(r"[\d.\s]+$", "", match.group())


def joined_thousands(text: str) -> str:
    """``text`` (``plain``) with whole numbers grouped by plain spaces read
    as one ("31 600" is 31600): how a statement in French or SI style
    writes them. Material is read both ways (``spaced_figures``): a PDF's
    table row "168 171 183" is three figures there."""
    return _SPACED.sub(lambda m: m.group().replace(" ", GROUP), text)


def spaced_figures(text: str, writing: str | None = "") -> list[Figure]:
    """The figures of ``text`` (``plain``) that only a reading of its
    space-grouped numbers as one gives ("31 600": 31600)."""
    spans = [m.group().replace(" ", GROUP) for m in _SPACED.finditer(text)]
    return figures(" ; ".join(spans), writing) if spans else []


_LATIN_HEDGES = sorted(
    {h.strip() for h in HEDGES if not CJK.search(h) and h.strip() not in "~≈"}, key=len, reverse=True
)
# A hedge as a word of its own: not "environ" of "Environment", "over" of "turnover", "c." of "Dec." or "etc.".
_HEDGE = re.compile(
    rf"(?<![^\W\d_])(?:{'|'.join(re.escape(h) for h in _LATIN_HEDGES)})(?![^\W\d_])"
    rf"|[~≈]|{'|'.join(h for h in HEDGES if CJK.search(h))}",
    re.IGNORECASE,
)


def hedged(text: str) -> bool:
    """Whether ``text`` hedges its figures ("about 2,700", "c. 19 %", "约")."""
    return _HEDGE.search(text) is not None


_DECIMAL_POINT = re.compile(r"\d\.\d{1,2}(?![\d.,])")  # 18.4: so 1,960 is thousands
_DECIMAL_COMMA = re.compile(r"\d,\d{1,2}(?![\d.,])")  # 18,4: so 1.960 is thousands


def convention(text: str) -> str | None:
    """How ``text`` writes its numbers: "point" (18.4, 1,960), "comma"
    (18,4, 1.960), or None when it does not tell. Decided by the forms that
    are not ambiguous: a separator followed by one or two digits."""
    points = len(_DECIMAL_POINT.findall(text))
    commas = len(_DECIMAL_COMMA.findall(text))
    if points and not commas:
        return "point"
    if commas and not points:
        return "comma"
    return None


def figures(text: str, writing: str | None = "") -> list[Figure]:
    """The figures of ``text`` (already ``plain``), in order. ``writing``:
    how it writes numbers (``convention``; "" to tell from ``text`` itself,
    None for both readings of "1,960" and "4.312")."""
    return [figure for _, _, figure in placed_figures(text, writing)]


def placed_figures(text: str, writing: str | None = "") -> list[tuple[int, int, Figure]]:
    """``figures`` with where each stands in ``text``: (start, end, figure),
    the end after its per cent sign or scale word, not after another word."""
    if writing == "":
        writing = convention(text)
    out: list[tuple[int, int, Figure]] = []
    for match in _FIGURE.finditer(text):
        raw, percent, word = match.group(1), bool(match.group(2)), (match.group(3) or "").lower()
        scale = 1.0
        end = match.end(2) if percent else match.end(1)
        if word:
            glued = not word[0].isspace()
            word = word.strip()
            if CJK.match(word):  # no spaces in CJK text: only a scale counts
                scale = _SCALES.get(word[0], 1.0)
            elif glued and word in _ORDINAL:
                continue  # 3rd, 21st
            elif glued and word not in _SCALES and word not in _UNITS:
                continue  # 3D, 4G: a name
            else:
                scale = _SCALES.get(word, 1.0)
            end = match.end(3) if scale != 1.0 else end
        small = scale == 1.0 and not percent and raw.isdigit() and len(raw) <= 2 and int(raw) <= 10
        shown = raw + (f" {word}" if scale != 1.0 else "") + (" %" if percent else "")
        out.append(
            (match.start(1), end, Figure(shown, _scaled(_readings(raw, writing), scale), percent, small, _digits(raw)))
        )
    return out


_UNITS = frozenset("km kg t mw gw kw kwh mwh gwh twh ha mm cm ml hz s m g l".split())


def _scaled(readings: list[Reading], scale: float) -> tuple[Reading, ...]:
    """The readings scaled ("3.2 million": 3,200,000), and as written, for
    material that states the scale once ("Revenue (£ million) | 3.2")."""
    if scale == 1.0:
        return tuple(readings)
    return tuple([Reading(v * scale, p * scale, c * scale) for v, p, c in readings] + readings)


def _readings(raw: str, writing: str | None = None) -> list[Reading]:
    """Each value ``raw`` may mean, with the unit of its last digit and of
    its last non-zero digit: "1,960" is 1960 (or 1.96 written with a decimal
    comma); "3,2" is 3.2; "1.234,5" is 1234.5; "2 150" (``GROUP``) 2150."""
    raw = raw.replace(GROUP, "")
    if raw.isdigit():
        return [Reading(float(raw), 1.0, _coarse(raw))]
    digits = raw.replace(".", "").replace(",", "")
    whole = Reading(float(digits), 1.0, _coarse(digits))
    last = max(raw.rfind("."), raw.rfind(","))
    unit = 10.0 ** -(len(raw) - last - 1)
    decimal = Reading(float(f"{raw[:last].replace('.', '').replace(',', '')}.{raw[last + 1 :]}"), unit, unit)
    separators = len(raw) - len(digits)
    if separators > 1:  # 1,234.5 / 1.234,5 / 1,234,567
        return [whole] if raw.count(raw[last]) > 1 else [decimal]
    if len(raw) - last != 4:
        return [decimal]
    if writing is None:  # 1,960 or 4.312: thousands, or decimals
        return [whole, decimal]
    thousands = raw[last] == ("," if writing == "point" else ".")
    return [whole] if thousands else [decimal]


def _digits(raw: str) -> int:
    """Significant digits as written: "20" 1, "36.5" 3, "2.50" 3, "0.7" 1."""
    raw = raw.replace(GROUP, "")
    whole, _, fraction = raw.replace(",", ".").rpartition(".") if ("." in raw or "," in raw) else (raw, "", "")
    if raw.count(".") + raw.count(",") > 1 or len(fraction) == 3 and "," in raw:  # 1,234,567 / 1,960: thousands
        return len(raw.replace(",", "").replace(".", "").strip("0")) or 1
    digits = (whole + fraction).lstrip("0").replace(".", "")
    return len(digits if fraction else digits.rstrip("0")) or 1


def _coarse(digits: str) -> float:
    """The unit of a whole number's last non-zero digit: 2700 -> 100, 312 -> 1."""
    stripped = digits.rstrip("0")
    return 10.0 ** (len(digits) - len(stripped)) if stripped else 1.0
