"""Condensing the findings for the reporter (step 6a): when the steps'
findings do not fit the reporter's context window together, each step's
are condensed by the model first (and again, up to ``CONDENSE_ROUNDS``
times), never cut off at the end.

A condensation is the model rewriting research, so it is held to what it
was given (issue 37): the model activity traces its statements against the
text it condensed (``keep_shown``), and one that states figures or names
that text lacks, by a report's bar, is not used (``invents``: SmolLM2-135M,
asked to condense a step's passages three rounds running, wrote "The Ocean
Life 2.0 … founded by Olvane Instruments Ltd in 2016", a venture and a year
no page gives, and the reporter then "stated" them from it): the workflow
shortens the text instead (``shortened``: whole paragraphs, the first ones).
Passages the workflow put in a step's place (its model wrote nothing, or
fiction: ``stands_for_findings``) are shortened so too, never given to a
model to rewrite: they are already the pages' own words, best first.
Each round is judged against the text it was given, so a chain of rounds
holds only what the findings held.

``invents``, ``stands_for_findings`` and ``shortened`` are pure functions.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows.activity_calls import too_large
from workflows.box import Box
from workflows.statements import invented_too_much

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.evidence_models import NOT_FOUND, NOTHING_WRITTEN
    from workflows.models import Message, ModelReply, ModelRequest

PATCH = "condense-holds-to-findings"  # recorded runs used every condensation, and condensed passages too
CONDENSE_ROUNDS = 3
CHARS_PER_TOKEN = 3  # a shortened text's characters per token of its share (on the safe side)
CUT = "…"


def oversized(err: ActivityError) -> tuple[int, int] | None:
    """(tokens, budget) when the model activity refused an oversized request."""
    refused = too_large(err)
    return refused[:2] if refused else None


async def condense_all(box: Box, findings: list[tuple[str, str]], tokens: int, budget: int) -> list[tuple[str, str]]:
    """Each step's findings condensed so that together they take about half
    of the reporter's budget, steps side by side."""
    share = max(budget // 2 // max(len(findings), 1), 60)  # tokens per step
    texts = await asyncio.gather(*(_condense(box, text, share) for _, text in findings))
    return [(title, text) for (title, _), text in zip(findings, texts)]


async def _condense(box: Box, text: str, tokens: int, depth: int = 0) -> str:
    """``text`` condensed to about ``tokens`` tokens; a text too long for one
    call is split in parts (by characters), each condensed, then joined."""
    held = workflow.patched(PATCH)
    if held and stands_for_findings(text):
        return shortened(text, tokens)
    request = ModelRequest(
        role="reporter",
        prompt="condense",
        variables=box.variables(max_words=max(int(tokens * 0.7), 40)),
        messages=[Message(role="user", content=text)],
        on_overflow="refuse" if depth < 2 else "trim",
        keep_shown=held,  # its statements traced against ``text`` (ModelReply.support)
        topic=box.state.topic if held else "",
    )
    try:
        reply = await box.calls.chat(request, "reporter · condensing findings")
    except ActivityError as err:
        too_big = oversized(err)
        if too_big is None:
            raise
        parts = min(max(-(-too_big[0] // too_big[1]) + 1, 2), 16)
        size = -(-len(text) // parts)
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        condensed = await asyncio.gather(*(_condense(box, p, max(tokens // parts, 40), depth + 1) for p in pieces))
        return "\n".join(condensed)
    if not held:
        return reply.content or text[: tokens * CHARS_PER_TOKEN]
    if invents(reply):
        box.emit("notice", "the condensed findings state what the findings do not: shortened instead")
        return shortened(text, tokens)
    return reply.content if reply.content.strip() else shortened(text, tokens)


def invents(reply: ModelReply) -> bool:
    """Whether a condensation states figures or names that the text it
    condensed lacks, by a report's bar (``statements.invented_too_much``:
    a real share of its statements invented, half of a short one's, or
    none of them found in that text). A faithful one keeps the findings'
    own figures and names or computes from them (derived, not invented);
    a terse line the check cannot trace ("Margin 16.9 % (£4.4m of £26.0m)")
    among faithful ones is no reason to drop it. A reply too long to judge
    (``judged`` False) is taken as written."""
    return bool(reply.judged and reply.support and invented_too_much(reply.support))


def stands_for_findings(text: str) -> bool:
    """Whether ``text`` is the passages the workflow put in place of a step's
    findings (``activities/evidence.support_of``): the pages' own words."""
    return text.startswith(NOT_FOUND) or NOTHING_WRITTEN in text


def shortened(text: str, tokens: int) -> str:
    """``text`` cut to about ``tokens`` tokens by the workflow: its first
    paragraphs whole, as many as fit (a findings text puts its note first
    and its best passages next); the first cut at a line or a sentence end
    when not even it fits."""
    limit = max(tokens * CHARS_PER_TOKEN, 80)
    if len(text) <= limit:
        return text
    kept, used = [], 0
    for paragraph in text.split("\n\n"):
        if used + len(paragraph) + 2 > limit:
            break
        kept.append(paragraph)
        used += len(paragraph) + 2
    if kept:
        return "\n\n".join(kept) + f"\n\n{CUT}"
    head = text[:limit]
    end = max(head.rfind("\n"), head.rfind(". "))
    return (head[: end + 1] if end > limit // 2 else head).rstrip() + f" {CUT}"
