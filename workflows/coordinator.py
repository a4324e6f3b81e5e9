"""Step 1 of the flow, the coordinator: answers small talk, declines harmful
requests, or hands the research topic to the planner; in clarification mode
it may first ask the user questions.

``coordination`` is the decision, a pure function of the model's reply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from temporalio import workflow

from workflows.box import Box

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.languages import locale_tag
    from workflows.model_output import read_arguments
    from workflows.models import Message, ModelReply, ModelRequest

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
        reply = await box.calls.chat_said(
            ModelRequest(
                role="coordinator",
                prompt="coordinator",
                variables=variables,
                history=history,
                messages=messages,
                tools=tools,
            ),
            "coordinator",
        )
        decision = coordination(reply, r.question, may_ask=may_ask)
        if decision.kind != "ask":
            if clarify and asked and decision.kind == "answer":
                # Out of questions: research what the user has told us.
                return Coordination("handoff", topic="\n".join(transcript))
            return decision
        asked += 1
        answer = await ask_user(decision.text)
        transcript += [f"Q: {decision.text}", f"A: {answer}"]
        history, messages = reply.history, [Message(role="user", content=answer)]


def coordination(reply: ModelReply, question: str, may_ask: bool = False) -> Coordination:
    """What the coordinator decided. With no tool call the reply is an answer
    (or, in clarification mode, a question for the user)."""
    for call in reply.tool_calls:
        args, _ = read_arguments(call.arguments)  # the activity repaired what it could
        if call.name in HANDOFF_TOOLS:
            topic = str(args.get("research_topic") or "").strip() or question
            return Coordination("handoff", topic=topic, locale=locale_tag(args.get("locale")))
        if call.name == "decline_request":
            return Coordination("decline", text=str(args.get("reply") or reply.content).strip())
    return Coordination("ask" if may_ask else "answer", text=reply.content.strip())
