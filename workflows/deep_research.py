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

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError

from workflows import coordinator, investigation, planner, reporter
from workflows.activity_calls import ActivityCalls, failure_reason
from workflows.box import Box
from workflows.research_team import ResearchTeam, batches
from workflows.review import PlanReview, Review, parse_review

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.languages import guess_locale
    from workflows.models import (
        PHASE_ATTRIBUTE,
        PROGRESS_TOPIC,
        TITLE_ATTRIBUTE,
        Phase,
        Plan,
        ProgressEvent,
        ResearchInput,
        ResearchResult,
        RunOutcome,
        RunStatus,
        StepStatus,
        input_problem,
    )
    from workflows.state import RunState


@workflow.defn(name="DeepResearch")
class DeepResearch:
    @workflow.init
    def __init__(self, raw: Any, carried: RunState | None = None) -> None:
        # Validated here, not by the data converter: bad input from any client
        # (e.g. `temporal workflow start`) then fails the run with a clear
        # message instead of failing workflow tasks forever.
        self.invalid = input_problem(raw)
        self.request = r = ResearchInput.model_validate(raw) if not self.invalid else ResearchInput(question="?")
        self.continued = carried is not None  # a continued run picks up where the last one stopped
        self.state = carried or RunState(topic=r.question, locale=r.locale or guess_locale(r.question))
        self.stream = WorkflowStream(self.state.stream)  # live progress
        self.progress = self.stream.topic(PROGRESS_TOPIC, type=ProgressEvent)
        calls = ActivityCalls(
            self.state, r.max_search_results, workflow.info().workflow_id, lambda text: self.emit("tool_call", text)
        )
        self.box = Box(r, self.state, calls, self.variables, self.emit)
        self.team = ResearchTeam(self.box)
        self.plan_review = PlanReview()
        self.phase: Phase = "coordinating"
        self.question: str | None = None  # clarification question awaiting an answer
        self.answer: str | None = None
        self.error: str | None = None
        # Upsert phase and title only if the starter set them (i.e. the
        # server has them registered): an unregistered key fails the task.
        self.has_attributes = PHASE_ATTRIBUTE in workflow.info().typed_search_attributes

    @workflow.run
    async def run(self, raw: Any, carried: RunState | None = None) -> ResearchResult:
        if self.invalid:
            self.error = f"invalid run settings: {self.invalid}"
            self.set_phase("failed")
            raise ApplicationError(self.error, type="InvalidInput", non_retryable=True)
        try:
            return await self.research()
        except ActivityError as err:
            self.error = failure_reason(err)
            self.set_phase("failed")
            self.emit("failed", self.error)
            raise ApplicationError(self.error, type="ResearchFailed", non_retryable=True) from err

    async def research(self) -> ResearchResult:
        r, s, box = self.request, self.state, self.box
        if not self.continued:
            # 1. Coordinator: answer small talk, decline harmful requests, or hand off.
            decision = await coordinator.coordinate(box, self.ask_user)
            if decision.kind == "answer":
                return self.finish("answered_directly", decision.text)
            if decision.kind == "decline":
                return self.finish("rejected", decision.text)
            s.topic = decision.topic
            s.locale = r.locale or decision.locale or s.locale

            # 2. Background investigation: index the user's documents, and one
            #    web search before planning.
            if r.resources or r.enable_background_investigation:
                self.set_phase("investigating")
            s.background += await investigation.investigate(box)
            planner.begin(s)

        # 3.-5. Plan, review and research until the plan has enough context or
        #       the iteration limit is reached.
        if s.mid_plan and s.plan:
            # Continued between two batches of steps: finish the accepted plan.
            s.mid_plan = False
            await self.research_team(s.plan)
            planner.replan(s, s.findings())
        while s.plan_iterations < r.max_plan_iterations:
            if workflow.info().is_continue_as_new_suggested():
                await self.continue_as_new()
            self.set_phase("planning")
            planned = await planner.next_plan(box)
            if planned.plan is None:
                if s.plan_iterations == 0:
                    return self.finish("plan_failed", planned.failure)
                break
            plan = planned.plan
            self.set_plan(plan)
            if plan.has_enough_context:
                break
            review = await self.review()
            if review is None:
                hours = r.review_timeout_hours
                return self.finish("review_timed_out", f"No plan review arrived within {hours} hours.")
            if not review.accepted:
                planner.edit(s, review.edit)
                continue
            s.plan_iterations += 1
            await self.research_team(plan)
            planner.replan(s, s.findings())

        # 6. Reporter.
        self.set_phase("reporting")
        return self.finish("completed", await reporter.write_report(box))

    # --- the boxes that talk to the user or hand over --------------------------

    async def ask_user(self, question: str) -> str:
        """A clarification question; waits (durably) for the answer."""
        self.question, self.answer = question, None
        self.set_phase("clarifying")
        self.emit("question", question)
        await workflow.wait_condition(lambda: self.answer is not None)
        answer, self.question, self.answer = self.answer or "", None, None
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
        timeout = timedelta(hours=r.review_timeout_hours) if r.review_timeout_hours else None
        review = await self.plan_review.wait(timeout)
        if review is None and r.on_review_timeout == "accept":
            return Review(accepted=True)
        return review

    async def research_team(self, plan: Plan) -> None:
        self.set_phase("researching")
        todo = batches(plan, self.request.parallel_research)
        for n, batch in enumerate(todo):
            await self.team.run_batch(plan, batch)
            # A long plan does not wait for its end to keep history bounded.
            if n + 1 < len(todo) and workflow.info().is_continue_as_new_suggested():
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
        self.set_phase("completed")
        self.emit("finished", status)
        s = self.state
        return ResearchResult(
            status=status,
            question=self.request.question,
            locale=s.locale,
            final_report=text,
            plan=s.plan,
            plan_iterations=s.plan_iterations,
            observations=s.observations,
            citations=reporter.cited(text, list(s.sources.values())),
            usage=s.usage,
        )

    def variables(self, **extra: object) -> dict:
        return {"locale": self.state.locale, "current_time": workflow.now().strftime("%Y-%m-%d, %A"), **extra}

    def set_phase(self, phase: Phase) -> None:
        self.phase = phase
        workflow.set_current_details(f"Phase: {phase}")
        if self.has_attributes:
            workflow.upsert_search_attributes([PHASE_ATTRIBUTE.value_set(phase)])
        self.emit("phase", phase)

    def set_plan(self, plan: Plan) -> None:
        self.state.plan = plan
        if self.has_attributes:
            workflow.upsert_search_attributes([TITLE_ATTRIBUTE.value_set(plan.title[:200])])
        steps = "; ".join(f"{i + 1}. {s.title}" for i, s in enumerate(plan.steps))
        self.emit("plan", f"{plan.title}: {steps}" if steps else plan.title)

    def emit(self, kind: str, text: str = "", step: int | None = None) -> None:
        self.progress.publish(ProgressEvent(kind=kind, text=text, step=step))

    @workflow.query(name="status")
    def status(self) -> RunStatus:
        plan = self.state.plan
        steps = [
            StepStatus(
                title=s.title,
                step_type=s.step_type,
                status="done" if s.execution_res is not None else "running" if i in self.team.running else "pending",
            )
            for i, s in enumerate(plan.steps if plan else [])
        ]
        return RunStatus(
            phase=self.phase,
            question=self.request.question,
            title=plan.title if plan else None,
            plan=plan,
            plan_iterations=self.state.plan_iterations,
            steps=steps,
            pending_question=self.question,
            review_pending=self.plan_review.pending,
            usage=self.state.usage,
            error=self.error,
        )

    @workflow.signal(name="review")
    def review_signal(self, feedback: str) -> None:
        """Fire-and-forget review (works with `temporal workflow signal`);
        invalid feedback is logged and ignored, and the run keeps waiting."""
        try:
            self.submit_review_validator(feedback)
        except ApplicationError as err:
            workflow.logger.warning("review signal ignored: %s", err.message)
            return
        self.plan_review.feedback = feedback

    @workflow.update(name="submit_review")
    def submit_review(self, feedback: str) -> str:
        self.plan_review.feedback = feedback
        return "plan accepted" if parse_review(feedback).accepted else "plan edit requested"

    @submit_review.validator
    def submit_review_validator(self, feedback: str) -> None:
        self.plan_review.check(feedback, self.phase)

    @workflow.signal(name="clarify")
    def clarify_signal(self, answer: str) -> None:
        try:
            self.answer_clarification_validator(answer)
        except ApplicationError as err:
            workflow.logger.warning("clarify signal ignored: %s", err.message)
            return
        self.answer = answer.strip()

    @workflow.update(name="answer_clarification")
    def answer_clarification(self, answer: str) -> str:
        self.answer = answer.strip()
        return "answer received"

    @answer_clarification.validator
    def answer_clarification_validator(self, answer: str) -> None:
        if self.question is None or self.answer is not None:
            raise ApplicationError(f"no clarification question is pending (phase: {self.phase})")
        if not isinstance(answer, str) or not answer.strip():
            raise ApplicationError("the answer is empty")
