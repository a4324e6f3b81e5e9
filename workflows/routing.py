"""Routing decisions of the research flow, as small pure functions.

No Temporal calls here: these are tested on their own and called by the
workflow.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError
from temporalio import workflow

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    import json_repair

    from workflows.models import Citation, ModelReply, Plan, ResearchInput

ACCEPT = "[ACCEPTED]"
EDIT = "[EDIT_PLAN]"


# --- input -------------------------------------------------------------------


def input_problem(raw: object) -> str | None:
    """None if ``raw`` is valid run settings, else one line naming the problem."""
    try:
        ResearchInput.model_validate(raw)
    except ValidationError as err:
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in err.errors()[:5])
    return None


# --- human review ----------------------------------------------------------


class InvalidReview(ValueError):
    pass


@dataclass(frozen=True)
class Review:
    accepted: bool
    edit: str = ""  # the requested change when not accepted


def parse_review(feedback: str) -> Review:
    """``[ACCEPTED]`` or ``[EDIT_PLAN] <text>`` (case-insensitive); anything
    else raises InvalidReview with a message for the user."""
    if not isinstance(feedback, str):
        raise InvalidReview("review feedback must be a string")
    text = feedback.strip()
    upper = text.upper()
    if upper.startswith(ACCEPT):
        return Review(accepted=True)
    if upper.startswith(EDIT):
        change = text[len(EDIT) :].strip()
        if not change:
            raise InvalidReview(f"{EDIT} needs the requested change after it, e.g. '{EDIT} add a step on costs'")
        return Review(accepted=False, edit=change)
    shown = text[:40] + ("…" if len(text) > 40 else "")
    raise InvalidReview(f"feedback must start with {ACCEPT} or {EDIT} <changes>; got {shown!r}")


# --- coordinator -------------------------------------------------------------


@dataclass(frozen=True)
class Coordination:
    kind: Literal["handoff", "answer", "decline", "ask"]
    text: str = ""  # the answer, refusal or question
    topic: str = ""
    locale: str | None = None


HANDOFF_TOOLS = ("handoff_to_planner", "handoff_after_clarification")


def coordination(reply: ModelReply, question: str, may_ask: bool = False) -> Coordination:
    """What the coordinator decided. With no tool call the reply is an answer
    (or, in clarification mode, a question for the user)."""
    for call in reply.tool_calls:
        args = _loads(call.arguments)
        if call.name in HANDOFF_TOOLS:
            topic = str(args.get("research_topic") or "").strip() or question
            return Coordination("handoff", topic=topic, locale=_locale(args.get("locale")))
        if call.name == "decline_request":
            return Coordination("decline", text=str(args.get("reply") or reply.content).strip())
    return Coordination("ask" if may_ask else "answer", text=reply.content.strip())


def _loads(arguments: str) -> dict:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        value = json_repair.loads(arguments or "{}")
    return value if isinstance(value, dict) else {}


_LOCALE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")


def _locale(value: object) -> str | None:
    text = str(value or "").strip().replace("_", "-")
    return text if _LOCALE.match(text) else None


# --- planner -------------------------------------------------------------


class PlanError(ValueError):
    pass


def parse_plan(text: str, max_step_num: int, locale: str) -> Plan:
    """Repair and validate the planner's JSON; cut steps beyond the limit."""
    cleaned = re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL | re.IGNORECASE)
    data = json_repair.loads(cleaned)
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]
    if not isinstance(data, dict) or not data:
        raise PlanError("the reply is not a JSON object with a plan")
    data.setdefault("locale", locale)
    try:
        plan = Plan.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'plan'}: {e['msg']}" for e in err.errors()[:5])
        raise PlanError(f"the plan does not match the schema: {problems}") from None
    if not plan.steps and not plan.has_enough_context:
        raise PlanError("the plan has no steps but has_enough_context is false")
    plan.steps = plan.steps[:max_step_num]
    return plan


# --- research team ---------------------------------------------------------


def batches(plan: Plan, parallel: bool) -> list[list[int]]:
    """Indexes of steps to run together. Consecutive research steps form one
    batch; processing and analysis steps wait for everything before them,
    and the steps after them wait for them. Sequential mode: one at a time."""
    todo = [i for i, step in enumerate(plan.steps) if step.execution_res is None]
    if not parallel:
        return [[i] for i in todo]
    groups: list[list[int]] = []
    for i in todo:
        if plan.steps[i].step_type == "research" and groups and _all_research(plan, groups[-1]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _all_research(plan: Plan, group: list[int]) -> bool:
    return all(plan.steps[i].step_type == "research" for i in group)


AGENT_FOR_STEP = {"research": "researcher", "processing": "coder", "analysis": "analyst"}


# --- report ------------------------------------------------------------------


_URL = re.compile(r"(?:https?|file)://[^\s)\]>\"'<]+")
_LINK = re.compile(r"\[([^\]]*)\]\(((?:https?|file)://[^\s)]+)\)")
UNVERIFIED = "[unverified source removed]"


def _key(url: str) -> str:
    return url.rstrip(".,;:").rstrip("/")


def cited(report: str, seen: list[Citation]) -> list[Citation]:
    """Sources the run actually retrieved and the report cites, in report order."""
    by_url = {_key(c.url): c for c in seen}
    out: list[Citation] = []
    for url in _URL.findall(report):
        source = by_url.pop(_key(url), None)
        if source:
            out.append(source)
    return out


def verify_citations(report: str, seen: list[Citation]) -> str:
    """Remove every URL the run never retrieved: a markdown link keeps its
    text and is marked unverified, a bare URL is replaced by a marker."""
    known = {_key(c.url) for c in seen}

    def link(match: re.Match) -> str:
        text, url = match.group(1), match.group(2)
        return match.group(0) if _key(url) in known else f"{text} {UNVERIFIED}"

    def bare(match: re.Match) -> str:
        url = match.group(0)
        trailing = url[len(url.rstrip(".,;:")) :]
        return url if _key(url) in known else UNVERIFIED + trailing

    return _URL.sub(bare, _LINK.sub(link, report))


# --- locale --------------------------------------------------------------------

_SCRIPTS = (
    (re.compile(r"[\u3040-\u30ff]"), "ja-JP"),  # kana before CJK: Japanese uses both
    (re.compile(r"[\uac00-\ud7af]"), "ko-KR"),
    (re.compile(r"[\u4e00-\u9fff]"), "zh-CN"),
    (re.compile(r"[\u0400-\u04ff]"), "ru-RU"),
    (re.compile(r"[\u0600-\u06ff]"), "ar-SA"),
)


def guess_locale(text: str) -> str:
    """A fallback when neither the user nor the coordinator gave a locale."""
    for pattern, locale in _SCRIPTS:
        if pattern.search(text):
            return locale
    return "en-US"
