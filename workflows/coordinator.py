"""Step 1 of the flow, the coordinator: answers small talk, declines harmful
requests, or hands the research topic to the planner; in clarification mode
it may first ask the user questions.

``coordination`` is the decision, a pure function of the model's reply and
the user's question. A weak model must not lose the question
(``workflows/topics.py``): a hand-off topic that is not about the question
(a schema description, a date) is replaced by the question, a locale in
another script than the question's by the question's, and a reply in prose
answers only small talk: prose on anything else hands the question off, so
that research happens. Only ``decline_request`` with a refusal declines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from temporalio import workflow

from workflows.box import Box
from workflows.reply_checks import AGAIN, is_echo, unechoed

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.languages import locale_tag
    from workflows.model_output import read_arguments
    from workflows.models import Message, ModelReply, ModelRequest
    from workflows.topics import SCHEMA_TEXTS, about_question, locale_for, normal, small_talk

HANDOFF_TOOLS = ("handoff_to_planner", "handoff_after_clarification")


@dataclass(frozen=True)
class Coordination:
    kind: Literal["handoff", "answer", "decline", "ask"]
    text: str = ""  # the answer, refusal or question
    topic: str = ""
    locale: str | None = None


async def coordinate(box: Box, ask_user: Callable[[str], Awaitable[str]]) -> Coordination:
    """The coordinator's decision, after up to ``max_clarification_rounds``
    questions answered through ``ask_user``."""
    r = box.request
    clarify = r.enable_clarification and r.max_clarification_rounds > 0
    tools = ["handoff_after_clarification" if clarify else "handoff_to_planner", "decline_request"]
    messages = [Message(role="user", content=r.question)]
    history, asked, transcript = None, 0, [r.question]
    while True:
        may_ask = clarify and asked < r.max_clarification_rounds
        variables = box.variables(
            clarify=may_ask,
            rounds_used=asked,
            max_rounds=r.max_clarification_rounds,
            rounds_left=r.max_clarification_rounds - asked,
        )
        request = ModelRequest(
            role="coordinator",
            prompt="coordinator",
            variables=variables,
            history=history,
            messages=messages,
            tools=tools,
        )
        reply = await box.calls.chat_said(request, "coordinator")
        again = await unechoed(box.calls, request, reply, AGAIN["coordinator"], "coordinator")
        if again is not reply:  # it repeated its instructions and was asked again
            if is_echo(again) or not (again.content.strip() or again.tool_calls):
                # Its own instructions twice (or then nothing): research what the user asked.
                box.emit("notice", "the coordinator's replies repeated its instructions: researching the question")
                return Coordination("handoff", topic="\n".join(transcript) if asked else r.question)
            reply = again
        decision = coordination(reply, r.question, may_ask=may_ask)
        before = coordination(reply, r.question, may_ask=may_ask, strict=False)
        if decision != before and not workflow.patched("coordinator-keeps-question"):
            decision = before  # a run recorded before the question was kept
        if decision.kind != "ask":
            fell_back = decision.kind == "handoff" and decision.topic == r.question
            if clarify and asked and (decision.kind == "answer" or fell_back):
                # Out of questions: research what the user has told us.
                return Coordination("handoff", topic="\n".join(transcript), locale=decision.locale)
            return decision
        asked += 1
        answer = await ask_user(decision.text)
        transcript += [f"Q: {decision.text}", f"A: {answer}"]
        history, messages = reply.history, [Message(role="user", content=answer)]


def coordination(reply: ModelReply, question: str, may_ask: bool = False, strict: bool = True) -> Coordination:
    """What the coordinator decided. With no tool call the reply is an answer
    to small talk (or, in clarification mode, a question for the user); prose
    on anything else hands the question off. ``strict=False``: the decision
    as made before the question was kept (for recorded runs)."""
    for call in reply.tool_calls:
        args, _ = read_arguments(call.arguments)  # the activity repaired what it could
        if call.name in HANDOFF_TOOLS:
            topic = str(args.get("research_topic") or "").strip()
            locale = locale_tag(args.get("locale"))
            if not strict:
                return Coordination("handoff", topic=topic or question, locale=locale)
            kept = topic if about_question(topic, question) else question
            return Coordination("handoff", topic=kept, locale=locale_for(locale, question))
        if call.name == "decline_request":
            refusal = str(args.get("reply") or reply.content).strip()
            if strict and (not refusal or normal(refusal) in SCHEMA_TEXTS):
                return Coordination("handoff", topic=question, locale=None)  # not a refusal
            return Coordination("decline", text=refusal)
    if may_ask:
        return Coordination("ask", text=reply.content.strip())
    if strict and not small_talk(question):
        return Coordination("handoff", topic=question)  # a research question answered in prose
    return Coordination("answer", text=reply.content.strip())
