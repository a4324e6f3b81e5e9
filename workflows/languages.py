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
