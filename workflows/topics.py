"""Is a coordinator's hand-off about the user's question, and is the
question small talk? Pure, linear checks on bounded text, so that a weak
model's routing reply cannot replace the question or end the run.

- ``about_question``: a hand-off topic is kept only when it shares a content
  word (or, in Chinese, Japanese or Korean, a two-character run) with the
  question and is not one of the tool schema's own parameter descriptions
  (a weak model copies them: "The user's locale, e.g. en-US or zh-CN.").
- ``small_talk``: a greeting, thanks or a question about the assistant, the
  only messages the coordinator may answer itself.
- ``locale_for``: the model's locale, unless its script contradicts the
  question's (an English question is not answered in ``zh-CN``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from workflows.languages import guess_locale

LIMIT = 4_000  # characters of a topic or question looked at
_WORD = re.compile(r"\w+")
_LANGUAGE_TAG = re.compile(r"[a-z]{2,3}( [a-z]{2,4})?")  # "en us", once normalized
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_STOP = frozenset(
    """a an the and or of to in on at for with by from about into over than then
    is are was were be been being do does did can could should would will shall may might
    what which who whom whose how why when where whether this that these those it its
    i me my we our you your he she they them their there here please tell explain
    research question topic restated clearly user users language locale e g eg""".split()
)
_SMALL_TALK = frozenset(
    """hi hello hey hiya howdy yo sup heya greetings morning afternoon evening good day night
    thanks thank thx ty cheers bye goodbye ciao see later nice meet great ok okay cool
    how are you who what is your name can do doing going today there again very much
    hallo hola bonjour salut merci danke gracias guten tag buenos dias ola obrigado
    assistant bot yourself introduce up s re m a lot so
    привет здравствуйте спасибо""".split()
)
_SMALL_TALK_CJK = (
    "你好",
    "您好",
    "谢谢",
    "你是谁",
    "早上好",
    "晚上好",
    "嗨",
    "こんにちは",
    "こんばんは",
    "ありがとう",
    "안녕",
    "감사",
)


def _schema_texts() -> frozenset[str]:
    """The parameter descriptions of the coordinator's tools, normalized."""
    tools = json.loads((Path(__file__).resolve().parent.parent / "prompts" / "tools.json").read_text("utf-8"))
    found = set()
    for tool in tools:
        for spec in tool.get("parameters", {}).get("properties", {}).values():
            found.add(normal(spec.get("description", "")))
    return frozenset(found - {""})


def normal(text: str) -> str:
    return " ".join(_WORD.findall(text[:LIMIT].lower()))


def content_words(text: str) -> set[str]:
    """Words of three or more characters that are not stop words, plus each
    two-character run of CJK text (which has no spaces between words)."""
    found = set()
    for word in _WORD.findall(text[:LIMIT].lower()):
        if _CJK.search(word):
            chars = [c for c in word if _CJK.match(c)]
            found.update(a + b for a, b in zip(chars, chars[1:]))
        elif len(word) >= 3 and word not in _STOP:
            found.add(word)
    return found


SCHEMA_TEXTS = _schema_texts()


def about_question(topic: str, question: str) -> bool:
    """True when ``topic`` can stand for ``question``: not empty, not a
    schema description or a bare language tag, and sharing a content word
    with the question (a question without content words accepts any topic)."""
    text = normal(topic)
    if not text or text in SCHEMA_TEXTS or _LANGUAGE_TAG.fullmatch(text):
        return False
    asked = content_words(question)
    return not asked or bool(asked & content_words(topic))


def small_talk(question: str) -> bool:
    """A greeting, thanks or a question about the assistant: short, and made
    only of small-talk words (or, in CJK text, starting with a greeting and
    at most a dozen characters long)."""
    text = question.strip()
    if not text or len(text) > 80:
        return False
    if _CJK.search(text):
        bare = "".join(_WORD.findall(text))
        return len(bare) <= 12 and any(bare.startswith(p) for p in _SMALL_TALK_CJK)
    words = _WORD.findall(text.lower())
    return 0 < len(words) <= 8 and all(w in _SMALL_TALK for w in words)


_FAMILY = {"zh": "han", "ja": "han", "ko": "hangul", "ar": "arabic", "fa": "arabic", "ur": "arabic"}
_FAMILY |= dict.fromkeys(("ru", "uk", "bg", "sr", "be", "kk", "mk"), "cyrillic")
_FAMILY |= dict.fromkeys(("hi", "th", "he", "el", "ka", "hy", "bn", "ta"), "other")
_GUESSED = {"zh-CN": "han", "ja-JP": "han", "ko-KR": "hangul", "ru-RU": "cyrillic", "ar-SA": "arabic"}


def locale_for(model_locale: str | None, question: str) -> str | None:
    """The model's locale, unless it names a language written in another
    script than the question: then the locale guessed from the question."""
    if not model_locale:
        return None
    text = question[:LIMIT]
    guessed = guess_locale(text)
    family = _FAMILY.get(model_locale.split("-")[0].lower(), "latin")
    if guessed in _GUESSED:
        return model_locale if family == _GUESSED[guessed] else guessed
    letters = [c for c in text if c.isalpha()]
    latin = sum(1 for c in letters if c.isascii())
    if family != "latin" and letters and latin * 2 > len(letters):
        return guessed  # a question in Latin letters, a locale in another script
    return model_locale
