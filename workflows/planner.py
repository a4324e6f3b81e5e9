"""Step 3 of the flow, the planner: a JSON plan of at most ``max_step_num``
steps, revised on the user's edits and asked again after each round of
research (replanning). Its conversation lives in the run's state.

``parse_plan`` is the decision, a pure function of the model's reply: the
JSON is repaired and validated; a reply that is still not a plan is asked
for once more with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import ValidationError
from temporalio import workflow

from workflows.box import Box

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    import json_repair

    from workflows.models import Message, ModelRequest, Plan
    from workflows.state import RunState


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Planned:
    plan: Plan | None  # None: no valid plan after asking twice
    failure: str = ""  # why, for the result


def begin(state: RunState) -> None:
    """The planner's first request: the topic and what the background
    investigation found."""
    context = f"\n\n# Background investigation\n{state.background}" if state.background else ""
    state.planner_pending = [Message(role="user", content=f"# Research question\n{state.topic}{context}")]


def edit(state: RunState, change: str) -> None:
    state.planner_pending.append(
        Message(role="user", content=f"The user reviewed the plan and asks for changes: {change}\nRevise the plan.")
    )


def replan(state: RunState, findings: str) -> None:
    state.planner_pending.append(
        Message(
            role="user",
            content=f"# Findings so far\n{findings}\n\nDo these findings answer the question? "
            "If not, plan the next steps.",
        )
    )


async def next_plan(box: Box) -> Planned:
    r, state = box.request, box.state
    failure = ""
    for _ in range(2):
        reply = await box.calls.chat(
            ModelRequest(
                role="planner",
                prompt="planner",
                reasoning=r.enable_deep_thinking,
                variables=box.variables(max_step_num=r.max_step_num),
                history=state.planner_history,
                messages=state.planner_pending,
                json_mode=True,
            )
        )
        state.planner_history, state.planner_pending = reply.history, []
        try:
            return Planned(parse_plan(reply.content, r.max_step_num, state.locale))
        except PlanError as err:
            failure = f"The planner did not produce a valid plan: {err}"
            state.planner_pending = [
                Message(role="user", content=f"That reply was not a valid plan: {err}. Reply with the JSON plan only.")
            ]
    return Planned(None, failure)


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
