"""How many tokens a text costs a model, for any script, offline.

Tokenizers spend very different amounts on different scripts: English costs
about a token per four characters, Chinese one to two tokens per character,
Hindi or Thai about one per character (byte-level BPE vocabularies such as
OpenAI's cl100k, Qwen's and DeepSeek's). Counting characters / 3 therefore
undercounts a Chinese page four times over, and a request fitted with it
overflows the window.

The estimate gives each character the cost of its script, set so that it is
at least the count of every tokenizer we checked, on sample texts in 17
languages and formats (tests/test_tokens.py: cl100k, Qwen 2.5, Qwen 3.6,
DeepSeek V4), and at most about 1.7 times it. It needs no vocabulary files, so
it works the same for any OpenAI-compatible model and on a machine without
internet. Where it still falls short of a provider's count, the model
activity learns the window from the provider's error (activities/llm.py).
"""

from __future__ import annotations

import re

# Cost in tokens per character, by script. Each class is a marker character
# that the translation table maps the script's characters to.
COST = {
    "a": 1 / 3,  # ASCII letters and white space (English and code)
    "d": 1.0,  # ASCII digits: Qwen and DeepSeek give each digit its own token
    "p": 0.5,  # ASCII punctuation
    "h": 1.75,  # Han ideographs (Chinese, kanji, hanja)
    "k": 1.2,  # Japanese kana
    "g": 1.3,  # Korean hangul
    "f": 1.0,  # CJK and full-width punctuation
    "l": 1.1,  # Latin letters with diacritics (French, German, Vietnamese, …)
    "c": 0.65,  # Greek, Cyrillic, Armenian
    "s": 0.9,  # Hebrew, Arabic, Syriac, Thaana
    "b": 1.25,  # Indic scripts, Thai, Lao, Tibetan, Myanmar, Khmer
}
OTHER_COST = 2.5  # symbols, emoji, rarer scripts: several byte-level pieces each
NUMBER_COST = 0.7  # extra per number: its first digit rarely merges with what precedes it

_RANGES = {
    "h": [(0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3FFFF)],
    "k": [(0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF65, 0xFF9F)],
    "g": [(0x1100, 0x11FF), (0x3130, 0x318F), (0xAC00, 0xD7AF)],
    "f": [(0x3000, 0x303F), (0xFF00, 0xFF64), (0xFFA0, 0xFFEF)],
    "l": [(0x00A0, 0x036F), (0x1E00, 0x1EFF)],
    "c": [(0x0370, 0x058F)],
    "s": [(0x0590, 0x08FF)],
    "b": [(0x0900, 0x0DFF), (0x0E00, 0x0FFF), (0x1000, 0x109F), (0x1780, 0x17FF)],
}
_NUMBER = re.compile(r"[0-9]+")


class _Classes(dict):
    """Code point -> class marker, filled as characters are met (str.translate
    looks each one up). Every ASCII character maps to a marker, so markers
    cannot be confused with text; other characters map to None (dropped) and
    cost OTHER_COST each."""

    def __missing__(self, point: int) -> str | None:
        if point < 0x80:
            char = chr(point)
            marker = "d" if char.isdigit() else "a" if char.isalpha() or char.isspace() or point < 0x20 else "p"
        else:
            marker = next((m for m, spans in _RANGES.items() if any(a <= point <= b for a, b in spans)), None)
        self[point] = marker
        return marker


_CLASSES = _Classes()


def count(text: str) -> int:
    """Estimated tokens of ``text`` (an upper bound for common tokenizers)."""
    if not text:
        return 0
    marked = text.translate(_CLASSES)
    total, known = 0.0, 0
    for marker, cost in COST.items():
        n = marked.count(marker)
        known += n
        total += n * cost
    total += (len(text) - known) * OTHER_COST + NUMBER_COST * len(_NUMBER.findall(text))
    return int(total) + 1


def clip(text: str, max_tokens: int) -> str:
    """The longest start of ``text`` that costs at most ``max_tokens``."""
    # No character costs less than a third of a token, so the answer lies
    # within the first 3 * max_tokens characters: a long text costs no more.
    window = text[: 3 * max(max_tokens, 0) + 3]
    if len(window) == len(text) and count(text) <= max_tokens:
        return text
    low, high = 0, len(window) + 1  # count(window[:low]) <= max_tokens < count(window[:high])
    while high - low > 1:
        middle = (low + high) // 2
        if count(window[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle
    return window[:low]
