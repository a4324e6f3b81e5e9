"""The ``DeepResearch`` workflow: coordinator → background investigation →
planner ⇄ human review → research team → (replanning) → reporter.

Deterministic and thin: every model and tool call is an activity (see
``workflows/agent.py``), every decision a pure function (``workflows/routing.py``).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError

from workflows import routing
from workflows.agent import Tools, agent_tools, failure_reason, run_agent

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.models import (
        PHASE_ATTRIBUTE,
        PROGRESS_TOPIC,
        TITLE_ATTRIBUTE,
        Carried,
        Message,
        ModelRequest,
        Phase,
        Plan,
        ProgressEvent,
        ResearchInput,
        ResearchResult,
        RunOutcome,
        RunStatus,
        StepStatus,
        Usage,
    )


@workflow.defn(name="DeepResearch")
class DeepResearch:
    @workflow.init
    def __init__(self, raw: Any, carried: Carried | None = None) -> None:
        # Validated here, not by the data converter: bad input from any client
        # (e.g. `temporal workflow start`) then fails the run with a clear
        # message instead of failing workflow tasks forever.
        self.invalid = routing.input_problem(raw)
        request = ResearchInput.model_validate(raw) if not self.invalid else ResearchInput(question="?")
        self.request = request
        self.phase: Phase = "coordinating"
        self.topic = request.question
        self.locale = request.locale or routing.guess_locale(request.question)
        self.background = ""
        self.plan: Plan | None = None
        self.plan_iterations = 0
        self.observations: list[str] = []
        self.running: set[int] = set()
        self.usage = Usage()
        self.stream = WorkflowStream(carried.stream if carried else None)  # live progress
        self.progress = self.stream.topic(PROGRESS_TOPIC, type=ProgressEvent)
        # Upsert phase and title only if the starter set them (i.e. the
        # server has them registered): an unregistered key fails the task.
        self.has_attributes = PHASE_ATTRIBUTE in workflow.info().typed_search_attributes
        self.tools = Tools(
            self.usage,
            request.max_search_results,
            workflow.info().workflow_id,
            lambda text: self.emit("tool_call", text),
        )
        self.feedback: str | None = None  # set by a review while one is pending
        self.review_pending = False
        self.question: str | None = None  # clarification question awaiting an answer
        self.answer: str | None = None
        self.error: str | None = None
        self.carried = carried
        if carried:  # a continued run picks up where the last one stopped
            self.topic, self.locale, self.background = carried.topic, carried.locale, carried.background
            self.plan, self.plan_iterations = carried.plan, carried.plan_iterations
            self.observations = carried.observations
            self.usage = self.tools.usage = carried.usage
            self.tools.sources = {c.url: c for c in carried.sources}
            self.tools.crawled = carried.crawled

    @workflow.run
    async def run(self, raw: Any, carried: Carried | None = None) -> ResearchResult:
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
        r = self.request
        if self.carried is None:
            # 1. Coordinator: answer small talk, decline harmful requests, or hand off.
            decision = await self.coordinate()
            if decision.kind == "answer":
                return self.finish("answered_directly", decision.text)
            if decision.kind == "decline":
                return self.finish("rejected", decision.text)
            self.topic = decision.topic
            self.locale = r.locale or decision.locale or self.locale

            # 2. Background investigation: index the user's documents, and one
            #    web search before planning.
            if r.resources or r.enable_background_investigation:
                self.set_phase("investigating")
            if r.resources:
                indexed = await self.tools.index_resources(r.resources)
                self.background += f"## Local documents\n{indexed}\n\n"
            if r.enable_background_investigation:
                self.background += (await self.tools.search(self.topic)).content

        # 3. Plan, review and research until the plan has enough context or
        #    the iteration limit is reached.
        planner = Planner(self, self.carried)
        if self.carried and self.carried.mid_plan and self.plan:
            # Continued between two batches of steps: finish the accepted plan.
            await self.run_steps(self.plan, planner)
            planner.replan(self.findings())
        while self.plan_iterations < r.max_plan_iterations:
            if workflow.info().is_continue_as_new_suggested():
                await self.continue_as_new(planner)
            plan = await planner.next_plan()
            if plan is None:
                if self.plan_iterations == 0:
                    return self.finish("plan_failed", planner.failure)
                break
            self.set_plan(plan)
            if plan.has_enough_context:
                break
            review = await self.review()
            if review is None:
                hours = r.review_timeout_hours
                return self.finish("review_timed_out", f"No plan review arrived within {hours} hours.")
            if not review.accepted:
                planner.edit(review.edit)
                continue
            self.plan_iterations += 1
            await self.run_steps(plan, planner)
            planner.replan(self.findings())

        # 4. Reporter.
        self.set_phase("reporting")
        report = routing.verify_citations(await self.report(), list(self.tools.sources.values()))
        return self.finish("completed", report)

    # --- 1. coordinator -------------------------------------------------------

    async def coordinate(self) -> routing.Coordination:
        r = self.request
        clarify = r.enable_clarification and r.max_clarification_rounds > 0
        tools = ["handoff_after_clarification" if clarify else "handoff_to_planner", "decline_request"]
        messages = [Message(role="user", content=r.question)]
        history, asked, transcript = None, 0, [r.question]
        while True:
            may_ask = clarify and asked < r.max_clarification_rounds
            variables = self.variables(
                clarify=may_ask,
                rounds_used=asked,
                max_rounds=r.max_clarification_rounds,
                rounds_left=r.max_clarification_rounds - asked,
            )
            reply = await self.tools.chat(
                ModelRequest(
                    role="coordinator",
                    prompt="coordinator",
                    variables=variables,
                    history=history,
                    messages=messages,
                    tools=tools,
                )
            )
            decision = routing.coordination(reply, r.question, may_ask=may_ask)
            if decision.kind != "ask":
                if clarify and asked and decision.kind == "answer":
                    # Out of questions: research what the user has told us.
                    return routing.Coordination("handoff", topic="\n".join(transcript))
                return decision
            asked += 1
            answer = await self.ask_user(decision.text)
            transcript += [f"Q: {decision.text}", f"A: {answer}"]
            history, messages = reply.history, [Message(role="user", content=answer)]

    async def ask_user(self, question: str) -> str:
        self.question, self.answer = question, None
        self.set_phase("clarifying")
        self.emit("question", question)
        await workflow.wait_condition(lambda: self.answer is not None)
        answer, self.question, self.answer = self.answer or "", None, None
        self.set_phase("coordinating")
        return answer

    # --- 3. human review --------------------------------------------------------

    async def review(self) -> routing.Review | None:
        """The human's verdict; None when the optional review timeout ends the wait."""
        r = self.request
        if r.auto_accept_plan:
            return routing.Review(accepted=True)
        self.feedback, self.review_pending = None, True
        self.set_phase("awaiting_review")
        self.emit("review_requested", "the plan is waiting for review")
        timeout = timedelta(hours=r.review_timeout_hours) if r.review_timeout_hours else None
        try:
            await workflow.wait_condition(lambda: self.feedback is not None, timeout=timeout)
        except TimeoutError:
            self.review_pending = False
            return routing.Review(accepted=True) if r.on_review_timeout == "accept" else None
        self.review_pending = False
        return routing.parse_review(self.feedback or "")

    # --- 3. research team ---------------------------------------------------------

    async def run_steps(self, plan: Plan, planner: Planner) -> None:
        self.set_phase("researching")
        limit = asyncio.Semaphore(self.request.max_parallel_steps)
        batches = routing.batches(plan, self.request.parallel_research)
        for n, batch in enumerate(batches):
            earlier = self.findings()  # steps see what finished before them
            await asyncio.gather(*(self.run_step(plan, i, earlier, limit) for i in batch))
            self.observations += [plan.steps[i].execution_res or "" for i in batch]
            # A long plan does not wait for its end to keep history bounded.
            if n + 1 < len(batches) and workflow.info().is_continue_as_new_suggested():
                if workflow.patched("continue-between-steps"):
                    await self.continue_as_new(planner, mid_plan=True)

    async def run_step(self, plan: Plan, index: int, earlier: str, limit: asyncio.Semaphore) -> None:
        step = plan.steps[index]
        async with limit:
            self.running.add(index)
            workflow.set_current_details(f"Step {index + 1}/{len(plan.steps)}: {step.title}")
            self.emit("step_started", step.title, index)
            task = f"# Research question\n{self.topic}\n\n# Your step\n## {step.title}\n{step.description}\n\n" + (
                f"# Findings of earlier steps\n{earlier}\n" if earlier else ""
            )
            session = f"{workflow.info().workflow_id}/{self.plan_iterations}/{index}"
            role = routing.AGENT_FOR_STEP[step.step_type]
            has_resources = bool(self.request.resources)
            step.execution_res = await run_agent(
                self.tools,
                role,
                task,
                self.variables(has_resources=has_resources),
                self.request.agent_max_turns,
                session,
                agent_tools(role, has_resources),
            )
            self.running.discard(index)
            self.emit("step_finished", step.title, index)

    def findings(self) -> str:
        if self.plan is None:
            return ""
        return "\n\n".join(f"## {s.title}\n{s.execution_res}" for s in self.plan.steps if s.execution_res)

    # --- 4. reporter ------------------------------------------------------------

    async def report(self) -> str:
        sources = "\n".join(f"- [{c.title or c.url}]({c.url})" for c in self.tools.sources.values())
        plan = self.plan
        parts = [f"# Research question\n{self.topic}"]
        if plan:
            parts.append(f"# Plan: {plan.title}\n{plan.thought}")
        parts.append(f"# Findings\n{self.findings() or self.background or '(none)'}")
        parts.append(f"# Sources you may cite\n{sources or '(none)'}")
        reply = await self.tools.chat(
            ModelRequest(
                role="reporter",
                prompt="reporter",
                variables=self.variables(report_style=self.request.report_style),
                messages=[Message(role="user", content="\n\n".join(parts))],
            )
        )
        return reply.content

    async def continue_as_new(self, planner: Planner, mid_plan: bool = False) -> None:
        """Hand the run's state to a fresh run: between plan iterations, or
        between two batches of an accepted plan's steps (``mid_plan``)."""
        carried = Carried(
            topic=self.topic,
            locale=self.locale,
            background=self.background,
            plan=self.plan,
            plan_iterations=self.plan_iterations,
            observations=self.observations,
            usage=self.usage,
            sources=list(self.tools.sources.values()),
            crawled=self.tools.crawled,
            planner_history=planner.history,
            planner_pending=planner.pending,
            mid_plan=mid_plan,
        )
        await self.stream.continue_as_new(
            lambda state: [self.request.model_dump(mode="json"), carried.model_copy(update={"stream": state})]
        )

    # --- results, status and messages -------------------------------------------

    def finish(self, status: RunOutcome, text: str) -> ResearchResult:
        self.set_phase("completed")
        self.emit("finished", status)
        return ResearchResult(
            status=status,
            question=self.request.question,
            locale=self.locale,
            final_report=text,
            plan=self.plan,
            plan_iterations=self.plan_iterations,
            observations=self.observations,
            citations=routing.cited(text, list(self.tools.sources.values())),
            usage=self.usage,
        )

    def variables(self, **extra: object) -> dict:
        return {
            "locale": self.locale,
            "current_time": workflow.now().strftime("%Y-%m-%d, %A"),
            **extra,
        }

    def set_phase(self, phase: Phase) -> None:
        self.phase = phase
        workflow.set_current_details(f"Phase: {phase}")
        if self.has_attributes:
            workflow.upsert_search_attributes([PHASE_ATTRIBUTE.value_set(phase)])
        self.emit("phase", phase)

    def set_plan(self, plan: Plan) -> None:
        self.plan = plan
        if self.has_attributes:
            workflow.upsert_search_attributes([TITLE_ATTRIBUTE.value_set(plan.title[:200])])
        steps = "; ".join(f"{i + 1}. {s.title}" for i, s in enumerate(plan.steps))
        self.emit("plan", f"{plan.title}: {steps}" if steps else plan.title)

    def emit(self, kind: str, text: str = "", step: int | None = None) -> None:
        self.progress.publish(ProgressEvent(kind=kind, text=text, step=step))

    @workflow.query(name="status")
    def status(self) -> RunStatus:
        steps = [
            StepStatus(
                title=s.title,
                step_type=s.step_type,
                status="done" if s.execution_res is not None else "running" if i in self.running else "pending",
            )
            for i, s in enumerate(self.plan.steps if self.plan else [])
        ]
        return RunStatus(
            phase=self.phase,
            question=self.request.question,
            title=self.plan.title if self.plan else None,
            plan=self.plan,
            plan_iterations=self.plan_iterations,
            steps=steps,
            pending_question=self.question,
            review_pending=self.review_pending,
            usage=self.usage,
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
        self.feedback = feedback

    @workflow.update(name="submit_review")
    def submit_review(self, feedback: str) -> str:
        self.feedback = feedback
        review = routing.parse_review(feedback)
        return "plan accepted" if review.accepted else "plan edit requested"

    @submit_review.validator
    def submit_review_validator(self, feedback: str) -> None:
        if self.review_pending and self.feedback is not None:
            raise ApplicationError("the plan has already been reviewed; its review is being processed")
        if not self.review_pending:
            raise ApplicationError(f"no plan is waiting for review (phase: {self.phase})")
        try:
            routing.parse_review(feedback)
        except routing.InvalidReview as err:
            raise ApplicationError(str(err)) from None

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


class Planner:
    """The planner's conversation: first plan, edits, replanning, and one
    more ask when a reply does not parse."""

    def __init__(self, run: DeepResearch, carried: Carried | None = None) -> None:
        self.run = run
        self.failure = ""
        if carried:
            self.history, self.pending = carried.planner_history, carried.planner_pending
            return
        self.history: str | None = None
        context = f"\n\n# Background investigation\n{run.background}" if run.background else ""
        self.pending = [Message(role="user", content=f"# Research question\n{run.topic}{context}")]

    def edit(self, change: str) -> None:
        self.pending.append(
            Message(role="user", content=f"The user reviewed the plan and asks for changes: {change}\nRevise the plan.")
        )

    def replan(self, findings: str) -> None:
        self.pending.append(
            Message(
                role="user",
                content=f"# Findings so far\n{findings}\n\nDo these findings answer the question? "
                "If not, plan the next steps.",
            )
        )

    async def next_plan(self) -> Plan | None:
        run, r = self.run, self.run.request
        run.set_phase("planning")
        for _ in range(2):
            reply = await run.tools.chat(
                ModelRequest(
                    role="planner",
                    prompt="planner",
                    reasoning=r.enable_deep_thinking,
                    variables=run.variables(max_step_num=r.max_step_num),
                    history=self.history,
                    messages=self.pending,
                    json_mode=True,
                )
            )
            self.history, self.pending = reply.history, []
            try:
                return routing.parse_plan(reply.content, r.max_step_num, run.locale)
            except routing.PlanError as err:
                self.failure = f"The planner did not produce a valid plan: {err}"
                self.pending = [
                    Message(
                        role="user", content=f"That reply was not a valid plan: {err}. Reply with the JSON plan only."
                    )
                ]
        return None
