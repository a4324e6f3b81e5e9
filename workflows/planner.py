"""Step 3 of the flow, the planner: a JSON plan of at most ``max_step_num``
steps, revised on the user's edits and asked again after each round of
research (replanning). Its conversation lives in the run's state.

The model activity reads the reply as a plan (``workflows.model_output.
read_plan``: repaired, validated, cut to the step limit); a reply that is
still not a plan is asked for once more with the reason. ``parse_plan`` reads
replies recorded before the activity did this, as the workflow did then.

A planner that said something but no usable plan even when asked again does
not end the run on its first plan: the question itself is a usable plan of
one research step (``question_plan``), and the run says so. Only a planner
that replied nothing at all, twice, ends the run as ``plan_failed`` (the
model is not answering; researching without it would fail the same way).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError
from temporalio import workflow

from workflows.box import Box

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    import json_repair

    from workflows.changes import for_planner
    from workflows.model_output import MAX_NESTING, MAX_REPAIR_CHARS, nesting_depth, strip_think
    from workflows.models import Message, ModelRequest, Plan, Step
    from workflows.prior import planner_context
    from workflows.state import RunState


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Planned:
    plan: Plan | None  # None: no valid plan after asking twice
    failure: str = ""  # why, for the result
    steps_cut: tuple[str, ...] = ()  # titles of steps beyond the limit
    said_something: bool = False  # a reply with text, though no usable plan
    problem: str = ""  # what was wrong with the last reply


def begin(state: RunState, question: str) -> None:
    """The planner's first request: the topic, the user's own question and
    every clarification word for word (whatever the coordinator's hand-off
    kept of them), and what the background investigation found."""
    parts = [f"# Research question\n{state.topic}"]
    if state.clarifications:
        asked = "\n".join(f"- Q: {c.question}\n  A: {c.answer}" for c in state.clarifications)
        parts.append(f"# The user's original question\n{question}\n\n# Clarifications from the user\n{asked}")
    elif question.strip() != state.topic.strip():
        parts.append(f"# The user's original question\n{question}")
    if state.prior:
        parts.append(planner_context(state.prior))
    if state.recheck:  # what re-reading its sources found (workflows/recheck.py)
        parts.append(for_planner(state.recheck))
    if state.background:
        parts.append(f"# Background investigation\n{state.background}")
    state.planner_pending = [Message(role="user", content="\n\n".join(parts))]


def edit(state: RunState, change: str, max_steps: int) -> None:
    state.planner_pending.append(
        Message(
            role="user",
            content=f"The user reviewed the plan and asks for changes: {change}\n"
            f"Revise the plan; it may have at most {max_steps} steps, so merge or drop steps if needed.",
        )
    )


def replan(state: RunState, findings: str, max_steps: int) -> None:
    state.planner_pending.append(
        Message(
            role="user",
            content=f"# Findings so far\n{findings}\n\nDo these findings answer the question? "
            f"If not, plan the next steps (at most {max_steps}).",
        )
    )


async def next_plan(box: Box) -> Planned:
    r, state = box.request, box.state
    failure, said, problem = "", False, None
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
                output="plan",
                max_steps=r.max_step_num,
                topic=state.topic,
            ),
            f"planner · plan {state.plan_version + 1}",
        )
        state.planner_history, state.planner_pending = reply.history, []
        said = said or bool(reply.content.strip())
        if reply.plan is not None:
            return Planned(reply.plan, steps_cut=tuple(reply.steps_cut))
        problem = reply.problem
        if problem is None:  # a reply recorded before the activity read plans
            try:
                return Planned(parse_plan(reply.content, r.max_step_num, state.locale))
            except PlanError as err:
                problem = str(err)
        failure = f"The planner did not produce a valid plan: {problem}"
        state.planner_pending = [
            Message(role="user", content=f"That reply was not a valid plan: {problem}. Reply with the JSON plan only.")
        ]
    return Planned(None, failure, said_something=said, problem=problem or "")


FALLBACK_NOTE = "the planner gave no usable plan ({why}): researching the question itself as one step"


def question_plan(question: str, locale: str) -> Plan:
    """The question as a plan of one research step."""
    first = " ".join(question.split())
    title = first if len(first) <= 120 else first[:119] + "…"
    return Plan(
        locale=locale,
        has_enough_context=False,
        thought="The planner gave no usable plan, so the question itself is researched as one step.",
        title=title,
        steps=[Step(need_search=True, title=title, description=question, step_type="research")],
    )


NOTHING_READ_NOTE = (
    "the planner says it has enough context, but nothing has been read in this run yet: researching its plan "
    "(or the question) first"
)


def may_end_research(state: RunState) -> bool:
    """Whether "enough context" may end the research: only with something read
    in this run (a page, or evidence a step gathered) or an earlier run to
    build on, never on the model's word alone."""
    read = any(not page.error for page in state.crawled.values()) or any(e.read for e in state.evidence)
    return read or state.prior is not None


def research_anyway(plan: Plan, question: str, locale: str) -> tuple[Plan, bool]:
    """A plan that claimed enough context with nothing read, made to research:
    its own steps, or the question as one step when it has none (then True)."""
    if plan.steps:
        return plan.model_copy(update={"has_enough_context": False}), False
    return question_plan(question, locale), True


def parse_plan(text: str, max_step_num: int, locale: str) -> Plan:
    """The plan in a reply recorded before the model activity read plans
    itself; PlanError when there is none. Never anything but PlanError."""
    if len(text or "") > MAX_REPAIR_CHARS or nesting_depth(text or "") > MAX_NESTING:
        raise PlanError("the reply is too long or too deeply nested to be a plan")
    try:
        cleaned = strip_think(text or "")
        data = json_repair.loads(cleaned)
    except Exception as err:
        raise PlanError(f"it is not valid JSON ({type(err).__name__})") from None
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
    except (ValueError, TypeError, RecursionError) as err:
        raise PlanError(f"the plan could not be read: {type(err).__name__}") from None
    if not plan.steps and not plan.has_enough_context:
        raise PlanError("the plan has no steps but has_enough_context is false")
    plan.steps = plan.steps[:max_step_num]
    return plan
