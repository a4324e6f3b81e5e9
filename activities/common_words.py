"""Whether a capitalised word is common vocabulary rather than a name:
"Statement", "Environmental", "Authority", "Rotterdam", "Économie" are words
of a language (a heading's, a translation's: "Environmental Statement" for
"Umwelterklärung"); "Kelderbark", "Mlacron", "Skarne" are no word of any.
A faithful report over sources in another language capitalises such words
without the material ever writing them; an invented name is seldom made of
common words only.

Word frequencies are wordfreq's "small" lists (the commonest words of each
language; loaded once, about 25 MB for the languages below), read off the
event loop with the rest of the support check.
"""

from __future__ import annotations

import functools

LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl")
COMMON_ZIPF = 3.0  # a word used at least once per million words in one of them


@functools.lru_cache(maxsize=8192)
def common(word: str) -> bool:
    """Whether ``word`` (lower-cased) is a common word of one of
    ``LANGUAGES``; a hyphenated one when each part is."""
    parts = [p for p in word.replace("’", "'").split("-") if p]
    return bool(parts) and all(_common(p) for p in parts)


def _common(part: str) -> bool:
    from wordfreq import zipf_frequency  # loaded on first use: its lists are in the wheel

    return any(zipf_frequency(part, language, wordlist="small") >= COMMON_ZIPF for language in LANGUAGES)
