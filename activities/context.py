"""Fit a chat request into the model's context window.

Pure functions on OpenAI-style message dicts. The system prompt and the task
(first user message) are always kept; long tool outputs are trimmed; then as
many of the newest turns as fit are kept, newest first; older turns keep what
the model wrote without their tool outputs, or are dropped with a note saying
so. Tokens are counted for the script of the text
(``activities/tokens.py``), so Chinese or Hindi is not undercounted.
"""

from __future__ import annotations

import json
from functools import lru_cache

from activities import tokens as _tokens

MESSAGE_OVERHEAD = 8
TRIM_NOTE = "\n…[trimmed to fit the context window]"
OMITTED = "[This output was left out to fit the context window; call the tool again to see it.]"


@lru_cache(maxsize=64)  # fitting a request counts the same messages again and again
def text_tokens(text: str) -> int:
    """Estimated tokens of a text."""
    return _tokens.count(text)


def tools_tokens(tools: list[dict]) -> int:
    """Estimated tokens of the tool schemas sent with a request."""
    return _tokens.count(json.dumps(tools, ensure_ascii=False)) if tools else 0


def tokens(message: dict) -> int:
    size = text_tokens(message.get("content") or "") + MESSAGE_OVERHEAD
    for call in message.get("tool_calls") or []:
        size += text_tokens(call["function"]["name"] + call["function"]["arguments"])
    return size


def total_tokens(messages: list[dict]) -> int:
    return sum(tokens(m) for m in messages)


def _trim(message: dict, max_tokens: int) -> dict:
    if tokens(message) <= max_tokens:
        return message
    content = message.get("content") or ""
    room = max(0, max_tokens - MESSAGE_OVERHEAD - (tokens(message) - MESSAGE_OVERHEAD - text_tokens(content)))
    return {**message, "content": _tokens.clip(content, max(0, room - text_tokens(TRIM_NOTE))) + TRIM_NOTE}


def _turns(messages: list[dict]) -> list[list[dict]]:
    """Group an assistant tool-calling message with its tool results, so a
    dropped turn never leaves a tool result without its call."""
    turns: list[list[dict]] = []
    for message in messages:
        if message["role"] == "tool" and turns and turns[-1][0].get("tool_calls"):
            turns[-1].append(message)
        else:
            turns.append([message])
    return turns


def fit(messages: list[dict], budget: int) -> list[dict]:
    """Return messages whose estimated size is at most ``budget`` tokens."""
    if total_tokens(messages) <= budget:
        return messages
    head_len = 2 if len(messages) > 1 and messages[1]["role"] == "user" else 1
    head, rest = list(messages[:head_len]), messages[head_len:]

    # 1. Trim every tool output to a share of the budget.
    rest = [_trim(m, budget // 4) if m["role"] == "tool" else m for m in rest]

    # 2. The head keeps room for the newer turns (up to half of the budget).
    head_cap = budget - min(total_tokens(rest), budget // 2) - 32
    for i, message in enumerate(head):
        if total_tokens(head) > head_cap:
            head[i] = _trim(message, max(head_cap - total_tokens(head) + tokens(message), 64))

    # 3. Keep the newest turns that fit, newest first; an older turn that
    #    does not fit keeps what the model wrote (its notes, its calls) and
    #    loses its tool outputs before it is dropped whole.
    room = budget - total_tokens(head) - 32
    kept: list[list[dict]] = []
    turns = _turns(rest)
    for turn in reversed(turns):
        size = total_tokens(turn)
        if size > room and kept:
            turn = [{**m, "content": OMITTED} if m["role"] == "tool" else m for m in turn]
            size = total_tokens(turn)
            if size > room:
                break
        elif size > room:
            # Not even the newest turn fits: shrink its tool outputs.
            share = max(room // max(len(turn), 1), 64)
            turn = [_trim(m, share) if m["role"] == "tool" else m for m in turn]
            size = total_tokens(turn)
        kept.insert(0, turn)
        room -= size
    dropped = len(turns) - len(kept)
    if dropped:
        note = f"\n\n[{dropped} earlier turn(s) were dropped to fit the context window.]"
        head[-1] = {**head[-1], "content": (head[-1].get("content") or "") + note}
    fitted = head + [m for turn in kept for m in turn]

    # 4. Last resort: trim the largest message until it fits.
    while total_tokens(fitted) > budget:
        largest = max(range(len(fitted)), key=lambda i: tokens(fitted[i]))
        excess = total_tokens(fitted) - budget
        new_size = max(tokens(fitted[largest]) - excess - 16, MESSAGE_OVERHEAD + 1)
        trimmed = _trim(fitted[largest], new_size)
        if trimmed is fitted[largest] or tokens(trimmed) >= tokens(fitted[largest]):
            break
        fitted[largest] = trimmed
    return fitted
