"""The messages of a model request as sent: each blob-backed message (a
crawled page, a long tool output, a step's evidence) shown as what fits its
share of the window (``activities/reading.py``), and each passage once.

A message leaves out the passages the messages before it showed
(``activities/seen.py``): a page the step's evidence already quoted, crawled
again by the model, answers with what is new or a short note; evidence that
comes after the model read its pages itself brings only the rest. When the
conversation must still be cut to fit the window (``activities/context.py``),
what an earlier message showed may be cut away, so then every message shows
its own, as before.

Pure functions; called by the model activity off the event loop.
"""

from __future__ import annotations

import json
from typing import Any

from activities import context, reading, tokens
from activities.seen import Seen
from workflows.models import Message


def messages(conversation: list[Message], blobs: dict[str, str], share: int, budget: int) -> list[dict[str, Any]]:
    """The conversation as API messages (no system prompt), each passage once
    when it fits ``budget`` so."""
    hints = reading_hints(conversation)
    seen = Seen()
    out = [api_message(m, blobs, share, hints, budget // 2, seen) for m in conversation]
    if context.total_tokens(out) > budget:
        out = [api_message(m, blobs, share, hints, budget // 2) for m in conversation]
    return out


def api_message(
    message: Message, blobs: dict[str, str], share: int, hints: str, room: int, seen: Seen | None = None
) -> dict[str, Any]:
    """One message as sent; with ``seen``, without the passages it holds
    (what earlier messages showed), and what this one shows added to it."""
    content = message.content
    if message.blob:
        body = blobs[message.blob]
        if message.role == "tool":  # long pages: what fits, where it is, how to read on
            body = reading.view(
                body, share, source=message.source or "", part=message.part, query=message.query, hints=hints, seen=seen
            )
        elif message.budget:  # an evidence set: its passages most relevant to the request
            body = reading.excerpt(body, min(message.budget, room), hints, seen)
        if seen is not None and (message.role == "tool" or message.budget):
            seen.add(body)
        content += body
    out: dict[str, Any] = {"role": message.role, "content": content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


def read_on(conversation: list[Message], blobs: dict[str, str], share: int, room: int) -> bool:
    """Whether some message shows a long text in part (something to read on
    with ``read_page`` and ``find_in_page``), not counting passages left out
    as shown before."""
    return any(_cut(m, blobs, share, room) for m in conversation)


def _cut(message: Message, blobs: dict[str, str], share: int, room: int) -> bool:
    if not message.blob:
        return False
    if message.role == "tool":
        return message.part is not None or message.query is not None or not reading.fits(blobs[message.blob], share)
    return bool(message.budget) and tokens.count(blobs[message.blob]) > max(min(message.budget or 0, room), 100)


def reading_hints(conversation: list[Message]) -> str:
    """What a long page is read for: the task (the first user message) and the
    queries the model searched with."""
    task = next((m.content for m in conversation if m.role == "user"), "")
    queries = []
    for message in conversation:
        for call in message.tool_calls:
            if call.name in ("web_search", "local_search", "find_in_page"):
                try:
                    queries.append(str(json.loads(call.arguments).get("query") or ""))
                except (ValueError, AttributeError):
                    pass
    return task[:4000] + "\n" + "\n".join(queries)
