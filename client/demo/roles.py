"""The demo model's rules: one deterministic reply per role, from the
messages and tools of the request alone (see ``client/demo/model.py``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from client.demo import reading
from client.demo import text as tx

ROLES = (
    "coordinator",
    "planner",
    "researcher",
    "coder",
    "analyst",
    "reporter",
    "followup",
    "editor",
    "podcast",
    "slides",
    "prose",
)
GREETINGS = ("hello", "hi", "hey", "good morning", "good evening", "你好")
COMPUTE_WORDS = (
    "compute",
    "calculate",
    "average",
    "mean",
    "percentage",
    "per cent",
    "percent",
    "growth",
    "grow",
    "rate",
    "total",
    "sum",
    "计算",
    "平均",
    "增长",
)


@dataclass
class Turn:
    role: str
    content: str = ""
    tool_calls: list[tuple[str, dict]] = field(default_factory=list)


def play(request: dict) -> Turn:
    role = role_of(request)
    return ACTORS.get(role, other)(request, role)


# -- reading the request ----------------------------------------------------------


def content_text(content: object) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def messages(request: dict) -> list[dict]:
    return [m for m in request.get("messages") or [] if isinstance(m, dict)]


def role_of(request: dict) -> str:
    """The role named on the system prompt's first line, else guessed from
    the tools offered."""
    system = next((m for m in messages(request) if m.get("role") == "system"), None)
    first_line = content_text(system.get("content")).split("\n", 1)[0].lower() if system else ""
    named = next((w for w in re.findall(r"[a-z]+", first_line) if w in ROLES), None)
    if named:
        return named
    tools = tool_names(request)
    if "handoff_to_planner" in tools:
        return "coordinator"
    if "web_search" in tools:
        return "researcher"
    if "run_python" in tools:
        return "coder"
    return "reporter"


def tool_names(request: dict) -> list[str]:
    names = []
    for tool in request.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def user_texts(request: dict) -> list[str]:
    return [content_text(m.get("content")) for m in messages(request) if m.get("role") == "user"]


def calls_made(request: dict) -> list[tuple[str, dict, str]]:
    """(tool name, arguments, result text) of every tool call in the conversation."""
    results = {
        m.get("tool_call_id"): content_text(m.get("content")) for m in messages(request) if m.get("role") == "tool"
    }
    made = []
    for message in messages(request):
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            made.append(
                (
                    function.get("name", ""),
                    arguments if isinstance(arguments, dict) else {},
                    results.get(call.get("id"), ""),
                )
            )
    return made


def locale_of(text: str) -> str:
    return "zh-CN" if tx.is_cjk(text) else "en-US"


# -- the roles ----------------------------------------------------------------------


def coordinator(request: dict, role: str) -> Turn:
    users = user_texts(request)
    question = (users[0] if users else "").strip()
    tools = tool_names(request)
    if question.lower().rstrip("!. ") in GREETINGS or (len(question) < 20 and question.lower().startswith(GREETINGS)):
        return Turn(role, "Hello! I am the scripted demo model. Ask me a research question.")
    topic = " ".join(question.split()) or "research"
    if "handoff_after_clarification" in tools and "handoff_to_planner" not in tools:
        return Turn(
            role, tool_calls=[("handoff_after_clarification", {"research_topic": topic, "locale": locale_of(topic)})]
        )
    if "handoff_to_planner" in tools:
        return Turn(role, tool_calls=[("handoff_to_planner", {"research_topic": topic, "locale": locale_of(topic)})])
    return Turn(role, json.dumps({"research_topic": topic, "locale": locale_of(topic)}))


def planner(request: dict, role: str) -> Turn:
    """The first plan from the question; a plan the user asked to change
    (the request's last message after an earlier plan) revised by
    ``revised``, or unchanged with a thought saying it could not be. Notes
    the user sent while the run ran (steers) are edits too: "add a step on
    …" adds one, to the plan or to the steps not started yet."""
    earlier = [m for m in messages(request) if m.get("role") == "assistant" and content_text(m.get("content"))]
    last = messages(request)[-1] if messages(request) else {}
    told = content_text(last.get("content"))
    if "# Steps not started yet" in told:  # revising them from a steer
        return Turn(role, json.dumps(revised_steps(told, tx.guidance_notes(told)), ensure_ascii=False))
    since = messages(request)[max((n for n, m in enumerate(messages(request)) if m in earlier), default=-1) + 1 :]
    replanning = any(content_text(m.get("content")).lstrip().startswith("# Findings") for m in since)
    steered = [n for text in user_texts(request) for n in tx.guidance_notes(text)]
    if steered and not earlier:  # the first plan, with the notes sent so far
        return Turn(role, json.dumps(with_notes(json.loads(first_plan(request, role).content), steered)))
    if earlier and last.get("role") == "user":
        try:
            plan = json.loads(content_text(earlier[-1].get("content")))
        except ValueError:
            plan = None
        asked = content_text(last.get("content"))
        if isinstance(plan, dict) and isinstance(plan.get("steps"), list):
            if replanning:  # asked to plan again after research (planner.replan)
                done = {"has_enough_context": True, "thought": "The scripted planner plans no further steps."}
                return Turn(role, json.dumps(plan | done, ensure_ascii=False))
            if tx.GUIDANCE in asked:  # notes sent while the plan was written: plan again with them
                return Turn(role, json.dumps(with_notes(plan, tx.guidance_notes(asked)), ensure_ascii=False))
            return Turn(role, json.dumps(revised(plan, asked), ensure_ascii=False))  # the user's edit
    return first_plan(request, role)


def first_plan(request: dict, role: str) -> Turn:
    question = tx.question_of(user_texts(request))
    locale = locale_of(question)
    steps = [
        {"need_search": True, "title": part, "description": part, "step_type": "research"}
        for part in tx.split_question(question)
    ]
    if any(word in question.lower() for word in COMPUTE_WORDS):
        steps.append(
            {
                "need_search": False,
                "title": "Compute the figures asked for",
                "description": f"From the figures found, compute what the question asks: {question}",
                "step_type": "processing",
            }
        )
    plan = {
        "locale": locale,
        "has_enough_context": False,
        "thought": "A scripted plan: search for the question, read the best pages, compute if asked.",
        "title": tx.clip(question, 120),
        "steps": steps,
    }
    return Turn(role, json.dumps(plan, ensure_ascii=False))


def with_notes(plan: dict, notes: list[str]) -> dict:
    """The plan with each steer's note applied as an edit ("add a step on …")."""
    for note in notes:
        plan = revised(plan, f"asks for changes: {note}")
    return plan


def revised_steps(message: str, notes: list[str]) -> dict:
    """The steps not started yet (the re-planner's request), with the notes
    applied; unchanged when none is an edit the demo understands."""
    listed = message.split("# Steps not started yet", 1)[1].split(f"# {tx.GUIDANCE}", 1)[0]
    try:
        steps = json.loads(listed)
    except ValueError:
        steps = []
    plan = {"locale": "en-US", "has_enough_context": False, "title": "Steps not started", "steps": steps}
    return with_notes(plan, notes)


_ADD = re.compile(
    r"\badd(?:\s+(?:a|an|one|another))?(?:\s+(?:research\s+)?step)?(?:\s+(?:on|about|for|to|that|covering))?\s+([^\n]{3,300})",
    re.I,
)
_REMOVE = re.compile(r"\b(?:remove|drop|delete|skip)\s+(?:the\s+)?step\s+(\d{1,2})\b", re.I)


def revised(plan: dict, message: str) -> dict:
    """The plan with the user's edit applied, when it is one the demo
    planner understands ("add a step on …", "remove step 2"); otherwise the
    same plan, its thought saying plainly that the edit was not applied."""
    change = message.split("asks for changes:", 1)[-1].strip().split("\n", 1)[0].strip()  # planner.edit's wording
    steps = [step for step in plan["steps"] if isinstance(step, dict)]
    done = []
    for number in sorted({int(n) for n in _REMOVE.findall(change)}, reverse=True):
        if 1 <= number <= len(steps):
            done.append(f"removed step {number} ({steps.pop(number - 1).get('title', '')})")
    if added := _ADD.search(_REMOVE.sub("", change)):
        topic = added.group(1).strip().rstrip(".!")
        research = [n for n, step in enumerate(steps) if step.get("step_type") != "processing"]
        at = research[-1] + 1 if research else 0  # research before the computations that need it
        steps.insert(at, {"need_search": True, "title": topic[:1].upper() + topic[1:], "description": topic,
                          "step_type": "research"})  # fmt: skip
        done.append(f"added a step on {topic}")
    if done:
        thought = f"Revised as asked: {'; '.join(done)}."
    else:
        thought = (
            f"The scripted demo planner could not apply this edit and left the plan as it was: {tx.clip(change, 200)}. "
            'It understands only "add a step on …" and "remove step N"; a real model reads any edit.'
        )
    return plan | {"steps": steps, "thought": thought}


def researcher(request: dict, role: str) -> Turn:
    """Local documents, then the web: search the step (unless its request
    already shows passages found for it), read the best pages, search once
    more for what the best sentence names and the step does not, then write
    the findings from everything read, its own request's passages included."""
    tools = tool_names(request)
    made = calls_made(request)
    users = user_texts(request)
    step = tx.step_of(users)
    query = tx.clip(" ".join(step.split()), 300)
    names = [name for name, _, _ in made]
    shown = bool(reading.documents([], users, skip=reading.EARLIER))  # evidence gathered before the first turn
    searches = names.count("web_search") + (1 if shown else 0)
    if "local_search" in tools and "local_search" not in names:
        return Turn(role, tool_calls=[("local_search", {"query": tx.keywords_query(query)})])
    if "web_search" in tools and not searches:
        return Turn(role, tool_calls=[("web_search", {"query": query})])
    crawled = [args.get("url") for name, args, _ in made if name == "crawl"]
    for name, args, result in made:
        if name == "crawl" and tx.is_long_page(result) and "find_in_page" in tools:
            url = args.get("url")
            if not any(n == "find_in_page" and a.get("url") == url for n, a, _ in made):
                return Turn(role, tool_calls=[("find_in_page", {"url": url, "query": tx.keywords_query(query)})])
    if "crawl" in tools:
        for url in tx.crawl_targets(made, first=2 if shown else 4):  # shown: its search is the second
            if url not in crawled:
                return Turn(role, tool_calls=[("crawl", {"url": url})])
    if "web_search" in tools and searches == 1 and (entity := reading.next_entity(query, made, users)):
        return Turn(role, tool_calls=[("web_search", {"query": tx.clip(entity, 300)})])
    if "web_search" in tools and searches in (1, 2) and (part := reading.uncovered_part(query, made, users)):
        if part not in [args.get("query") for name, args, _ in made if name == "web_search"]:
            return Turn(role, tool_calls=[("web_search", {"query": tx.clip(part, 300)})])
    second = [args.get("query", "") for name, args, _ in made if name == "web_search"][0 if shown else 1 :][:1]
    return Turn(role, reading.findings(query, made, users, extra=_name_in(second[0]) if second else ""))


def _name_in(query: str) -> str:
    """The name a second search added (its capitalised words): what the step
    turned out to be about ("the capital" is Tessary)."""
    return " ".join(w for w in str(query).split() if w[:1].isupper())


def coder(request: dict, role: str) -> Turn:
    made = calls_made(request)
    if "run_python" not in tool_names(request):
        return Turn(role, "No code could run here; the figures are in the findings above.")
    runs = [(args, result) for name, args, result in made if name == "run_python"]
    if not runs:
        material = "\n".join(user_texts(request))
        return Turn(role, tool_calls=[("run_python", {"code": tx.program_for(material)})])
    output = runs[-1][1].strip()
    return Turn(
        role, f"## Computation\n\nThe program computed from the figures in the findings:\n\n```\n{output}\n```\n"
    )


def reporter(request: dict, role: str) -> Turn:
    return Turn(role, tx.report(user_texts(request)))


def followup(request: dict, role: str) -> Turn:
    """A follow-up question on a finished run: the findings it is given that
    answer it, cited; else the marker its prompt names for "research more"."""
    system = next((content_text(m.get("content")) for m in messages(request) if m.get("role") == "system"), "")
    marker = next(iter(re.findall(r"reply with `([^`\n]{1,40})`", system)), "[NEEDS_RESEARCH]")
    return Turn(role, tx.follow_up_answer("\n\n".join(user_texts(request)), marker))


def other(request: dict, role: str) -> Turn:
    """Editor, analyst and the side outputs: the given text, kept short."""
    material = "\n".join(user_texts(request))
    if role == "editor":
        return Turn(role, tx.clip(material, 4000))
    if role == "analyst":
        return Turn(role, "## Analysis\n\n" + tx.clip(material, 2000))
    return Turn(role, tx.clip(material, 2000) or "Nothing to say.")


ACTORS = {
    "coordinator": coordinator,
    "planner": planner,
    "researcher": researcher,
    "coder": coder,
    "reporter": reporter,
    "followup": followup,
}
