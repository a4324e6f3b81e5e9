"""Numbers a page writes in words, read as figures: "forty-eight turbines",
"one hundred and twenty staff", "two million passengers", Chinese
"一百二十余人" and "三千五百". A report that writes them in digits ("48
turbines", "more than 120 employees") states what its source says.

Only the material is read so (``activities/support.py``): a report's number
words are no figures to check. Values up to ten are counts, never figures.
Both readers scan tokens once: linear in the text.
"""

from __future__ import annotations

import re

from activities.figures import Figure, Reading

_UNITS = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * n for n, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if n >= 2}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_TOKEN = re.compile(r"[A-Za-z]+|[^A-Za-z]+")  # words and what lies between them
_JOIN = re.compile(r"[ \t-]{1,3}")  # what may stand between two number words of one number
_PERCENT = re.compile(r"\s?(?:per ?cent|percent)\b", re.IGNORECASE)
MAX_WORDS = 12  # number words in one number


def english(text: str) -> list[Figure]:
    """The numbers above ten that ``text`` writes in English words."""
    out: list[Figure] = []
    run: list[str] = []  # the number words of the number being read
    tokens = _TOKEN.findall(text)
    for n, token in enumerate(tokens):
        word = token.lower()
        scale = word in _SCALES and bool(run)  # "million" alone ("£18.4 million") is no number
        if word in _UNITS or word in _TENS or scale or (run and word == "and") or _leading_a(tokens, n):
            if len(run) < MAX_WORDS:
                run.append(word)
            continue
        if not token.isalpha() and (not token or _JOIN.fullmatch(token)) and run:
            continue  # a blank or a hyphen between two words of the number
        if run:
            out += _figure(run, _PERCENT.match("".join(tokens[n : n + 3])) is not None)
            run = []
    if run:
        out += _figure(run, False)
    return out


def _leading_a(tokens: list[str], n: int) -> bool:
    """ "a" before a scale word: "a hundred", "a million"."""
    return tokens[n].lower() == "a" and n + 2 < len(tokens) and tokens[n + 2].lower() in _SCALES


def _figure(run: list[str], percent: bool) -> list[Figure]:
    while run and run[-1] == "and":
        run = run[:-1]
    total, current, last = 0, 0, 1
    for word in run:
        if word == "a":
            current = max(current, 1)
        elif word in _UNITS:
            current += _UNITS[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current, last = max(current, 1) * 100, 1
        elif word in _SCALES:
            total, current, last = total + max(current, 1) * _SCALES[word], 0, _SCALES[word]
    value = total + current
    if value <= 10 and not percent:
        return []
    coarse = last if current == 0 else 1
    return [Figure(" ".join(run), (Reading(float(value), float(coarse), float(coarse)),), percent, False, 3)]


_CJK_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CJK_SMALL = {"十": 10, "百": 100, "千": 1_000}
_CJK_LARGE = {"万": 10_000, "亿": 100_000_000}
_CJK_RUN = re.compile(r"[零〇一二两三四五六七八九十百千万亿]{2,24}|十")


def chinese(text: str) -> list[Figure]:
    """The numbers above ten that ``text`` writes in Chinese numerals (a
    run with a unit character: "一百二十", "三千五百", "两万"; not "一家")."""
    out: list[Figure] = []
    for match in _CJK_RUN.finditer(text):
        run = match.group()
        if not any(c in _CJK_SMALL or c in _CJK_LARGE for c in run):
            continue  # digits alone ("一二"): seldom a number
        value, coarse = _cjk_value(run)
        if value > 10:
            out.append(Figure(run, (Reading(float(value), float(coarse), float(coarse)),), False, False, 3))
    return out


def _cjk_value(run: str) -> tuple[int, int]:
    """The value of a run of Chinese numerals, and the unit of its last
    written place ("一百二十": 120, 10; "两万": 20000, 10000)."""
    total, section, digit, unit = 0, 0, 0, 1
    for c in run:
        if c in _CJK_DIGITS:
            digit = _CJK_DIGITS[c]
            unit = 1
        elif c in _CJK_SMALL:
            section += (digit or 1) * _CJK_SMALL[c]
            digit, unit = 0, _CJK_SMALL[c]
        else:
            total = (total + section + digit) * _CJK_LARGE[c]
            section, digit, unit = 0, 0, _CJK_LARGE[c]
    return total + section + digit, unit if digit == 0 else 1


def worded_figures(text: str) -> list[Figure]:
    """The numbers ``text`` writes in English words or Chinese numerals."""
    return english(text) + chinese(text)
