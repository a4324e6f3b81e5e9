"""A provider's "context length exceeded", read: is it one, and what window
to fit the request to next.

Providers say it in their own words: OpenAI and DeepSeek ("maximum context
length is 8192 tokens. However, your messages resulted in 9000 tokens"),
vLLM ("... you requested 5000 tokens (4000 in the messages, 1000 in the
completion)", "longer than the maximum model length of 4096"), llama.cpp
(``exceed_context_size_error`` with ``n_ctx``), Mistral, Anthropic, Gemini,
text-generation-inference. Pure functions on the error's text.
"""

from __future__ import annotations

import re

_NUMBER = r"(\d[\d,]*)"
_OVERFLOW = re.compile(
    r"context_length_exceeded|exceed_context_size|context[ _-]?(?:length|window|size)|maximum model length"
    r"|too many (?:input )?tokens|prompt is too long|input is too long|reduce the length|too large for model"
    r"|must be <= ?\d|maximum number of tokens allowed|tokens? > ?\d",
    re.IGNORECASE,
)
# What the provider says its window is.
_LIMIT = [
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"maximum context length is {_NUMBER}",
        rf"maximum model length (?:is |of )?{_NUMBER}",
        rf"(?<![\d,]){_NUMBER} maximum context length",  # from a number's start only: linear
        rf"tokens? > ?{_NUMBER}",
        rf"limit of {_NUMBER}",
        rf"must be <= ?{_NUMBER}",
        rf"maximum number of tokens allowed \(?{_NUMBER}",
        rf"n_ctx\W+{_NUMBER}",
        rf"context (?:size|window|length) (?:is |of )?\(?{_NUMBER}",
    )
]
# How many tokens the provider counted in the request's prompt.
_COUNTED = [
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"(?<![\d,]){_NUMBER} in the messages",
        rf"messages resulted in {_NUMBER}",
        rf"prompt is too long: {_NUMBER}",
        rf"prompt contains {_NUMBER}",
        rf"given: {_NUMBER} `?inputs`? tokens",
        rf"input token count \(?{_NUMBER}",
        rf"prompt \(length {_NUMBER}",
        rf"n_prompt_tokens\W+{_NUMBER}",
        rf"you requested {_NUMBER}",
    )
]
MIN_WINDOW = 1_024


def is_overflow(status: int, text: str) -> bool:
    """Whether an HTTP error (400, 413 or 422) says the request is longer than
    the model's context window."""
    return status in (400, 413, 422) and bool(_OVERFLOW.search(text))


def _first(patterns: list[re.Pattern], text: str) -> int | None:
    for pattern in patterns:
        if found := pattern.search(text):
            return int(found.group(1).replace(",", "")) or None
    return None


# The provider may count up to this many times the tokens we estimate (its
# tokenizer, its chat template); beyond that its numbers are not about our
# request (llama-cpp-python once said "8192 in the messages" of a ~600-token one).
MAX_COUNT_RATIO = 3


def smaller_window(window: int, said: str, sent: int, asked: int = 0) -> int | None:
    """The window to fit the request to after the provider refused one fitted
    to ``window`` tokens, whose prompt we estimated at ``sent`` tokens with
    ``asked`` tokens of output: the window the provider states, scaled down by
    how much more it counted than we did; always smaller than ``window``.
    None when the provider's numbers cannot be about this request (it states
    a window far above what was sent and asked for, or counts far more than
    was sent): not an overflow of ours, and nothing to learn from it."""
    limit, counted = _first(_LIMIT, said), _first(_COUNTED, said)
    need = sent + asked
    if sent and limit and need * MAX_COUNT_RATIO < limit:
        return None
    if sent and counted and counted > sent * MAX_COUNT_RATIO:
        return None
    new = min(window, limit) if limit else window
    if counted and sent and counted > sent:  # it counts more than we estimate
        new = int(new * sent / counted)
    if not limit and not counted:
        new = int(window * 0.75)
    return max(min(new, int(window * 0.9)), MIN_WINDOW)
