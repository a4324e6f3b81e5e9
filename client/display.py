"""Rendering runs for the terminal: status, plan, progress and report.

Dynamic text (questions, plans, reports) is always passed as ``Text`` or with
``markup=False``: it comes from users and models and may contain ``[...]``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from client.wording import usage_text, waiting_text

if TYPE_CHECKING:  # a status may also come as quick.Fields: `status` need not load the models
    from workflows.models import Plan, ProgressEvent, RunStatus

STEP_MARKS = {
    "pending": ("·", "dim"),
    "running": ("…", "yellow"),
    "done": ("✓", "green"),
}


def render_plan(plan: Plan, steps_cut: list[str] | None = None, max_steps: int | None = None) -> RenderableType:
    parts: list[RenderableType] = [Text(plan.title, style="bold")]
    if plan.thought:
        parts.append(Text(plan.thought, style="dim"))
    for number, step in enumerate(plan.steps, 1):
        line = Text(f"{number}. ")
        line.append(step.title, style="bold")
        line.append(f"  ({step.step_type})", style="cyan")
        if step.description:
            line.append(f"\n   {step.description}")
        parts.append(line)
    if steps_cut:
        limit = f"the limit of {max_steps}" if max_steps else "the step limit"
        parts.append(
            Text(
                f"Cut by {limit}: {'; '.join(steps_cut)}. Ask for a shorter plan, or start the run with a "
                "higher --max-step-num.",
                style="yellow",
            )
        )
    return Panel(Group(*parts), title="Plan", title_align="left")


def render_status(status: RunStatus, workflow_id: str | None = None, elapsed: float | None = None) -> RenderableType:
    head = Text()
    if workflow_id:
        head.append(f"{workflow_id}  ", style="dim")
    head.append(status.phase, style="bold magenta")
    if status.outcome not in (None, "completed", status.phase):
        head.append(f" ({status.outcome})", style="bold magenta")
    if elapsed is not None:
        head.append(f"  {int(elapsed) // 60}:{int(elapsed) % 60:02d}", style="dim")
    if status.title:
        head.append(f"  {status.title}")
    parts: list[RenderableType] = [head]
    if status.steps:
        table = Table(show_header=False, box=None, padding=(0, 1))
        for number, step in enumerate(status.steps, 1):
            mark, style = STEP_MARKS.get(step.status, ("?", ""))
            table.add_row(Text(mark, style=style), f"{number}.", Text(step.step_type, style="cyan"), Text(step.title))
        parts.append(table)
    facts = Text(f"plan iterations: {status.plan_iterations}   sources: {status.sources}", style="dim")
    if status.review_pending:
        version = f" (plan version {status.plan_version})" if status.plan_version else ""
        facts.append(f"   plan review pending{version}", style="bold yellow")
    parts.append(facts)
    for number, asked_and_answered in enumerate(status.clarifications, 1):  # the questions asked and answered
        asked = Text(f"clarification {number}: ", style="dim")
        asked.append(asked_and_answered.question)
        asked.append("\n  answer: ", style="dim")
        asked.append(asked_and_answered.answer)
        parts.append(asked)
    if status.pending_question:
        parts.append(Text(f"question: {status.pending_question}", style="yellow"))
    for number, steer in enumerate(getattr(status, "steers", None) or [], 1):  # notes sent while it runs
        sent = Text(f"steer {number}: ", style="dim")
        sent.append(steer.note)
        where = f"applied {steer.applied_at}: {steer.applied_where}" if steer.applied_at else steer.applied_where
        sent.append(f"\n  {where or 'waiting for the next safe point'}", style="dim")
        parts.append(sent)
    if status.note:
        parts.append(Text(f"note: {status.note}", style="yellow"))
    if status.error:
        parts.append(Text(f"error: {status.error}", style="red"))
    for warning in status.warnings:
        parts.append(Text(f"warning: {warning}", style="bold yellow"))
    if waiting := waiting_text(getattr(status, "rate_limited_since", None)):
        parts.append(Text(waiting, style="yellow"))
    if held := getattr(status, "owner_wait", None):  # the owner's per-user limits hold it back
        parts.append(Text(f"waiting: {held}", style="yellow"))
    if whose := owner_text(status):
        parts.append(Text(whose, style="dim"))
    parts.append(Text(f"usage: {usage_text(status.usage)}", style="dim"))
    return Group(*parts)


def owner_text(status: RunStatus) -> str:
    """Whose run it is, who may read it, who accepted its plan ("" for a run without an owner)."""
    owner = getattr(status, "owner", None)  # (a worker older than this CLI sends none)
    if not owner:
        return ""
    text = f"owner: {owner}"
    if shared := getattr(status, "shared_with", None):
        text += f"   shared with: {', '.join(shared)}"
    if accepted := getattr(status, "plan_accepted_by", None):
        text += f"   plan accepted by: {accepted}"
    return text


def status_changes(old: RunStatus | None, new: RunStatus) -> list[str]:
    """One plain line per change between two polls (for logs and `watch`)."""
    lines: list[str] = []
    if old is None or old.phase != new.phase:
        lines.append(f"phase: {new.phase}")
    if new.title and (old is None or old.title != new.title):
        lines.append(f"plan: {new.title} ({len(new.steps)} steps)")
    old_steps = old.steps if old else []
    for number, step in enumerate(new.steps, 1):
        before = old_steps[number - 1] if number <= len(old_steps) else None
        if before is None or before.title != step.title or before.status != step.status:
            lines.append(f"step {number} {step.status}: {step.title}")
    if new.review_pending and not (old and old.review_pending):
        lines.append("plan review pending")
    if new.pending_question and (old is None or old.pending_question != new.pending_question):
        lines.append(f"question: {new.pending_question}")
    if new.error and (old is None or old.error != new.error):
        lines.append(f"error: {new.error}")
    waits = getattr(new, "rate_limited_since", None)
    if waits and (old is None or not getattr(old, "rate_limited_since", None)):
        lines.append(waiting_text(waits) or "waiting on the model provider's rate limit")
    return lines


def event_line(event: ProgressEvent) -> str:
    """One line for an event of a run's progress stream."""
    step = f"step {event.step + 1} " if event.step is not None else ""
    return {
        "phase": f"phase: {event.text}",
        "plan": f"plan: {event.text}",
        "step_started": f"{step}started: {event.text}",
        "step_finished": f"{step}finished: {event.text}",
        "tool_call": f"  {event.text}",
        "review_requested": "the plan is waiting for review",
        "question": f"question: {event.text}",
        "review_received": f"review received: {event.text}",
        "answer_received": f"answer received: {event.text}",
        "notice": f"note: {event.text}",
        "steer_received": f"steer received: {event.text}",
        "steer_applied": event.text,
        "finished": f"run finished: {event.text}",
        "failed": f"run failed: {event.text}",
    }.get(event.kind, f"{event.kind}: {event.text}")


def print_report(console: Console, markdown: str) -> None:
    """Rendered on a terminal, raw markdown otherwise (pipes, files)."""
    if console.is_terminal:
        from rich.markdown import Markdown  # only here: it loads markdown-it

        console.print(Markdown(markdown))
    else:
        console.file.write(markdown if markdown.endswith("\n") else markdown + "\n")
        console.file.flush()


class ProgressView:
    """Follows a run: a live panel on a terminal, one line per change otherwise."""

    def __init__(self, console: Console, workflow_id: str) -> None:
        self.console = console
        self.workflow_id = workflow_id
        self.last: RunStatus | None = None
        self.started = time.monotonic()
        self.live = self._new_live(Text(f"{workflow_id}  starting…")) if console.is_terminal else None
        self.held: list[Text] | None = None  # notes that arrive while the user is asked something

    def _new_live(self, shown: RenderableType):
        # transient: when paused for a question, the panel goes away instead of
        # being drawn again over the question and what the user typed. A new
        # Live each time: one started again moves up by the height it had
        # before it stopped, and erases that many lines of the transcript.
        return _live()(shown, console=self.console, refresh_per_second=4, transient=True)

    def _shown(self) -> RenderableType:
        if self.last is None:
            return Text(f"{self.workflow_id}  starting…")
        return render_status(self.last, self.workflow_id, time.monotonic() - self.started)

    def __enter__(self) -> ProgressView:
        if self.live:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.stop()
            if self.last is not None:  # the last state stays on screen
                self.console.print(render_status(self.last, self.workflow_id, time.monotonic() - self.started))

    def update(self, status: RunStatus) -> None:
        if self.live:
            self.live.update(render_status(status, self.workflow_id, time.monotonic() - self.started))
        else:
            for line in status_changes(self.last, status):
                self.note(line)
        self.last = status

    def note(self, text: str, style: str = "") -> None:
        if self.held is not None:  # never in the middle of a prompt and what the user types
            self.held.append(Text(text, style=style))
        else:
            self.console.print(Text(text, style=style))

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stops the live panel while the user is asked something."""
        if self.live:
            self.live.stop()
        self.held = []
        try:
            yield
        finally:
            held, self.held = self.held, None
            for line in held:
                self.console.print(line)
            if self.live:
                self.live = self._new_live(self._shown())
                self.live.start()


def make_console() -> Console:
    """Wraps words on a terminal; leaves lines whole in pipes and files."""
    console = Console(highlight=False)
    console.soft_wrap = not console.is_terminal
    return console


def _live():
    from rich.live import Live  # only for `run`'s live view

    return Live
