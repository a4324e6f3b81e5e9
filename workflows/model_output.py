"""Reading what a model wrote: pure functions that return a value or a
readable error, and never raise, whatever the model sent.

A model can send anything: empty or huge text, NUL and other control
characters, lone UTF-16 surrogates (which no JSON encoder will write back),
an unclosed ``<think>``, arguments that are not JSON or nested a thousand
levels deep, plans of any shape. Raising on any of it inside workflow code
would fail the workflow task again and again and wedge the run, so:

- the model activity cleans every text it returns (``clean_text``) and
  repairs tool-call arguments and plans there (json-repair can be slow on
  hostile input; time in an activity is not limited as a workflow task is);
- the workflow reads arguments with ``read_arguments``: plain ``json.loads``,
  bounded in size, never raising.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from pydantic import ValidationError

from workflows.clean import SURROGATE, clean_deep, clean_text
from workflows.models import Plan

MAX_ARGUMENT_CHARS = 100_000  # tool-call arguments longer than this are refused
MAX_REPAIR_CHARS = 200_000  # text longer than this is not handed to json-repair
MAX_NESTING = 64  # JSON nested deeper than this is refused before parsing

_FENCE_LANGUAGE = re.compile(r"[A-Za-z0-9_-]*")


def strip_think(text: str) -> str:
    """Remove the reasoning some models put before their answer:
    ``<think>…</think>`` pairs, and everything before a lone ``</think>``
    (its opening tag went to the prompt). A reply that opens ``<think>`` and
    never closes it was cut off while thinking: nothing of it is the answer.
    A ``<think>`` anywhere else is the answer's own text and stays. Linear
    time whatever the text (no backtracking regex)."""
    lower = text.lower()
    if "think>" not in lower:
        return text.strip()
    kept: list[str] = []
    position = 0
    while True:
        opening = lower.find("<think>", position)
        if opening < 0:
            break
        closing = lower.find("</think>", opening + 7)
        if closing < 0:
            break
        kept.append(text[position:opening])
        position = closing + 8
    rest = text[position:]
    text, lower = "".join(kept) + rest, ("".join(kept) + rest).lower()
    lone = lower.rfind("</think>")
    if lone >= 0:
        text = text[lone + 8 :]
    if text.lstrip().lower().startswith("<think>"):
        return ""
    return text.strip()


def nesting_depth(text: str, limit: int = MAX_NESTING) -> int:
    """How deep brackets nest outside strings, counting up to ``limit + 1``."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth = max(depth - 1, 0)
    return deepest


def unfence(text: str) -> str:
    """What a code fence around the whole of ``text`` holds (its language
    word and the blank space around it left out), else ``text``. String
    operations, linear whatever the text: the regular expression this
    replaces took minutes on a fence followed by spaces."""
    whole = text.strip()
    if len(whole) < 6 or not (whole.startswith("```") and whole.endswith("```")):
        return text
    inner = whole[3:-3]
    language = _FENCE_LANGUAGE.match(inner)  # one pass over a class: linear
    return inner[language.end() :].strip()


def load_json(text: str, repair: bool = True) -> tuple[Any, str | None]:
    """The JSON value in ``text`` (code fences and ``<think>`` removed;
    repaired with json-repair when ``repair``), or None and the reason."""
    text = unfence(strip_think(clean_text(text))).strip()
    if not text:
        return None, "the reply is empty"
    if len(text) > MAX_REPAIR_CHARS:
        return None, f"the reply is too long ({len(text):,} characters) to be read as JSON"
    if nesting_depth(text) > MAX_NESTING:
        return None, f"the JSON is nested more than {MAX_NESTING} levels deep"
    try:
        return clean_deep(json.loads(text)), None
    except (ValueError, RecursionError):
        pass
    if not repair:
        return None, "it is not valid JSON"
    try:
        import json_repair

        value = json_repair.loads(text)
    except Exception as err:  # json-repair has raised ValueError and RecursionError on hostile input
        return None, f"it is not valid JSON ({type(err).__name__})"
    if value in ("", None):
        return None, "it is not valid JSON"
    return clean_deep(value), None


def repair_arguments(raw: object) -> str:
    """A tool call's arguments as a JSON object text, repaired where that is
    possible, else the cleaned original text (``read_arguments`` then
    explains the problem to the model)."""
    text = clean_text(raw).strip()
    if not text:
        return "{}"
    if len(text) > MAX_ARGUMENT_CHARS:
        return text
    value, problem = load_json(text)
    if problem is None and isinstance(value, dict):
        return text if _is_plain_json_object(text) else json.dumps(value, ensure_ascii=False)
    return text


# A well-formed HTML character reference (numeric, or named with its ";").
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# Arguments that are text to search or a URL: a model that writes them
# HTML-escaped (``Lantern Rock&#39;s keeper``, ``?a=1&amp;b=2``) means the
# characters. Code (run_python) and any other tool's arguments stay as written.
PLAIN_TEXT_ARGUMENTS = ("query", "url", "research_topic")


def unescape_entities(arguments: str) -> str:
    """Tool-call arguments (a JSON object text) with the HTML character
    references in their query, URL or topic replaced by the characters."""
    if "&" not in arguments or len(arguments) > MAX_ARGUMENT_CHARS or nesting_depth(arguments) > MAX_NESTING:
        return arguments
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if not isinstance(value, dict):
        return arguments
    escaped = [k for k in PLAIN_TEXT_ARGUMENTS if isinstance(value.get(k), str) and _ENTITY.search(value[k])]
    for key in escaped:
        value[key] = clean_text(_ENTITY.sub(lambda m: html.unescape(m.group()), value[key]))
    return json.dumps(value, ensure_ascii=False) if escaped else arguments


def _is_plain_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict) and not SURROGATE.search(text)
    except (ValueError, RecursionError):
        return False


def read_arguments(raw: object) -> tuple[dict[str, Any], str | None]:
    """The arguments of a tool call as a dict, or {} and a readable error.
    Safe in workflow code: bounded ``json.loads``, no repair."""
    text = raw if isinstance(raw, str) else ""
    if not text.strip():
        return {}, None
    if len(text) > MAX_ARGUMENT_CHARS:
        return {}, f"the arguments are too long ({len(text):,} characters)"
    if nesting_depth(text) > MAX_NESTING:
        return {}, f"the arguments are nested more than {MAX_NESTING} levels deep"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}, "the arguments are not valid JSON"
    if not isinstance(value, dict):
        return {}, "the arguments must be a JSON object"
    return clean_deep(value), None


def text_argument(args: dict[str, Any], name: str, limit: int = 20_000) -> str | None:
    """A non-blank string argument (numbers are taken as text), at most
    ``limit`` characters; None when missing, blank or of another type."""
    value = args.get(name)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        return None
    return clean_text(value)[:limit]


# --- plans -------------------------------------------------------------------


class PlanReading:
    """What ``read_plan`` made of a reply: a plan, or the reason it is not one,
    and the titles of steps cut beyond the limit."""

    __slots__ = ("plan", "problem", "cut")

    def __init__(self, plan: Plan | None, problem: str | None = None, cut: list[str] | None = None) -> None:
        self.plan, self.problem, self.cut = plan, problem, cut or []


def read_plan(text: str, max_step_num: int, locale: str, topic: str = "", prompt: str = "") -> PlanReading:
    """Repair and validate the planner's JSON. A bare list of steps becomes a
    plan; a step without a type is research when it needs search, else
    analysis; missing titles come from the topic; steps beyond
    ``max_step_num`` are cut (and named in ``cut``). A plan that copies
    ``prompt`` (the planner's instructions, as the model saw them: its
    example's placeholders) is no plan."""
    data, problem = load_json(text)
    if problem:
        return PlanReading(None, problem)
    if isinstance(data, list):
        if data and all(isinstance(item, (dict, str)) and "steps" not in item for item in data):
            data = {"steps": data}  # a bare list of steps
        elif data and isinstance(data[0], dict):
            data = data[0]
    if not isinstance(data, dict) or not data:
        return PlanReading(None, "the reply is not a JSON object with a plan")
    data.setdefault("locale", locale)
    if not str(data.get("title") or "").strip():
        data["title"] = topic.strip().splitlines()[0][:200] if topic.strip() else "Research plan"
    steps = data.get("steps")
    if isinstance(steps, (dict, str)):
        steps = data["steps"] = [steps]
    if isinstance(steps, list):
        # A weak model writes steps as plain strings: each is a research step.
        steps = data["steps"] = [{"description": s} if isinstance(s, str) else s for s in steps if s != ""]
        for n, step in enumerate(steps):
            if isinstance(step, dict):
                _complete_step(step, n, data["title"])
    try:
        plan = Plan.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'plan'}: {e['msg']}" for e in err.errors()[:5])
        return PlanReading(None, f"the plan does not match the schema: {problems}")
    except (ValueError, TypeError, RecursionError) as err:
        return PlanReading(None, f"the plan could not be read: {type(err).__name__}")
    if not plan.steps and not plan.has_enough_context:
        return PlanReading(None, "the plan has no steps but has_enough_context is false")
    if prompt and (copied := plan_copies(plan, prompt)):
        return PlanReading(None, f"the plan is not about the question: {copied}")
    cut = [s.title for s in plan.steps[max_step_num:]]
    plan.steps = plan.steps[:max_step_num]
    return PlanReading(plan, None, cut)


def plan_copies(plan: Plan, prompt: str) -> str | None:
    """Why ``plan`` is its prompt's text rather than a plan (its example's
    placeholders: "a short title for the research", "what to find out,
    precisely"), or None (``workflows/echoes.py``)."""
    from workflows.echoes import copies_prompt

    steps = [[s.title, s.description] for s in plan.steps]
    return copies_prompt([plan.title, plan.thought], steps, prompt)


def _complete_step(step: dict, n: int, plan_title: str) -> None:
    if not str(step.get("title") or "").strip():
        step["title"] = str(step.get("description") or "").strip()[:80] or f"{plan_title}: step {n + 1}"
    if not str(step.get("step_type") or "").strip():
        needs_search = step.get("need_search", step.get("need_web_search", True))
        step["step_type"] = "research" if needs_search in (True, "true", "True", 1) else "analysis"


# --- podcast scripts -----------------------------------------------------------


def read_podcast_script(text: str, locale: str = "en-US") -> tuple[dict[str, Any] | None, str | None]:
    """The podcast script in a reply (``{"locale", "lines": [{"speaker",
    "paragraph"}]}``; a bare list of lines is accepted, ``text`` for
    ``paragraph`` too), validated; or None and the reason."""
    from workflows.side_models import PodcastScript

    data, problem = load_json(text)
    if problem:
        return None, problem
    if isinstance(data, list):
        data = {"lines": data}
    if not isinstance(data, dict):
        return None, "the reply is not a JSON object with lines"
    data.setdefault("locale", locale)
    lines = data.get("lines")
    if isinstance(lines, list):
        data["lines"] = [
            {**line, "paragraph": line.get("paragraph") or line.get("text") or ""} if isinstance(line, dict) else line
            for line in lines
        ]
        data["lines"] = [
            line for line in data["lines"] if not isinstance(line, dict) or str(line.get("paragraph") or "").strip()
        ]
    try:
        script = PodcastScript.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'script'}: {e['msg']}" for e in err.errors()[:5])
        return None, f"the script does not match the schema: {problems}"
    except (ValueError, TypeError, RecursionError) as err:
        return None, f"the script could not be read: {type(err).__name__}"
    return script.model_dump(), None
