"""The ``FollowUp`` workflow (id ``<run id>-ask``): follow-up questions on a
finished research run, as one durable thread.

    1. load the run's report, findings and sources (once)
    2. wait, for days if need be, for the next question (Update ``ask``)
    3. answer it from the findings and the thread so far (role FOLLOWUP)
    4. when the model says the findings do not suffice, research more (a child
       ``DeepResearch`` run, plan auto-accepted unless the asker wants to
       review it) and answer again with what it found
    5. check the answer's citations as the reporter's are checked, and keep
       the turn; continue as new when the history grows

Each answer knows the earlier questions and answers of the thread. Nothing
from any other run reaches the thread.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.workflow import ParentClosePolicy

from workflows import continuation, reporter
from workflows.activity_calls import MODEL_CALL, summary
from workflows.rate_limits import ProviderWaits, model_queue

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.clean import clean_text
    from workflows.follow_up_models import (
        MAX_QUESTION,
        FollowUpAnswer,
        FollowUpInput,
        ThreadPhase,
        ThreadState,
        ThreadStatus,
        ThreadTurn,
    )
    from workflows.models import (
        OWNER_ATTRIBUTE,
        PHASE_ATTRIBUTE,
        SHARED_ATTRIBUTE,
        Message,
        ModelReply,
        ModelRequest,
        ResearchInput,
        ResearchResult,
    )
    from workflows.prior import MAX_PRIOR_FINDINGS, merge_sources

NEEDS_RESEARCH = "[NEEDS_RESEARCH]"
IDLE = timedelta(days=180)  # a thread with no question for this long ends; a new one starts on the next
MAX_TURNS_KEPT = 20  # turns carried across continue-as-new and shown to the model
CONTINUE_AFTER_EVENTS = 2000


def needs_research(answer: str) -> bool:
    """Whether the model said the findings do not answer the question."""
    return NEEDS_RESEARCH.lower() in answer[:300].lower()


def without_marker(answer: str) -> str:
    head = answer[:300]
    at = head.lower().find(NEEDS_RESEARCH.lower())
    return (answer[:at] + answer[at + len(NEEDS_RESEARCH) :]).strip() if at >= 0 else answer.strip()


def owner_pairs(given: FollowUpInput) -> list[SearchAttributePair]:
    """The thread's owner and sharing as its research runs' search attributes
    (none for a thread without an owner, or a server without them)."""
    if not (given.owner and given.owner_attributes):
        return []
    pairs: list[SearchAttributePair] = [SearchAttributePair(OWNER_ATTRIBUTE, given.owner)]
    if given.shared_with:
        pairs.append(SearchAttributePair(SHARED_ATTRIBUTE, list(given.shared_with)))
    return pairs


def thread_request(state: ThreadState, question: str) -> str:
    """What the FOLLOWUP model is shown: the run's findings, its report,
    what was found since, the citable sources, the thread, the question."""
    prior = state.prior
    assert prior is not None
    parts = [
        f"# Findings of the research run {prior.run_id} ({prior.date})\nIts question: {prior.question}\n\n"
        f"{prior.findings or '(none)'}",
        f"# Its report\n{prior.report}",
    ]
    if state.found_since:
        parts.append("# Found since, for earlier follow-up questions\n" + "\n\n".join(state.found_since))
    sources = "\n".join(f"- [{c.title or c.url}]({c.url})" for c in state.sources.values())
    parts.append(f"# Sources you may cite\n{sources or '(none)'}")
    if state.turns:
        thread = "\n\n".join(f"Q: {t.question}\nA: {t.answer}" for t in state.turns[-MAX_TURNS_KEPT:])
        parts.append(f"# This conversation so far\n{thread}")
    parts.append(f"# The question\n{question}")
    return "\n\n".join(parts)


@workflow.defn(name="FollowUp")
class FollowUp:
    @workflow.init
    def __init__(self, raw: Any, carried: Any = None) -> None:
        self.input = FollowUpInput.model_validate(raw)
        self.state = ThreadState.model_validate(carried) if carried is not None else ThreadState()
        self.queue: list[tuple[int, str, bool]] = []  # (id, question, review further research)
        self.answers: dict[int, FollowUpAnswer] = {}
        self.phase: ThreadPhase = "loading"
        self.research_run: str | None = None
        self.waits = ProviderWaits(lambda: self.state.usage)  # the provider's rate limit, waited out

    @workflow.run
    async def run(self, raw: Any, carried: Any = None) -> ThreadStatus:
        s = self.state
        if s.prior is None:  # 1. the run's findings, once per thread
            s.prior = await continuation.load_prior(self.input.run_id, None)
            assert s.prior is not None
            merge_sources(s.sources, s.prior)
        while True:
            self.phase = "waiting"
            try:  # 2. the next question, however long it takes
                await workflow.wait_condition(lambda: bool(self.queue), timeout=IDLE)
            except TimeoutError:
                break
            qid, question, review = self.queue.pop(0)
            try:
                self.answers[qid] = await self.answer(question, review)
            except ApplicationError as err:  # the asker gets the reason; the thread goes on
                self.answers[qid] = FollowUpAnswer(
                    workflow_id=workflow.info().workflow_id, answer=f"No answer: {err.message}"
                )
            workflow.set_current_details(self.transcript())
            workflow.upsert_memo({"questions": s.asked})
            if not self.queue and (
                workflow.info().is_continue_as_new_suggested()
                or workflow.info().get_current_history_length() > CONTINUE_AFTER_EVENTS
            ):
                await workflow.wait_condition(workflow.all_handlers_finished)
                s.turns = s.turns[-MAX_TURNS_KEPT:]
                workflow.continue_as_new(args=[self.input.model_dump(mode="json"), s.model_dump(mode="json")])
        self.phase = "ended"
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.status()

    async def answer(self, question: str, review: bool) -> FollowUpAnswer:
        s = self.state
        self.phase = "answering"
        text = (await self.chat(question, "followup · answering")).content
        research_run = None
        if needs_research(text):  # 4. the findings do not suffice: research more
            research_run = await self.research(question, review)
            text = (await self.chat(question, "followup · answering with new findings")).content
        text = reporter.verify_citations(without_marker(text), list(s.sources.values()))
        if not text:
            text = "The findings of this run do not answer the question."
        citations = reporter.cited(text, list(s.sources.values()))
        turn = ThreadTurn(
            question=question,
            answer=text,
            citations=citations,
            researched=research_run is not None,
            research_run=research_run,
        )
        s.turns = [*s.turns, turn][-MAX_TURNS_KEPT:]
        return FollowUpAnswer(workflow_id=workflow.info().workflow_id, **turn.model_dump(exclude={"question"}))

    async def chat(self, question: str, where: str) -> ModelReply:
        request = ModelRequest(
            role="followup",
            prompt="followup",
            variables={
                "locale": (self.state.prior.locale if self.state.prior else "") or "en-US",
                "current_time": workflow.now().strftime("%Y-%m-%d, %A"),
                "marker": NEEDS_RESEARCH,
            },
            messages=[Message(role="user", content=thread_request(self.state, question))],
        )
        reply = await self.waits.call(
            "chat", request, result_type=ModelReply, summary=summary(where), options=MODEL_CALL, task_queue=model_queue
        )
        usage = self.state.usage
        usage.llm_calls += 1
        usage.prompt_tokens += reply.prompt_tokens
        usage.completion_tokens += reply.completion_tokens
        return reply

    async def research(self, question: str, review: bool) -> str:
        """A small research run for a question the findings cannot answer; its
        findings and sources join the thread's. Returns its id."""
        s = self.state
        s.researched += 1
        run_id = f"{self.input.run_id}-ask-research-{s.researched}"
        self.phase, self.research_run = "researching", run_id
        # The question alone ("who built it?") may not say what it is about: the run's question does.
        about = s.prior.question[:2000] if s.prior else ""
        topic = f"{question}\n\n(A follow-up question on earlier research into: {about})" if about else question
        owned = {"owner": self.input.owner, "shared_with": self.input.shared_with} if self.input.owner else {}
        request = ResearchInput(question=topic, max_step_num=2, auto_accept_plan=not review, **owned)
        attributes = (
            TypedSearchAttributes([SearchAttributePair(PHASE_ATTRIBUTE, "coordinating"), *owner_pairs(self.input)])
            if self.input.search_attributes
            else None
        )
        result: ResearchResult = await workflow.execute_child_workflow(
            "DeepResearch",
            request,
            id=run_id,
            result_type=ResearchResult,
            parent_close_policy=ParentClosePolicy.ABANDON,
            static_summary=summary(f"follow-up research: {question}"),
            memo={"question": question[:1000]},  # what `list` and the desk show of it, as of any run
            search_attributes=attributes,
        )
        self.research_run = None
        s.usage.llm_calls += result.usage.llm_calls
        s.usage.prompt_tokens += result.usage.prompt_tokens
        s.usage.completion_tokens += result.usage.completion_tokens
        s.usage.searches += result.usage.searches
        s.usage.crawls += result.usage.crawls
        s.usage.rate_limited += result.usage.rate_limited
        s.usage.rate_limited_seconds = round(s.usage.rate_limited_seconds + result.usage.rate_limited_seconds, 3)
        found = "\n\n".join(result.observations) or result.final_report
        s.found_since.append(f"## {question}\n{found[:MAX_PRIOR_FINDINGS]}")
        for citation in result.citations:
            s.sources.setdefault(citation.url, citation)
        self.phase = "answering"
        return run_id

    def transcript(self) -> str:
        """The thread as the Temporal UI shows it (current details)."""
        lines = [f"**Follow-up questions on run {self.input.run_id}** ({self.state.asked} asked)"]
        for turn in self.state.turns[-5:]:
            more = " *(researched more)*" if turn.researched else ""
            lines.append(f"- **Q:** {turn.question[:200]}\n  **A:** {turn.answer[:300]}{more}")
        return "\n".join(lines)[:2000]

    @workflow.update(name="ask")
    async def ask(self, question: Any, review: Any = False) -> FollowUpAnswer:
        qid = self.state.asked
        self.state.asked += 1
        self.queue.append((qid, clean_text(question).strip()[:MAX_QUESTION], bool(review)))
        await workflow.wait_condition(lambda: qid in self.answers)
        return self.answers.pop(qid)

    @ask.validator
    def ask_validator(self, question: Any, review: Any = False) -> None:
        if not isinstance(question, str) or not clean_text(question).strip():
            raise ApplicationError("the question is empty")
        if len(clean_text(question).strip()) > MAX_QUESTION:  # it was cut there without a word
            raise ApplicationError(f"the question is longer than {MAX_QUESTION:,} characters: shorten it")
        if self.phase == "ended":
            raise ApplicationError("this thread has ended; ask again to start a new one")

    @workflow.query(name="status")
    def status(self) -> ThreadStatus:
        return ThreadStatus(
            run_id=self.input.run_id,
            phase=self.phase,
            questions=self.state.asked,
            turns=self.state.turns,
            waiting=[q for _, q, _ in self.queue],
            research_run=self.research_run,
            usage=self.state.usage,
            rate_limited_since=self.waits.since(),
        )
