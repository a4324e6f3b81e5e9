"""Steering a run in flight: a note (and pages to read) sent to a running run
through the ``steer`` update or signal is taken at once and applied at the
next safe point, whatever the run is doing:

    the plan        the planner's next request holds it (a plan written while
                    it arrived is planned again with it)
    a running step  its agent's next turn: the note joins its next message
    between steps   the steps not started yet are revised from it (one call to
                    the planner, ``prompts/revise_steps.md``; within
                    ``--max-step-num``); a step that starts later reads it in
                    its task
    the report      the reporter's request holds it; one that arrives while the
                    report is written has the report written again with it

Its pages are read by the workflow (``crawl``: the URL guard, the run's
cache); their passages join the evidence of the steps not started yet, the
running agents' next message and the reporter's evidence. The report closes
with the guidance received, and when and where each note applied.

Steers live in ``RunState.steers``: a worker killed between taking and
applying one, and continue-as-new, lose nothing; the history's update
events give replay the same steers at the same points. Everything here runs
only when a run has steers, and asks the patch ``PATCH`` first: a run without
steers replays as before. The decisions are pure functions in
``workflows/steer_models.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

from workflows.activity_calls import failure_reason
from workflows.box import Box

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.evidence_models import EvidencePage, StepEvidence, Support, SupportRequest
    from workflows.languages import asked_language, language_name, locale_for
    from workflows.models import Message, ModelRequest, Plan, Steer, Step
    from workflows.ownership import by_problem
    from workflows.steer_models import (
        SteerProblem,
        SteerRecord,
        SteerReply,
        agent_guidance,
        applies_at,
        closing_note,
        guidance,
        planner_guidance,
        read_steer,
        revise_request,
        same_steps,
        steer_problem,
    )

PATCH = "steer-in-flight"


class Steering:
    """The run's steers: taken by the handlers, applied at the safe points.
    ``phase`` and ``running`` tell where the run stands (the conductor's)."""

    def __init__(self, box: Box, phase: Callable[[], str], running: Callable[[], bool]) -> None:
        self.box, self.state = box, box.state
        self._phase, self._running = phase, running
        self._reading = asyncio.Lock()  # one reader of the steers' pages at a time

    # --- the update and the signal -----------------------------------------------

    def check(self, raw: Any) -> None:
        """The update's validator: ApplicationError with one line when the
        steer cannot be taken (nothing is written to history then)."""
        try:
            read_steer(raw)
        except SteerProblem as err:
            raise ApplicationError(str(err)) from None
        if problem := steer_problem(self._phase(), len(self.state.steers), workflow.info().workflow_id):
            raise ApplicationError(problem)
        if problem := by_problem(raw):  # who sent it must be a user's name
            raise ApplicationError(problem)

    def take(self, raw: Any) -> SteerReply:
        """Keep a checked steer for the next safe point; where it will apply."""
        request = read_steer(raw)
        at, where = applies_at(self._phase(), self._running())
        self.state.steers.append(SteerRecord(note=request.note, urls=request.urls, received_at=_now(), by=request.by))
        number = len(self.state.steers)
        self.box.emit("steer_received", f"steer {number}: {_short(request.note)} (applies at {at})")
        self.show()
        return SteerReply(accepted=True, applies_at=at, message=f"steer {number} taken; it applies at {where}")

    def signal(self, raw: Any) -> None:
        """The ``steer`` signal: taken as the update is; one that cannot be
        is logged and ignored (as the review signal does)."""
        try:
            self.check(raw)
        except ApplicationError as err:
            workflow.logger.warning("steer signal ignored: %s", err.message)
            return
        self.take(raw)

    # --- the safe points ------------------------------------------------------------

    def waiting(self) -> list[SteerRecord]:
        """Steers the plan of the steps not started has not taken yet."""
        return [s for s in self.state.steers if not s.planned]

    async def into_plan(self) -> None:
        """Before a planner call: the steers it has not seen join its request."""
        waiting = self.waiting()
        if not waiting or not workflow.patched(PATCH):
            return
        await self.read_pages()
        replanning = self.state.plan_iterations > 0
        pending = self.state.planner_pending
        pending.append(Message(role="user", content=planner_guidance(waiting, replanning)))
        for steer in waiting:
            if steer.passages:
                shown = f"# Passages of the pages the user gave ({', '.join(p.url for p in steer.pages)})\n\n"
                pending.append(Message(role="user", content=shown, blob=steer.passages, budget=self._budget()))
            steer.planned = True
            self.applied(steer, "the next plan (replanning)" if replanning else "the plan")

    def plan_again(self) -> bool:
        """Whether a steer came while the plan was written (it has not seen
        it): then it is planned again, before anyone reviews or runs it."""
        if not self.waiting() or not workflow.patched(PATCH):
            return False
        self.box.emit("notice", "a steer came while the plan was written: planning again with it")
        return True

    async def revise_steps(self, plan: Plan) -> bool:
        """Between steps: the steps not started yet, revised from the steers
        they have not taken (``plan`` changed in place); True when they changed.
        With no step left to revise, the steers wait for the next plan or the report."""
        waiting = self.waiting()
        todo = not_started(plan, self.state.agents)
        if not waiting or not todo or self.box.out_of_budget() or not workflow.patched(PATCH):
            return False
        await self.read_pages()
        old = [plan.steps[i] for i in todo]
        new = await self._revised(plan, todo, waiting)
        for steer in waiting:
            steer.planned = True
        done = plan.steps[: todo[0]]  # finished, or paused mid-way (continued as new)
        if new is None or same_steps(old, new):
            for steer in waiting:
                self.applied(steer, "between steps: the steps not started already follow it (no step changed)")
            return False
        plan.steps = done + new
        first, last = len(done) + 1, len(done) + len(new)
        numbers = f"steps {first}–{last}" if len(new) > 1 else f"step {first}" if new else "no step left"
        self.box.emit("plan", f"{plan.title}: " + "; ".join(f"{n + 1}. {s.title}" for n, s in enumerate(plan.steps)))
        self.box.emit("notice", f"steer: the steps not started were revised: {numbers} " + _titles(new, len(done)))
        for steer in waiting:
            self.applied(steer, f"between steps: the steps not started revised ({numbers})")
        return True

    async def _revised(self, plan: Plan, todo: list[int], steers: list[SteerRecord]) -> list[Step] | None:
        """The re-planner's steps instead of ``todo``, at most as many as the
        step limit leaves; None when it gave none that can be read."""
        r = self.box.request
        room = r.max_step_num - (len(plan.steps) - len(todo))
        if room < 1:
            return None
        request = ModelRequest(
            role="planner",
            prompt="revise_steps",
            reasoning=r.enable_deep_thinking,
            variables=self.box.variables(max_step_num=room),
            messages=[Message(role="user", content=revise_request(self.state.topic, plan, todo, steers))],
            json_mode=True,
            output="plan",
            max_steps=room,
            topic=self.state.topic,
        )
        try:
            reply = await self.box.calls.chat(
                request, f"planner · revising the steps not started ({_short(steers[-1].note)})"
            )
        except ActivityError as err:
            if is_cancelled_exception(err):
                raise
            self.box.emit("notice", f"the steps could not be revised ({failure_reason(err)}): they stay as they were")
            return None
        if reply.plan is None:
            self.box.emit("notice", f"the revised steps could not be read ({reply.problem}): they stay as they were")
            return None
        if reply.steps_cut:
            self.box.emit(
                "notice", f"the step limit (--max-step-num) cut these revised steps: {'; '.join(reply.steps_cut)}"
            )
        return [step.model_copy(update={"execution_res": None}) for step in reply.plan.steps]

    def into_task(self, task: str, where: str) -> tuple[str, int]:
        """A step starting now: its task with every steer so far, and how many
        its agent has been told."""
        steers = self.state.steers
        if not steers or not workflow.patched(PATCH):
            return task, len(steers)
        for steer in steers:
            self.applied(steer, f"{where}: its task")
        return f"{task}\n{guidance(steers)}\nFollow this guidance in your step.\n", len(steers)

    async def for_turn(self, seen: int, where: str) -> tuple[list[Message], int]:
        """A running agent's next turn: the steers it has not been told, as
        messages (with their pages' passages), and how many it has been told."""
        end = len(self.state.steers)
        if end <= seen or not workflow.patched(PATCH):
            return [], seen
        await self.read_pages()
        told = []
        for steer in self.state.steers[seen:end]:
            budget = self._budget() if steer.passages else None
            told.append(Message(role="user", content=agent_guidance(steer), blob=steer.passages, budget=budget))
            self.applied(steer, where)
        return told, end

    async def read_pages(self) -> list[EvidencePage]:
        """The steers' pages, each read once by the workflow (the crawl's URL
        guard and the run's cache); their passages join the reporter's
        evidence. Every page read so far."""
        async with self._reading:
            for steer in list(self.state.steers):
                if steer.urls and not steer.read and workflow.patched(PATCH):
                    await self._read(steer)
        return [page for steer in self.state.steers for page in steer.pages]

    async def _read(self, steer: SteerRecord) -> None:
        calls = self.box.calls
        results = await asyncio.gather(*(calls.crawl(url, "steer") for url in steer.urls))
        for url, page in zip(steer.urls, results):
            if page.error or not page.blob:
                steer.unread.append(f"{url}: {page.content.removeprefix('Error: ')[:200] or 'no text'}")
            else:
                title = page.sources[0].title if page.sources else url
                steer.pages.append(EvidencePage(url=page.source or url, title=title or url, blob=page.blob))
        if steer.pages:
            request = SupportRequest(
                findings=steer.note,
                focus=f"{self.state.topic}\n{steer.note}",
                pages=steer.pages,
                budget=self._budget(),
            )
            found = await calls.evidence("support_findings", request, Support, "steer · passages of the pages given")
            if found and found.blob:
                steer.passages = found.blob
                title = f"Pages the user gave: {_short(steer.note)}"
                self.state.evidence.append(StepEvidence(title=title, support=found.blob, read=len(steer.pages)))
        if steer.unread:
            self.box.emit("notice", f"steer: could not read {'; '.join(steer.unread)}")
        steer.read = True

    async def report(self, write: Callable[[], Awaitable[str]]) -> str:
        """The report, its request holding every steer; written again when
        one came while it was written. It closes with the guidance received."""
        await self._into_report(again=False)
        text = await write()
        while self._late():
            self.box.emit("notice", "a steer came while the report was written: writing it again with it")
            await self._into_report(again=True)
            text = await write()
        return f"{text.rstrip()}\n\n{closing_note(self.state.steers)}" if self.state.steers else text

    def _late(self) -> bool:
        return any(not s.reported for s in self.state.steers) and workflow.patched(PATCH)

    async def _into_report(self, again: bool) -> None:
        fresh = [s for s in self.state.steers if not s.reported]
        if not fresh or not workflow.patched(PATCH):
            return
        await self.read_pages()
        for steer in fresh:
            steer.reported = True
            self.applied(steer, "the report, written again with it" if again else "the report")
            if (tag := asked_language(steer.note)) and tag != self.state.locale.split("-")[0].lower():
                self.state.locale = locale_for(tag)  # the report's language checks follow the note
                self.box.emit("notice", f"steer: the report is written in {language_name(self.state.locale)}")

    def ended(self, how: str) -> None:
        """The run ends: steers no safe point reached say so."""
        for steer in self.state.steers:
            if steer.applied_at is None:
                steer.applied_where = f"not applied: the run ended ({how}) before it reached a safe point"

    # --- what it shows ----------------------------------------------------------------

    def applied(self, steer: SteerRecord, where: str) -> None:
        """The first place a steer took effect (later places change nothing)."""
        if steer.applied_at is not None:
            return
        steer.applied_at, steer.applied_where = _now(), where
        number = self.state.steers.index(steer) + 1
        self.box.emit("steer_applied", f"steer {number} applied: {where}")
        self.show()

    def views(self) -> list[Steer]:
        return [steer.public() for steer in self.state.steers]

    def details(self) -> str:
        """For the Temporal UI's current details: each steer and where it applied."""
        lines = [
            f"- “{_short(s.note)}”: {s.applied_where or 'waiting for the next safe point'}" for s in self.state.steers
        ]
        return f"\n\nSteers received: {len(lines)}\n" + "\n".join(lines) if lines else ""

    def show(self) -> None:
        workflow.set_current_details(f"Phase: {self._phase()}{self.details()}")

    def _budget(self) -> int:
        return self.box.request.evidence_tokens


def not_started(plan: Plan, paused: dict[int, Any]) -> list[int]:
    """The steps a steer may revise: those not started, when they are the
    plan's last (steps run in order); none otherwise."""
    todo = [i for i, step in enumerate(plan.steps) if step.execution_res is None and i not in paused]
    return todo if todo == list(range(len(plan.steps) - len(todo), len(plan.steps))) else []


def _now() -> str:
    return workflow.now().isoformat(timespec="seconds")


def _short(note: str) -> str:
    line = " ".join(note.split())
    return line if len(line) <= 80 else line[:79] + "…"


def _titles(steps: list[Step], before: int) -> str:
    return "(" + "; ".join(f"{before + n + 1}. {s.title}" for n, s in enumerate(steps)) + ")" if steps else ""
