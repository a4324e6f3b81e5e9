"""Units and words a statement's arithmetic may use without a source stating
them: conversion factors ("365 days", "km per mile") and the factors words
name ("twice", "a quarter"). Tables only, and their two lookups."""

from __future__ import annotations

import re

# Factors of common conversions, each tried only for a statement that names
# one of its units (a conversion it does not name would be a coincidence).
CONVERSIONS = (
    (1.609344, "km per mile", ("mile", " mi ", " mi.", "km", "kilomet", "meile", "milla")),
    (2.20462, "lb per kg", ("pound", " lb", " lbs", "kg", "kilogram")),
    (3.28084, "ft per m", ("feet", "foot", " ft", "metre", "meter")),
    (2.54, "cm per inch", ("inch", " in.", "cm", "centimet")),
    (25.4, "mm per inch", ("inch", " in.", " in)", "mm", "millimet")),
    (3.78541, "litres per US gallon", ("gallon", "litre", "liter")),
    (4.54609, "litres per imperial gallon", ("gallon", "litre", "liter")),
    (1.852, "km per nautical mile", ("nautical", "knot", " kn")),
    (2.47105, "acres per hectare", ("acre", "hectare", " ha")),
    (0.907185, "tonnes per short ton", ("short ton",)),
    (1.01605, "tonnes per long ton", ("long ton",)),
    (12.0, "months", ("month", "monat", "mes", "mois", "月")),
    (24.0, "hours", ("hour", "stunde", "hora", "heure", "小时")),
    (60.0, "minutes", ("minute", "hour", "minuto", "分钟")),
    (7.0, "days", ("week", "woche", "semana", "semaine", "周", "星期")),
    (52.0, "weeks", ("week", "woche", "semana", "semaine", "周")),
    (365.0, "days", ("day", "daily", "tag", "día", "jour", "天", "日")),
    (86_400.0, "seconds per day", ("second", "a day", "per day", "daily", "hz")),
    (3_600.0, "seconds per hour", ("second", "an hour", "per hour")),
)
# Words that multiply or divide (a "quarter", "twice"): their factors join what a statement computes from.
# English, then German, French, Spanish, Italian, Portuguese, Chinese and Japanese wordings.
WORD_FACTORS = (
    ("half", 2.0),
    ("halve", 2.0),
    ("double", 2.0),
    ("twice", 2.0),
    ("triple", 3.0),
    ("three times", 3.0),
    ("a third", 3.0),
    ("quarter", 4.0),
    ("four times", 4.0),
    ("fivefold", 5.0),
    ("tenfold", 10.0),
    ("a tenth", 10.0),
    ("pairs", 2.0),  # breeding pairs as birds
    ("dozen", 12.0),
    ("hälfte", 2.0),
    ("doppelt", 2.0),
    ("drittel", 3.0),
    ("viertel", 4.0),
    ("moitié", 2.0),
    ("tiers", 3.0),
    ("quart", 4.0),
    ("mitad", 2.0),
    ("doble", 2.0),
    ("tercio", 3.0),
    ("cuarto", 4.0),
    ("metà", 2.0),
    ("doppio", 2.0),
    ("terzo", 3.0),
    ("quarto", 4.0),
    ("metade", 2.0),
    ("dobro", 2.0),
    ("一半", 2.0),
    ("两倍", 2.0),
    ("翻番", 2.0),
    ("三分之一", 3.0),
    ("四分之一", 4.0),
    ("半分", 2.0),
    ("倍", 2.0),
    ("三分の一", 3.0),
    ("四分の一", 4.0),
)
TEMPERATURES = ("°", "fahrenheit", "celsius", "degrees")


def named_unit(word: str, units: str) -> bool:
    """Whether ``units`` (lower-cased, spaced) names the unit ``word``: at a
    word's start ("mile" in "miles", not "mes" in "times" nor "day" in
    "today"); a word written with its blanks (" mi ") as written, and one
    written with a blank before it whole (" ha" is no " had": SmolLM2's
    "they had" converted 2,008 hectares to 4,962 "pairs"). The word-by-word
    reading that ``named_conversions`` does with one pattern a conversion
    (a test holds the two equal)."""
    if not _starts_word(word):
        return re.search(_written(word), units) is not None
    return re.search(rf"(?<![^\W\d_]){re.escape(word)}", units) is not None


def _starts_word(word: str) -> bool:
    """Whether a unit word is found at a word's start ("mile"), not as
    written with its blanks (" mi ", " ha")."""
    return word == word.strip() and word[:1].isalpha()


def _written(word: str) -> str:
    """The pattern of a unit word written with its blanks: as written, and
    not run into a longer word when it ends in a letter (" lb", " ha")."""
    return re.escape(word) + (r"(?![^\W\d_])" if word[-1:].isalpha() else "")


def _naming(words: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for ``named_unit`` of any of ``words`` (alternatives of
    literals: linear)."""
    starts = [re.escape(w) for w in words if _starts_word(w)]
    written = [_written(w) for w in words if not _starts_word(w)]
    parts = ([rf"(?<![^\W\d_])(?:{'|'.join(starts)})"] if starts else []) + written
    return re.compile("|".join(parts))


_NAMING = tuple(_naming(words) for _, _, words in CONVERSIONS)


def named_conversions(units: str) -> list[int]:
    """The indices of the ``CONVERSIONS`` that ``units`` (lower-cased,
    spaced) names a unit of, as ``named_unit`` reads them."""
    return [n for n, pattern in enumerate(_NAMING) if pattern.search(units)]


def constants(units: str) -> list[float]:
    """The factors of the conversions ``units`` (a statement's text) names:
    "365 days", "12 months", "per 1,000 residents" are no figures a source
    must state."""
    units = f" {units.lower()} "
    return [CONVERSIONS[n][0] for n in named_conversions(units)] + per_scales(units)


# A rate per so many ("50 boats per 1,000 residents", "3.1 per 100,000 people"): the scale it is counted in.
_PER = re.compile(
    r"(?<![^\W\d_])(?:per|for every|every|pro|pour|por|ogni|je)\s{1,3}"
    r"(1[,.\u2009 ]?000[,.\u2009 ]?000|100[,.\u2009 ]?000|10[,.\u2009 ]?000|1[,.\u2009 ]?000|100|hundred|thousand|million)"
    r"(?![\d]|[,.\u2009 ]\d)",
    re.IGNORECASE,
)
_PER_WORDS = {"hundred": 1e2, "thousand": 1e3, "million": 1e6}


def per_scales(text: str) -> list[float]:
    """The scales ``text`` counts a rate in ("per 1,000": 1,000)."""
    out = []
    for m in _PER.finditer(text):
        word = m.group(1).lower()
        out.append(_PER_WORDS.get(word) or float(re.sub(r"\D", "", word)))
    return list(dict.fromkeys(out))


def word_factors(text: str) -> list[float]:
    """The factors the words of ``text`` name ("a quarter": 4, "twice": 2)."""
    low = text.lower()
    return list(dict.fromkeys(k for word, k in WORD_FACTORS if word in low))
