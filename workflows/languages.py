"""Guessing a run's language from its text, when neither the user nor the
coordinator gave a locale."""

from __future__ import annotations

import re

_SCRIPTS = (
    (re.compile(r"[\u3040-\u30ff]"), "ja-JP"),  # kana before CJK: Japanese uses both
    (re.compile(r"[\uac00-\ud7af]"), "ko-KR"),
    (re.compile(r"[\u4e00-\u9fff]"), "zh-CN"),
    (re.compile(r"[\u0400-\u04ff]"), "ru-RU"),
    (re.compile(r"[\u0600-\u06ff]"), "ar-SA"),
)
_TAG = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")


def guess_locale(text: str) -> str:
    for pattern, locale in _SCRIPTS:
        if pattern.search(text):
            return locale
    return "en-US"


def locale_tag(value: object) -> str | None:
    """A language tag such as ``zh-CN`` from what a model wrote, else None."""
    text = str(value or "").strip().replace("_", "-")
    return text if _TAG.match(text) else None


# --- is a text written in its locale's script? ---------------------------------

# The scripts a language is written in, by its language subtag; a language
# not named here is not checked.
_LATIN = """en de fr es it pt nl sv da no nb nn fi pl cs sk sl hr ro hu tr id ms vi ca eu gl et lv lt
    is ga cy sq af sw tl fil mt lb""".split()
SCRIPTS_OF = {
    "zh": {"han"},
    "ja": {"han", "kana"},
    "ko": {"hangul", "han"},
    **dict.fromkeys(("ru", "uk", "be", "bg", "kk", "mk", "mn"), {"cyrillic"}),
    **dict.fromkeys(("ar", "fa", "ur"), {"arabic"}),
    "he": {"hebrew"},
    **dict.fromkeys(("hi", "mr", "ne"), {"devanagari"}),
    "th": {"thai"},
    "el": {"greek"},
    **dict.fromkeys(_LATIN, {"latin"}),
}
LANGUAGE_NAMES = {
    "zh": "Chinese",
    "ja": "Japanese",
    "ko": "Korean",
    "ru": "Russian",
    "uk": "Ukrainian",
    "ar": "Arabic",
    "fa": "Persian",
    "he": "Hebrew",
    "hi": "Hindi",
    "th": "Thai",
    "el": "Greek",
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
    "pl": "Polish",
    "tr": "Turkish",
    "vi": "Vietnamese",
    "id": "Indonesian",
}
_RANGES = (  # (first, last, script), by code point
    (0x0370, 0x03FF, "greek"),
    (0x0400, 0x052F, "cyrillic"),
    (0x0590, 0x05FF, "hebrew"),
    (0x0600, 0x06FF, "arabic"),
    (0x0750, 0x077F, "arabic"),
    (0x0900, 0x097F, "devanagari"),
    (0x0E00, 0x0E7F, "thai"),
    (0x1100, 0x11FF, "hangul"),
    (0x1E00, 0x1EFF, "latin"),
    (0x3040, 0x30FF, "kana"),
    (0x3130, 0x318F, "hangul"),
    (0x31F0, 0x31FF, "kana"),
    (0x3400, 0x4DBF, "han"),
    (0x4E00, 0x9FFF, "han"),
    (0xAC00, 0xD7AF, "hangul"),
    (0xF900, 0xFAFF, "han"),
    (0xFB50, 0xFDFF, "arabic"),
    (0xFE70, 0xFEFF, "arabic"),
    (0xFF21, 0xFF5A, "latin"),
    (0xFF66, 0xFF9F, "kana"),
    (0x20000, 0x2FA1F, "han"),
)
_BY_CHARACTER = frozenset(("han", "kana"))  # no spaces between words: each character counts
_URL = re.compile(r"(?:https?|file)://\S+")  # one class run: linear
MIN_UNITS = 20  # a text with fewer words than this is too short to tell
LOOKED_AT = 200_000  # characters of a text looked at


def _script(ch: str) -> str | None:
    code = ord(ch)
    if code < 0x0250:
        return "latin" if ch.isalpha() else None
    for first, last, script in _RANGES:
        if first <= code <= last:
            return script if ch.isalpha() or script in ("han", "kana") else None
    return "other" if ch.isalpha() else None


def script_share(text: str, locale: str) -> float | None:
    """The share of ``text``'s words written in the script of ``locale``'s
    language (a Chinese or Japanese character counts as a word, a Thai
    character as a third of one; links are left out). None when the
    language's script is not known or the text is too short to tell. One
    pass over the text."""
    expected = SCRIPTS_OF.get(locale.split("-")[0].lower())
    if not expected:
        return None
    units: dict[str, float] = {}
    previous = None
    for ch in _URL.sub(" ", text[:LOOKED_AT]):
        script = _script(ch)
        if script is not None and (script != previous or script in _BY_CHARACTER or script == "thai"):
            units[script] = units.get(script, 0.0) + (1 / 3 if script == "thai" else 1.0)
        previous = script
    total = sum(units.values())
    if total < MIN_UNITS:
        return None
    return round(sum(units.get(script, 0.0) for script in expected) / total, 4)


def language_name(locale: str) -> str:
    """ "Chinese (zh-CN)"; for a language not named here "the language of the
    locale `xx-YY`"."""
    name = LANGUAGE_NAMES.get(locale.split("-")[0].lower())
    if name:
        return f"{name} ({locale})"
    return f"the language of the locale `{locale}`" if locale.strip() else "the user's language"


# What a note asking for a language names it by: its English name and its own.
_OWN_NAMES = {
    "zh": ("中文", "汉语", "chinois", "chino", "chinesisch"),
    "ja": ("日本語",),
    "ko": ("한국어",),
    "ru": ("русском", "русский"),
    "de": ("deutsch",),
    "fr": ("français", "francais"),
    "es": ("español", "espanol"),
    "it": ("italiano",),
    "pt": ("português", "portugues"),
    "nl": ("nederlands",),
}
_ASKING = ("write", "in ", "language", "translate", "answer", "report", "用", "写", "auf ", "en ", "schreib")


REGIONS = {
    "zh": "zh-CN",
    "ja": "ja-JP",
    "ko": "ko-KR",
    "en": "en-US",
    "de": "de-DE",
    "fr": "fr-FR",
    "es": "es-ES",
    "it": "it-IT",
    "pt": "pt-PT",
    "nl": "nl-NL",
    "ru": "ru-RU",
    "ar": "ar-SA",
    "pl": "pl-PL",
    "tr": "tr-TR",
}


def locale_for(tag: str) -> str:
    """A locale for a language subtag: ``zh`` -> ``zh-CN``."""
    return REGIONS.get(tag, tag)


def asked_language(note: str) -> str | None:
    """The language subtag a user's note asks the report to be written in
    ("write it in German", "请用中文写"), else None: a language named beside a
    word of asking. A note that names two is not taken."""
    low = f" {note.lower()} "
    if not any(word in low for word in _ASKING):
        return None
    named = {
        tag
        for tag, name in LANGUAGE_NAMES.items()
        if f" {name.lower()}" in low and (f"in {name.lower()}" in low or "language" in low or "translat" in low)
    }
    named |= {tag for tag, names in _OWN_NAMES.items() if any(n in low for n in names)}
    return next(iter(named)) if len(named) == 1 else None
