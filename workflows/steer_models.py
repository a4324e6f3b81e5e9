"""Steering a run in flight: the shapes and the pure decisions
(``workflows/steering.py`` is the box that applies them).

A steer is a note (and pages to read) sent to a running run through the
``steer`` update or signal. The run takes it at once, says where it will
apply, and applies it at the next safe point. These functions decide what
may be taken, where it applies, and what each place is told; they read no
clock and call nothing.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from workflows.evidence_models import EvidencePage
from workflows.models import Model, Plan, Steer, Step

MAX_NOTE_CHARS = 4_000  # a steer is guidance, not a document
MAX_URLS = 5
MAX_URL_CHARS = 2_000
MAX_STEERS = 20  # per run: each may re-plan the steps not started and rewrite the report
ENDED_PHASES = ("completed", "cancelled", "failed")
PLANNING_PHASES = ("coordinating", "clarifying", "investigating", "planning")

AppliesAt = Literal["plan", "next_turn", "steps", "report"]


class SteerRequest(Model):
    """The ``steer`` update's and signal's argument, with the acting user
    (``by``) when the client names one. Fields it does not know are
    ignored, never refused."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    note: str
    urls: list[str] = Field(default_factory=list)
    by: str | None = None  # the acting user (workflows/ownership.py), when the client names one


class SteerReply(Model):
    """What the ``steer`` update answers."""

    accepted: bool
    applies_at: str  # plan, next_turn, steps or report
    message: str


class SteerRecord(Steer):
    """A steer as the run keeps it (``RunState.steers``, carried by
    continue-as-new): the public fields, and how far it has gone."""

    planned: bool = False  # the plan of the steps not started has taken it (planner or re-plan)
    reported: bool = False  # a reporter's request has held it
    read: bool = False  # its URLs were read (or tried)
    pages: list[EvidencePage] = Field(default_factory=list)  # the pages of its URLs that gave text
    passages: str | None = None  # blob: those pages' passages most relevant to the note and topic
    unread: list[str] = Field(default_factory=list)  # "URL: why" for each URL that could not be read

    def public(self) -> Steer:
        return Steer(
            note=self.note,
            urls=self.urls,
            received_at=self.received_at,
            applied_at=self.applied_at,
            applied_where=self.applied_where,
            by=self.by,
        )


class SteerProblem(ValueError):
    """Why a steer is refused: one line for the user."""


def read_steer(raw: Any) -> SteerRequest:
    """The steer in ``raw`` (``{"note": …, "urls": […]}``, or a bare note as
    a string); SteerProblem with one line when it cannot be taken."""
    if isinstance(raw, str):
        raw = {"note": raw}
    if not isinstance(raw, dict):
        raise SteerProblem('a steer is {"note": "…", "urls": ["https://…"]}')
    try:
        steer = SteerRequest.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(map(str, first["loc"])) or "steer"
        raise SteerProblem(f"the steer's {where}: {first['msg']}") from None
    note = steer.note.strip()
    if not note:
        raise SteerProblem("the note is empty: say what the research should do differently")
    if len(note) > MAX_NOTE_CHARS:
        raise SteerProblem(f"the note is {len(note):,} characters long; a steer holds at most {MAX_NOTE_CHARS:,}")
    urls = [u.strip() for u in steer.urls]
    if len(urls) > MAX_URLS:
        raise SteerProblem(f"a steer gives at most {MAX_URLS} pages to read, not {len(urls)}")
    for url in urls:
        if not url.lower().startswith(("http://", "https://")) or len(url) > MAX_URL_CHARS or len(url.split()) != 1:
            raise SteerProblem(f"not a web address (http:// or https://) to read: {url[:100]!r}")
    return SteerRequest(note=note, urls=list(dict.fromkeys(urls)), by=steer.by)


def steer_problem(phase: str, steers: int, workflow_id: str) -> str | None:
    """Why the run cannot take a steer now (None: it can)."""
    if phase in ENDED_PHASES:
        return (
            f"the run has ended ({phase}): a steer can no longer reach it; ask about its report instead: "
            f'deepresearch ask {workflow_id} "your question"'
        )
    if phase == "awaiting_review":
        return (
            "the plan is waiting for your review: say what should change there, "
            f'deepresearch review {workflow_id} --edit "your note" (steer once the research runs)'
        )
    if steers >= MAX_STEERS:
        return f"this run has taken {MAX_STEERS} steers, the most one run takes"
    return None


def applies_at(phase: str, running: bool) -> tuple[AppliesAt, str]:
    """Where a steer taken now will apply first, and how to say it."""
    if phase in PLANNING_PHASES:
        return "plan", "the plan: the planner reads it before it plans (a plan being written is planned again)"
    if phase == "researching" and running:
        return "next_turn", (
            "the running steps' next turn; then the steps not started yet are revised from it, "
            "and the report follows it"
        )
    if phase == "researching":
        return "steps", "the steps not started yet, revised from it; the report follows it"
    return "report", "the report: it is written (again, if it is being written) with your note"


# --- what each place is told ------------------------------------------------------

GUIDANCE_HEADING = "# The user's guidance, sent during the research"


def _quoted(steer: SteerRecord) -> str:
    line = f"- {steer.note}"
    if steer.urls:
        line += "\n  Pages the user gave: " + ", ".join(steer.urls)
    return line


def guidance(steers: list[SteerRecord]) -> str:
    """The notes, as one section of a request; "" when there are none."""
    if not steers:
        return ""
    return f"{GUIDANCE_HEADING}\n" + "\n".join(_quoted(s) for s in steers)


def agent_guidance(steer: SteerRecord) -> str:
    """A running agent's next message: the note, to follow from now on."""
    text = (
        f"The user sent guidance while you work on this step. Follow it from now on:\n{steer.note}\n"
        "If it changes what to look for, do that now; if it is about the report, keep it in mind."
    )
    if steer.pages:
        text += "\n\nThe user gave these pages; their passages most relevant to the research follow:\n"
        text += "\n".join(f"- [{p.title or p.url}]({p.url})" for p in steer.pages) + "\n\n"
    return text


def planner_guidance(steers: list[SteerRecord], replanning: bool) -> str:
    when = "Plan the next steps" if replanning else "Make the plan"
    return f"{guidance(steers)}\n\n{when} so that it follows this guidance."


REPORTER_NOTE = (
    "Follow this guidance in the report: it may set its scope, language, length and style. "
    "Where it asks for something the findings do not cover, say so plainly; never invent it."
)


def reporter_guidance(steers: list[SteerRecord]) -> str:
    """The reporter's section: the notes its report must follow."""
    return f"{guidance(steers)}\n\n{REPORTER_NOTE}" if steers else ""


def revise_request(topic: str, plan: Plan, todo: list[int], steers: list[SteerRecord]) -> str:
    """The re-planner's message: the plan so far, the steps not started, the notes."""
    done = [f"{n + 1}. {s.title} (done)" for n, s in enumerate(plan.steps) if s.execution_res is not None]
    open_steps = [
        {"need_search": s.need_search, "title": s.title, "description": s.description, "step_type": s.step_type}
        for s in (plan.steps[i] for i in todo)
    ]
    parts = [
        f"# Research question\n{topic}",
        f"# Plan: {plan.title}\n{plan.thought}",
        "# Steps done\n" + ("\n".join(done) or "(none)"),
        "# Steps not started yet\n" + json.dumps(open_steps, ensure_ascii=False, indent=1),
        guidance(steers),
    ]
    return "\n\n".join(parts)


def same_steps(old: list[Step], new: list[Step]) -> bool:
    """Whether a revision changed nothing a step does."""
    key = [(s.title.strip(), s.description.strip(), s.step_type) for s in old]
    return key == [(s.title.strip(), s.description.strip(), s.step_type) for s in new]


def closing_note(steers: list[SteerRecord]) -> str:
    """The report's closing section: the guidance received, when, and where it applied."""
    if not steers:
        return ""
    lines = ["## Guidance received during the research", ""]
    for n, s in enumerate(steers, 1):
        line = f"{n}. “{' '.join(s.note.split())}” (received {_when(s.received_at)}"
        line += f"; applied: {s.applied_where})" if s.applied_where else "; not applied)"
        if s.pages:
            line += " Pages read: " + ", ".join(p.url for p in s.pages) + "."
        if s.unread:
            line += " Not read: " + "; ".join(s.unread) + "."
        lines.append(line)
    return "\n".join(lines) + "\n"


def _when(iso: str) -> str:
    return iso.replace("T", " ").removesuffix("+00:00") + " UTC"
