"""The ``DeepResearch`` workflow, the conductor of the flow:

    1. coordinator            workflows/coordinator.py
    2. background investigation  workflows/investigation.py
    3. planner                workflows/planner.py
    4. human review           workflows/review.py
    5. research team          workflows/research_team.py (agents: workflows/agent.py)
    6. reporter               workflows/reporter.py

Deterministic and thin: every model and tool call is an activity
(``workflows/activity_calls.py``), every decision a pure function beside its
box, and everything the run knows is one model (``workflows/state.py``) that
continue-as-new carries whole.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

from workflows import continuation, coordinator, investigation, planner, recheck, reporter
from workflows.activity_calls import ActivityCalls, failure_reason
from workflows.box import Box
from workflows.cancelling import CancelGrace
from workflows.failures import PARTIAL_REPORT, blob_missing
from workflows.owner_limits import OwnerLimits
from workflows.research_team import ResearchTeam, batches
from workflows.review import PlanReview, Review, parse_review
from workflows.steering import Steering

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.clean import clean_text
    from workflows.languages import guess_locale
    from workflows.models import (
        PHASE_ATTRIBUTE,
        PROGRESS_TOPIC,
        TITLE_ATTRIBUTE,
        Clarification,
        Phase,
        Plan,
        ProgressEvent,
        ResearchInput,
        ResearchResult,
        RunOutcome,
        RunStatus,
        input_problem,
    )
    from workflows.ownership import closing_note, details, shares
    from workflows.prior import merge_sources
    from workflows.state import RunState, state_problem
    from workflows.steer_models import SteerReply


@workflow.defn(name="DeepResearch")
class DeepResearch:
    @workflow.init
    def __init__(self, raw: Any, carried: Any = None) -> None:
        # Validated here, not by the data converter: bad input from any client
        # (e.g. `temporal workflow start --input … --input …`) then fails the
        # run with a clear message instead of failing workflow tasks forever.
        self.invalid = input_problem(raw) or state_problem(carried)
        self.request = r = ResearchInput.model_validate(raw) if not self.invalid else ResearchInput(question="?")
        self.continued = carried is not None and not self.invalid  # picks up where the last run stopped
        self.state = (
            RunState.model_validate(carried)
            if self.continued
            else RunState(topic=r.question, locale=r.locale or guess_locale(r.question))
        )
        self.stream = WorkflowStream(self.state.stream)  # live progress
        self.progress = self.stream.topic(PROGRESS_TOPIC, type=ProgressEvent)
        calls = ActivityCalls(
            self.state,
            r.max_search_results,
            workflow.info().workflow_id,
            lambda text: self.emit("tool_call", text),
            lambda text: self.emit("notice", text),
            evidence_tokens=r.evidence_tokens,
        )
        self.box = Box(r, self.state, calls, self.variables, self.emit)
        self.steering = Steering(self.box, lambda: self.phase, lambda: bool(self.team.running))  # notes in flight
        self.team = ResearchTeam(self.box, self.steering)
        self.plan_review = PlanReview()
        self.limits = OwnerLimits(r, self.state, self.emit)  # the owner's per-user limits
        self.grace = CancelGrace()  # a cancelled run's time to write its report
        self.phase: Phase = "coordinating"
        self.question: str | None = None  # clarification question awaiting an answer
        self.answer: str | None = None
        self.error: str | None = None
        self.outcome: RunOutcome | None = None  # how the run ended
        self.note: str | None = None
        self.steps_cut: list[str] = []  # steps of the current plan beyond max_step_num
        # Upsert phase and title only if the starter set them (i.e. the
        # server has them registered): an unregistered key fails the task.
        self.has_attributes = PHASE_ATTRIBUTE in workflow.info().typed_search_attributes

    @workflow.run
    async def run(self, raw: Any, carried: Any = None) -> ResearchResult:
        if self.invalid:
            self.error = f"invalid run settings: {self.invalid}"
            self.set_phase("failed")
            raise ApplicationError(self.error, type="InvalidInput", non_retryable=True)
        try:
            return await self.research()
        except (asyncio.CancelledError, ActivityError) as err:
            if not is_cancelled_exception(err):
                if blob_missing(err) and workflow.patched("partial-report-on-missing-blob"):
                    await self.fail_with_report(err)
                self.fail(err)
            # Cancelled (`deepresearch cancel`): report what was found so far.
            self.emit("notice", "the run was cancelled: writing a report from what was found so far")
            self.set_phase("reporting")
            self.grace.begin(self.box.calls.waits)
            try:
                report = await self.report(partial="the run was cancelled")
            except (ActivityError, ApplicationError) as failed:
                self.fail(failed)
            return self.finish("cancelled", report)
        except ApplicationError as err:  # raised by our own workflow code
            self.fail(err)

    def fail(self, err: BaseException) -> None:
        self.error = failure_reason(err)
        self.set_phase("failed")
        self.emit("failed", self.error)
        raise ApplicationError(self.error, type="ResearchFailed", non_retryable=True) from err

    async def fail_with_report(self, err: ActivityError) -> None:
        """A stored file the run needs is gone (deleted by hand, or a worker
        with another data dir): no retry brings it back, so the run writes a
        report from what it found and fails with the reason; the report is
        in the failure's details (`deepresearch result` shows it)."""
        reason = failure_reason(err)
        self.emit("notice", f"the run cannot go on ({reason}): writing a report from what was found so far")
        self.set_phase("reporting")
        try:
            report = await self.report(partial=f"the run failed: {reason}")
        except (ActivityError, ApplicationError):
            self.fail(err)
        self.error = reason
        self.set_phase("failed")
        self.emit("failed", reason)
        raise ApplicationError(reason, {PARTIAL_REPORT: report}, type="ResearchFailed", non_retryable=True) from err

    async def research(self) -> ResearchResult:
        r, s, box = self.request, self.state, self.box
        if not self.continued:
            await self.limits.before_start()
            # 0. Keeping a topic current: the earlier run first; its own question
            #    needs no coordinator again (workflows/recheck.py).
            rechecking = recheck.wanted(r) and workflow.patched(recheck.PATCH)
            if rechecking:
                s.prior = await continuation.load_prior(r.continue_from, r.schedule)

            # 1. Coordinator: answer small talk, decline harmful requests, or hand off.
            decision = (rechecking and recheck.handed_on(r, s.prior)) or await coordinator.coordinate(
                box, self.ask_user
            )
            if decision.kind == "answer":
                return self.finish("answered_directly", decision.text)
            if decision.kind == "decline":
                return self.finish("rejected", decision.text)
            s.topic = decision.topic
            s.locale = r.locale or decision.locale or s.locale
            self.team.tools_ahead()  # no step's first turn waits for the agents' MCP tools

            # 1b. Building on an earlier run: what it found, and its sources;
            # 1c. re-checked, whatever a model will say (nothing changed: its report stands).
            if (r.continue_from or r.schedule) and (unchanged := await self.build_on_earlier(rechecking)):
                return unchanged

            # 2. Background investigation: index the user's documents, and one
            #    web search before planning.
            if r.resources or r.enable_background_investigation:
                self.set_phase("investigating")
            s.background += await investigation.investigate(box)
            planner.begin(s, r.question)

        # 3.-5. Plan, review and research until the plan has enough context or
        #       the iteration limit is reached.
        if s.mid_plan and s.plan:
            # Continued between two batches of steps: finish the accepted plan.
            s.mid_plan = False
            await self.research_team(s.plan)
            planner.replan(s, s.findings(), r.max_step_num)
        while s.plan_iterations < r.max_plan_iterations and not box.out_of_budget():
            if workflow.info().is_continue_as_new_suggested():
                await self.continue_as_new()
            self.set_phase("planning")
            await self.steering.into_plan()
            planned = await planner.next_plan(box)
            plan, s.fallback_plan = planned.plan, False
            if plan is None:
                if s.plan_iterations > 0:
                    break
                if not planned.said_something or not workflow.patched("plan-from-question"):
                    return self.finish("plan_failed", planned.failure)
                plan = planner.question_plan(r.question, s.locale)
                s.fallback_plan = True
                self.note = planner.FALLBACK_NOTE.format(why=planned.problem[:200])
                self.emit("notice", self.note)
            if (
                plan.has_enough_context
                and not planner.may_end_research(s)
                and workflow.patched("enough-context-needs-evidence")
            ):
                plan, s.fallback_plan = planner.research_anyway(plan, r.question, s.locale)
                self.emit("notice", planner.NOTHING_READ_NOTE)
            self.set_plan(plan, list(planned.steps_cut))
            if self.steering.plan_again():  # a steer came while it was written
                continue
            if plan.has_enough_context:
                break
            review = await self.review()
            if review is None:
                hours = r.review_timeout_hours
                return self.finish("review_timed_out", f"No plan review arrived within {hours} hours.")
            if not review.accepted:
                self.emit("notice", f"revising the plan with your edit: {review.edit[:200]}")
                planner.edit(s, review.edit, r.max_step_num)
                continue
            s.plan_iterations += 1
            await self.research_team(plan)
            planner.replan(s, s.findings(), r.max_step_num)

        # 6. Reporter.
        self.set_phase("reporting")
        return self.finish("completed", await self.report(box.budget_reason()))

    async def report(self, partial: str = "") -> str:
        """The report, following the steers the run took (``workflows/steering.py``)."""
        return await self.steering.report(lambda: self.write_report(partial))

    async def write_report(self, partial: str = "") -> str:
        """The reporter's report. A reporter that fails once the research is
        done (its call failed after all retries, it replied nothing, or it
        repeated its instructions twice) does not fail the run: the findings
        and sources are the report (``workflows/fallback_report.py``), which
        says so at its top, and the run carries a warning."""
        try:
            return await self.grace.bounded(reporter.write_report(self.box, partial))
        except (ActivityError, ApplicationError) as err:
            if is_cancelled_exception(err) or blob_missing(err) or not workflow.patched("fallback-report"):
                raise
            return await reporter.findings_report(self.box, failure_reason(err), partial)

    async def build_on_earlier(self, rechecking: bool) -> ResearchResult | None:
        """Steps 1b and 1c: the earlier run (loaded already when re-checking)
        and, when re-checking, its sources read again; the result when
        nothing changed, else None."""
        r, s = self.request, self.state
        if not rechecking:
            s.prior = await continuation.load_prior(r.continue_from, r.schedule)
        if s.prior:
            merge_sources(s.sources, s.prior)
            self.emit("notice", f"building on run {s.prior.run_id} of {s.prior.date}")
        if not (rechecking and s.prior):
            return None
        self.set_phase("investigating")
        s.recheck = await recheck.recheck(self.box)
        if not recheck.nothing_changed(s.recheck, s.prior):
            return None
        self.set_phase("reporting")
        return self.finish("completed", recheck.unchanged_report(self.box))

    # --- the boxes that talk to the user or hand over --------------------------

    async def ask_user(self, question: str) -> str:
        """A clarification question; waits (durably) for the answer."""
        self.question, self.answer = question, None
        self.set_phase("clarifying")
        self.emit("question", question)
        await workflow.wait_condition(lambda: self.answer is not None)
        answer, self.question, self.answer = self.answer or "", None, None
        self.state.clarifications.append(Clarification(question=question, answer=answer))
        self.emit("answer_received", answer[:200])
        self.set_phase("coordinating")
        return answer

    async def review(self) -> Review | None:
        """The human's verdict on the plan; None when the optional review
        timeout ends the run."""
        r = self.request
        if r.auto_accept_plan:
            return Review(accepted=True)
        self.set_phase("awaiting_review")
        self.emit("review_requested", "the plan is waiting for review")
        if self.state.plan:
            self.team.gather_ahead(self.state.plan)  # the research steps read while the plan waits
        timeout = timedelta(hours=r.review_timeout_hours) if r.review_timeout_hours else None
        review = await self.plan_review.wait(timeout)
        if review is None and r.on_review_timeout == "accept":
            return Review(accepted=True)
        if review is not None:
            self.state.plan_accepted_by = review.by if review.accepted else self.state.plan_accepted_by
            self.emit("review_received", review.said())
        return review

    async def research_team(self, plan: Plan) -> None:
        self.set_phase("researching")
        todo, n = batches(plan, self.request.parallel_research), 0
        while True:
            if await self.steering.revise_steps(plan):  # between steps: a steer revised the steps not started
                todo, n = batches(plan, self.request.parallel_research), 0
            if n >= len(todo):
                break
            await self.limits.refresh()  # the owner's daily budget, before each batch
            if self.box.out_of_budget():
                break
            batch, n = todo[n], n + 1
            if not await self.team.run_batch(plan, batch):
                await self.continue_as_new(mid_plan=True)  # steps paused mid-way: go on in a new run
            # A long plan does not wait for its end to keep history bounded.
            if n < len(todo) and workflow.info().is_continue_as_new_suggested():
                if workflow.patched("continue-between-steps"):
                    await self.continue_as_new(mid_plan=True)

    async def continue_as_new(self, mid_plan: bool = False) -> None:
        """Hand the run's state to a fresh run: between plan iterations, or
        between two batches of an accepted plan's steps (``mid_plan``)."""
        self.state.mid_plan = mid_plan
        await self.stream.continue_as_new(
            lambda stream: [self.request.model_dump(mode="json"), self.state.model_copy(update={"stream": stream})]
        )

    # --- results, status and messages -------------------------------------------

    def finish(self, status: RunOutcome, text: str) -> ResearchResult:
        self.outcome = status
        self.steering.ended(status)
        # A cancelled run's phase (and search attribute) says so; histories
        # recorded before said "completed".
        cancelled = status == "cancelled" and workflow.patched("cancelled-phase")
        self.set_phase("cancelled" if cancelled else "completed")
        self.emit("finished", status)
        s = self.state
        return ResearchResult(
            status=status,
            question=self.request.question,
            locale=s.locale,
            final_report=text + closing_note(s.plan_accepted_by, [st.by for st in s.steers if st.by]),
            plan=s.plan,
            plan_iterations=s.plan_iterations,
            observations=s.observations,
            citations=reporter.cited(text, list(s.sources.values())),
            usage=s.usage,
            clarifications=s.clarifications,
            budget_exhausted=s.budget_exhausted,
            finished_at=workflow.now().isoformat(timespec="seconds"),
            warnings=list(s.warnings),
            reporter_input=s.reporter_input,
            statements=s.statements,
            sources=len(s.sources),
            steers=self.steering.views(),
            **recheck.kept(s),
            **shares(self.request, self.state),
        )

    def variables(self, **extra: object) -> dict:
        return {"locale": self.state.locale, "current_time": workflow.now().strftime("%Y-%m-%d, %A"), **extra}

    def set_phase(self, phase: Phase) -> None:
        self.phase = phase
        workflow.set_current_details(
            details(phase, self.request.owner, self.state.plan_accepted_by) + self.steering.details()
        )
        if self.has_attributes:
            workflow.upsert_search_attributes([PHASE_ATTRIBUTE.value_set(self.phase_shown(phase))])
        self.emit("phase", phase)

    def phase_shown(self, phase: Phase) -> str:
        """The ``ResearchPhase`` attribute: the phase, or how an ended run
        ended when that was not a report (``list`` shows it)."""
        if phase != "completed" or self.outcome in (None, "completed"):
            return phase
        return self.outcome if workflow.patched("phase-shows-outcome") else phase

    def set_plan(self, plan: Plan, steps_cut: list[str]) -> None:
        old = self.state.plan
        if old and old is not plan and workflow.patched("findings-of-every-plan"):
            self.state.earlier_steps += [s for s in old.steps if s.execution_res]  # the reporter's too
        self.state.plan, self.steps_cut = plan, steps_cut
        self.state.plan_version += 1
        if self.has_attributes:
            workflow.upsert_search_attributes([TITLE_ATTRIBUTE.value_set(plan.title[:200])])
        steps = "; ".join(f"{i + 1}. {s.title}" for i, s in enumerate(plan.steps))
        self.emit("plan", f"{plan.title}: {steps}" if steps else plan.title)
        if steps_cut:
            self.emit(
                "notice",
                f"the planner wrote {len(plan.steps) + len(steps_cut)} steps; the limit is "
                f"{self.request.max_step_num} (--max-step-num), so these were cut: {'; '.join(steps_cut)}",
            )

    def emit(self, kind: str, text: str = "", step: int | None = None) -> None:
        self.progress.publish(ProgressEvent(kind=kind, text=text, step=step))

    @workflow.query(name="status")
    def status(self) -> RunStatus:
        plan = self.state.plan
        return RunStatus(
            phase=self.phase,
            question=self.request.question,
            title=plan.title if plan else None,
            plan=plan,
            plan_iterations=self.state.plan_iterations,
            steps=self.team.statuses(plan),
            pending_question=self.question,
            review_pending=self.plan_review.pending,
            plan_version=self.state.plan_version,
            steps_cut=self.steps_cut,
            clarifications=self.state.clarifications,
            usage=self.state.usage,
            budget_exhausted=self.state.budget_exhausted,
            error=self.error,
            outcome=self.outcome,
            note=self.note,
            warnings=list(self.state.warnings),
            sources=len(self.state.sources),
            rate_limited_since=self.box.calls.waits.since(),
            steers=self.steering.views(),
            owner_wait=self.limits.waiting,
            **shares(self.request, self.state),
        )

    @workflow.signal(name="review")
    def review_signal(self, feedback: Any) -> None:
        """Fire-and-forget review (works with `temporal workflow signal`);
        invalid feedback is logged and ignored, and the run keeps waiting."""
        try:
            self.submit_review_validator(feedback)
        except ApplicationError as err:
            workflow.logger.warning("review signal ignored: %s", err.message)
            return
        self.plan_review.take(feedback)

    @workflow.update(name="submit_review")
    def submit_review(self, feedback: Any, plan_version: Any = None) -> str:
        return "plan accepted" if parse_review(self.plan_review.take(feedback)).accepted else "plan edit requested"

    @submit_review.validator
    def submit_review_validator(self, feedback: Any, plan_version: Any = None) -> None:
        feedback, plan_version = self.plan_review.unpack(feedback, plan_version)  # a string, or {"feedback", "by"}
        if not isinstance(feedback, str):
            raise ApplicationError("review feedback must be a string starting with [ACCEPTED] or [EDIT_PLAN]")
        if isinstance(plan_version, int) and plan_version > self.state.plan_version:
            latest = f"the latest is version {self.state.plan_version}" if self.state.plan_version else "no plan yet"
            raise ApplicationError(f"there is no plan version {plan_version} ({latest})")
        if plan_version is not None and plan_version != self.state.plan_version:
            raise ApplicationError(
                f"the plan has changed since you saw it (you reviewed version {plan_version}, "
                f"the plan waiting now is version {self.state.plan_version}): look at it again"
            )
        self.plan_review.check(clean_text(feedback), self.phase)

    @workflow.update(name="steer")
    def steer(self, raw: Any) -> SteerReply:
        """A note for the run, applied at its next safe point (workflows/steering.py)."""
        return self.steering.take(raw)

    @steer.validator
    def steer_validator(self, raw: Any) -> None:
        self.steering.check(raw)

    @workflow.signal(name="steer")
    def steer_signal(self, raw: Any) -> None:
        """The same for clients that only signal; an invalid steer is logged and ignored."""
        self.steering.signal(raw)

    @workflow.signal(name="clarify")
    def clarify_signal(self, answer: Any) -> None:
        try:
            self.answer_clarification_validator(answer)
        except ApplicationError as err:
            workflow.logger.warning("clarify signal ignored: %s", err.message)
            return
        self.answer = clean_text(answer).strip()

    @workflow.update(name="answer_clarification")
    def answer_clarification(self, answer: Any) -> str:
        self.answer = clean_text(answer).strip()
        return "answer received"

    @answer_clarification.validator
    def answer_clarification_validator(self, answer: Any) -> None:
        if self.question is None or self.answer is not None:
            raise ApplicationError(f"no clarification question is pending (phase: {self.phase})")
        if not isinstance(answer, str) or not clean_text(answer).strip():
            raise ApplicationError("the answer is empty")
