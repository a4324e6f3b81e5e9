"""Calendar dates as pages and reports write them, and the days between two
(``activities/derivation.py``: "planned 30 Sep 2020, opened 3 Mar 2021:
+154 days" is arithmetic on two dates the material states). Read forms:
2021-03-03, 3 March 2021 / 3 Mar. 2021 / 3rd March 2021, March 3, 2021,
3. März 2021, 3 de marzo de 2021, 3 mars 2021, 3 marzo 2021 and 03.03.2021;
month names in English, German, French, Spanish, Italian and Portuguese.
Each pattern is linear (no nested or adjacent runs that can match the same
characters), and a text is read up to ``MAX_TEXT`` characters. Not
dateparser's ``search_dates`` (installed with trafilatura): it takes a
month or a year alone for a day ("in May and" is read as 30 May 2020,
"2021" as 3 March 2021), days no page gives, that would make counts of
days by chance.
"""

from __future__ import annotations

import re
from datetime import date

MAX_TEXT = 20_000  # characters of one text read for dates
MAX_DATES = 16  # dates a statement's arithmetic may use
DAY_WORDS = ("day", "tag", "día", "dia", "jour", "giorn", "dag", "天", "日")  # "154 Tage", "930 días"

_MONTHS = {
    1: ("january", "jan", "januar", "jänner", "janvier", "janv", "enero", "ene", "gennaio", "gen", "janeiro"),
    2: ("february", "feb", "februar", "février", "févr", "fevrier", "febrero", "febbraio", "fevereiro", "fev"),
    3: ("march", "mar", "märz", "maerz", "mars", "marzo", "março", "marco"),
    4: ("april", "apr", "avril", "avr", "abril", "abr", "aprile"),
    5: ("may", "mai", "mayo", "maggio", "maio", "mag"),
    6: ("june", "jun", "juni", "juin", "junio", "giugno", "junho", "giu"),
    7: ("july", "jul", "juli", "juillet", "juil", "julio", "luglio", "julho", "lug"),
    8: ("august", "aug", "août", "aout", "agosto", "ago"),
    9: ("september", "sep", "sept", "septembre", "septiembre", "settembre", "setembro", "set"),
    10: ("october", "oct", "oktober", "okt", "octobre", "octubre", "ottobre", "outubro", "out", "ott"),
    11: ("november", "nov", "novembre", "noviembre", "novembro"),
    12: ("december", "dec", "dezember", "dez", "décembre", "déc", "diciembre", "dic", "dicembre", "dezembro"),
}
MONTH = {name: n for n, names in _MONTHS.items() for name in names}
_NAME = r"([^\W\d_]{3,10})\.?"  # a month's name, perhaps cut short ("Sept.")
_ISO = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_DAY_FIRST = re.compile(r"(?<![\d.])(\d{1,2})(?:st|nd|rd|th|er|º|\.)? ?(?:de )?" + _NAME + r",? (?:de )?(\d{4})(?!\d)")
_MONTH_FIRST = re.compile(_NAME + r" (\d{1,2})(?:st|nd|rd|th)?, (\d{4})(?!\d)")
_COUNTED_DAYS = re.compile(r"\d[ \u00a0-]?(?:" + "|".join(DAY_WORDS) + ")")
_DOTTED = re.compile(r"(?<![\d.])(\d{1,2})\.(\d{1,2})\.(\d{4})(?!\d)")


def _day(year: str, month: int | None, day: str) -> date | None:
    if month is None:
        return None
    try:
        return date(int(year), month, int(day))
    except ValueError:
        return None


def dates(text: str) -> list[date]:
    """The calendar dates ``text`` writes, each once, in the order found
    (ISO, then day-first, month-first and dotted forms)."""
    text = " ".join(text[:MAX_TEXT].split())
    low = text.lower()
    found = [_day(y, int(m), d) for y, m, d in _ISO.findall(text)]
    found += [_day(y, MONTH.get(name), d) for d, name, y in _DAY_FIRST.findall(low)]
    found += [_day(y, MONTH.get(name), d) for name, d, y in _MONTH_FIRST.findall(low)]
    found += [_day(y, int(m), d) if int(m) <= 12 else None for d, m, y in _DOTTED.findall(text)]
    return list(dict.fromkeys(d for d in found if d is not None))


def names_days(text: str, table: str = "") -> bool:
    """Whether ``text`` counts days: a figure followed by a day's word
    ("154 days", "+154-day delay", "930 días", "154 Tage", "154日"), or
    ``text`` is a row of a table (``table``: its heading rows) whose
    heading names days ("| Days late |"). "On its first day" counts none."""
    if _COUNTED_DAYS.search(text.lower()):
        return True
    return text.lstrip().startswith("|") and any(w in table.lower() for w in DAY_WORDS)
