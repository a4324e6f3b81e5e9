"""A scripted model that plays every role of a research run, reacting to
what it is sent (so it proves what actually reached the model):

- coordinator: greets back on a greeting, otherwise hands off; in
  clarification mode it asks ``clarify_rounds`` questions first;
- planner: a research step and a processing step; an edit request adds the
  requested change as a new research step title;
- researcher: searches local documents when it may, then the web, crawls the
  first URL it was given, then reports every ``FACT:`` line it read (its
  tools' answers and the passages the workflow gave it) and the URLs it saw;
- coder: runs Python, then reports exactly what the code printed;
- reporter: writes a report quoting the findings and sources it was given
  (plus ``report_extra``, e.g. an invented citation).

Steers (notes sent while the run runs, workflows/steering.py) are honoured
visibly: a note that starts with "also " adds a research step "Steered:
<the rest>" wherever a plan is made or revised (any other note changes no
step); an agent told a note says "Guidance followed: <note>" in its
findings; a reporter given notes titles its report "following: <notes>".
"""

from __future__ import annotations

import json
import re

from testkit.llm_server import (
    Reply,
    all_text,
    has_tool_result,
    last_user,
    role_of,
    tool_messages,
    tool_names,
)

FACT = "FACT: the Lantern Rock lighthouse keeper logged 4417 ships in 1911"
CODE = "total = sum(i * i for i in range(1, 2001))\nprint(f'SUM_OF_SQUARES={total}')"
EXPECTED_SUM = sum(i * i for i in range(1, 2001))
GREETINGS = ("hello", "hi", "hey", "good morning")


def first_user(request: dict) -> str:
    return next((m.get("content") or "" for m in request["messages"] if m["role"] == "user"), "")


def evidence_shown(request: dict) -> str:
    """The step's passages the workflow gave the model: after its task in
    the first message, or in a later message of their own (a page crawled
    again then shows only what they did not)."""
    users = [m.get("content") or "" for m in request["messages"] if m["role"] == "user"]
    first = users[0].split("# Evidence gathered", 1)[1] if users and "# Evidence gathered" in users[0] else ""
    return "\n".join([first, *users[1:]])


GUIDANCE = "# The user's guidance, sent during the research"
TOLD = "Follow it from now on:\n"


def steer_notes(text: str) -> list[str]:
    """The notes a request holds: the guidance section's lines, and the notes
    an agent was told between turns."""
    notes = []
    for part in text.split(GUIDANCE)[1:]:
        for line in part.split("\n\n", 1)[0].splitlines()[1:]:
            if line.startswith("- "):
                notes.append(line[2:].strip())
    for part in text.split(TOLD)[1:]:
        notes.append(part.split("\n", 1)[0].strip())
    return list(dict.fromkeys(notes))


def steered_steps(notes: list[str]) -> list[tuple[str, str]]:
    return [(f"Steered: {n[5:].strip()}", "research") for n in notes if n.lower().startswith("also ")]


def plan_json(title: str, steps: list[tuple[str, str]], enough: bool = False) -> str:
    return json.dumps(
        {
            "locale": "en-US",
            "has_enough_context": enough,
            "thought": "Scripted plan.",
            "title": title,
            "steps": [
                {"need_search": t == "research", "title": s, "description": f"Do: {s}", "step_type": t}
                for s, t in steps
            ],
        }
    )


def source_after(text: str, fact: str) -> str:
    """The first link after the last place ``fact`` appears: its source."""
    found = re.search(r"\]\((https?://[^)\s]+)\)", text[text.rfind(fact) :])
    return found.group(1) if found else ""


def what_changed(system: str, material: str) -> str:
    """When asked to open with what changed since an earlier report: the
    FACT lines of the earlier report against those of the new findings."""
    found = re.search(r"What changed since (\S+)`", system)
    if not found or "# The earlier report" not in material:
        return ""
    earlier, _, new = material.rpartition("# Findings")
    old_facts = set(re.findall(r"FACT: [^\n.]+", earlier.split("# The earlier report", 1)[1]))
    new_facts = set(re.findall(r"FACT: [^\n.]+", new))
    lines = [f"## What changed since {found.group(1)}"]
    lines += [
        f"- Changed: was '{old}' ([source]({source_after(earlier, old)})), "
        f"now '{now}' ([source]({source_after(new, now)}))"
        for old in sorted(old_facts - new_facts)
        for now in sorted(new_facts - old_facts)
    ]
    lines += [] if old_facts != new_facts else ["- Nothing changed."]
    return "\n".join(lines) + "\n\n"


class ResearchScript:
    """Call it with a request; tweak attributes to change the plan."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str]] = [
            ("Find the lighthouse fact", "research"),
            ("Compute the sum of squares", "processing"),
        ]
        self.enough_context = False
        self.clarify_rounds = 2
        self.report_extra = ""

    def __call__(self, request: dict) -> Reply | str:
        role = role_of(request)
        return getattr(self, role)(request)

    def coordinator(self, request: dict) -> Reply | str:
        question = first_user(request).strip().lower()
        if question.startswith(GREETINGS):
            return "Hello! I am a research assistant. What would you like me to research?"
        if "handoff_after_clarification" in tool_names(request):
            answers = [m["content"] for m in request["messages"] if m["role"] == "user"][1:]
            if len(answers) < self.clarify_rounds:
                return f"Clarifying question {len(answers) + 1}: which aspect matters most?"
            topic = first_user(request) + " — clarified: " + "; ".join(answers)
            return Reply(tool_calls=[("handoff_after_clarification", {"research_topic": topic, "locale": "en-US"})])
        return Reply(tool_calls=[("handoff_to_planner", {"research_topic": last_user(request), "locale": "en-US"})])

    def planner(self, request: dict) -> Reply | str:
        notes = steer_notes(all_text(request))
        if "# Steps not started yet" in last_user(request):  # revising the steps not started from a steer
            text = last_user(request).split("# Steps not started yet\n", 1)[1]
            left = json.loads(text.split("\n\n" + GUIDANCE, 1)[0])
            kept = [(s["title"], s["step_type"]) for s in left]
            return plan_json("Scripted research", kept + [s for s in steered_steps(notes) if s not in kept])
        steps = list(self.steps) + steered_steps(notes)
        for message in request["messages"]:
            found = re.search(r"asks for changes: (.+)", message.get("content") or "")
            if message["role"] == "user" and found:
                steps.insert(1, (f"Edited: {found.group(1).splitlines()[0]}", "research"))
        return plan_json("Scripted research", steps, enough=self.enough_context)

    def researcher(self, request: dict) -> Reply | str:
        if "local_search" in tool_names(request) and not has_tool_result(request, "local_search"):
            return Reply(tool_calls=[("local_search", {"query": "turbine peak output"})])
        if not has_tool_result(request, "web_search"):
            return Reply(tool_calls=[("web_search", {"query": "lighthouse fact"})])
        text = "\n".join(m.get("content") or "" for m in tool_messages(request)) + "\n" + evidence_shown(request)
        if not has_tool_result(request, "crawl"):
            url = re.search(r"URL: (\S+)", text)
            return Reply(tool_calls=[("crawl", {"url": url.group(1) if url else "http://none.invalid/"})])
        facts = re.findall(r"FACT: [^\n.]+", text) + re.findall(r"produced [\d.]+ megawatts", text)
        facts += [f"Guidance followed: {note}" for note in steer_notes(all_text(request))]
        urls = sorted(set(re.findall(r"URL: (\S+)", text)))
        return (
            "## Findings\n"
            + "\n".join(f"- {f}" for f in facts)
            + "\n\n## References\n"
            + "\n".join(f"- [Source]({u})" for u in urls)
        )

    def coder(self, request: dict) -> Reply | str:
        if not has_tool_result(request, "run_python"):
            return Reply(tool_calls=[("run_python", {"code": CODE})])
        output = "\n".join(m.get("content") or "" for m in tool_messages(request))
        return f"Computed with Python:\n{output}"

    def analyst(self, request: dict) -> Reply | str:
        return "Analysis: the findings agree."

    def reporter(self, request: dict) -> Reply | str:
        material = first_user(request)
        changes = what_changed(request["messages"][0]["content"], material)
        notes = steer_notes(material)
        following = f" (following: {'; '.join(notes)})" if notes else ""
        return (
            f"# Scripted Report{following}\n\n{changes}## Key Points\n- Based on the findings below.\n\n"
            f"## Detailed Analysis\n{material}\n{self.report_extra}"
        )

    def followup(self, request: dict) -> Reply | str:
        """Answers from the facts it was given; says it needs research when
        the question asks about what they do not mention; quotes its earlier
        answer when asked to."""
        text = first_user(request)
        question = text.rsplit("# The question\n", 1)[-1].strip()
        if "previous answer" in question.lower():
            earlier = re.findall(r"^A: (.+)$", text, re.MULTILINE)
            return f"As I said before: {earlier[-1] if earlier else '(nothing yet)'}"
        wanted = [w for w in re.findall(r"[a-z]{5,}", question.lower()) if w not in ("about", "which", "there")]
        facts = [f for f in re.findall(r"FACT: [^\n.]+", text) if any(w in f.lower() for w in wanted)]
        if not facts:
            return "[NEEDS_RESEARCH]\nThe findings do not say."
        return f"{facts[-1]}. [Source]({source_after(text, facts[-1])})"

    def editor(self, request: dict) -> Reply | str:
        """Condenses findings: keeps the lines with facts, figures or URLs."""
        text = last_user(request)
        kept = [line for line in text.splitlines() if re.search(r"FACT|https?://|\d", line)]
        return "\n".join(kept[:20]) or text[:200]

    def podcast(self, request: dict) -> Reply | str:
        """Two hosts talk through the report's facts; one long line tests splitting."""
        report = last_user(request)
        facts = re.findall(r"FACT: [^\n.]+", report) or ["the report has no facts"]
        lines = [{"speaker": "female", "paragraph": "Welcome to the show. Today: what our research found."}]
        for n, fact in enumerate(facts):
            lines.append({"speaker": "male" if n % 2 == 0 else "female", "paragraph": f"Here is one: {fact}."})
        long_line = " ".join(f"This is long sentence {n} about the findings." for n in range(120))  # not a loop
        lines.append({"speaker": "male", "paragraph": long_line})
        lines.append({"speaker": "female", "paragraph": "That is all for today. Goodbye!"})
        return json.dumps({"locale": "en-US", "lines": lines})

    def slides(self, request: dict) -> Reply | str:
        """A deck with a table, a long bullet and notes, from the report."""
        facts = re.findall(r"FACT: [^\n.]+", last_user(request)) or ["no facts"]
        long_bullet = " ".join(["a bullet far too long to fit on one line of a slide"] * 12)
        return "\n".join(
            [
                "---",
                "marp: true",
                "---",
                "## Key findings",
                *[f"- {fact}" for fact in facts],
                "<!-- Start with the facts. -->",
                "---",
                "## In numbers",
                "| Item | Value |",
                "|---|---|",
                "| Ships logged | 4417 |",
                "| Year | 1911 |",
                "---",
                "## Details",
                f"- {long_bullet}",
                *[f"- point {i}" for i in range(14)],
                "<!-- Go through the details. -->",
            ]
        )

    def prose(self, request: dict) -> Reply | str:
        """Names the instruction it got (the prompt's second paragraph) and echoes the text."""
        system = request["messages"][0]["content"]
        instruction = system.split("\n\n")[1].split(":")[0].split(" ")[0]
        return f"[{instruction}] {last_user(request)}"

    def unknown(self, request: dict) -> Reply | str:
        return Reply(status=400, content=f"unscripted request: {all_text(request)[:200]}")
