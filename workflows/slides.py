"""The ``Slides`` workflow: a finished run's report as a slide deck (id
``<run id>-slides``).

    1. outline   one model call (role slides) writes Marp markdown
    2. deck      the worker parses it and builds a .pptx (title slide, one
                 slide per section, tables, notes, a sources slide with the
                 run's verified citations as links)
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.activity_calls import failure_reason
from workflows.side_calls import SideCalls

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.models import PROGRESS_TOPIC, Message, ModelRequest, ProgressEvent
    from workflows.side_models import DeckRequest, SideStatus, SlidesResult, SourceReport


@workflow.defn(name="Slides")
class Slides:
    @workflow.init
    def __init__(self, source: SourceReport) -> None:
        self.source = source
        self.calls = SideCalls()
        self.phase = "writing"
        self.error: str | None = None
        self.stream = WorkflowStream()
        self.progress = self.stream.topic(PROGRESS_TOPIC, type=ProgressEvent)

    @workflow.run
    async def run(self, source: SourceReport) -> SlidesResult:
        s = source
        sources = "\n".join(f"- [{c.title or c.url}]({c.url})" for c in s.citations) or "(none)"
        request = ModelRequest(
            role="slides",
            prompt="slides",
            variables={"locale": s.locale, "current_time": workflow.now().strftime("%Y-%m-%d")},
            messages=[Message(role="user", content=f"# Report\n{s.report}\n\n# Sources\n{sources}")],
        )
        try:
            # 1. Outline, as Marp markdown.
            reply = await self.calls.write(request, "slides")
            # 2. The deck; asked once more if no slide can be read from it.
            self.set_phase("building")
            try:
                deck = await self.calls.build_deck(
                    DeckRequest(markdown=reply.content, title=s.title, citations=s.citations)
                )
            except ActivityError as err:
                problem = failure_reason(err)
                self.set_phase("writing", problem)
                retry = request.model_copy(
                    update={
                        "history": reply.history,
                        "messages": [Message(role="user", content=f"{problem}. Write the slides again as asked.")],
                    }
                )
                reply = await self.calls.write(retry, "slides")
                self.set_phase("building")
                deck = await self.calls.build_deck(
                    DeckRequest(markdown=reply.content, title=s.title, citations=s.citations)
                )
        except (ActivityError, ApplicationError) as err:
            self.error = failure_reason(err)
            self.set_phase("failed", self.error)
            raise ApplicationError(self.error, type="SlidesFailed", non_retryable=True) from err
        self.set_phase("completed", f"{deck.slides} slides" + (f"; {deck.cut}" if deck.cut else ""))
        return SlidesResult(
            status="completed", run_id=s.run_id, markdown=reply.content, deck=deck, usage=self.calls.usage
        )

    def set_phase(self, phase: str, text: str = "") -> None:
        self.phase = phase
        workflow.set_current_details(f"Slides: {phase}" + (f" ({text})" if text else ""))
        self.progress.publish(ProgressEvent(kind="phase", text=f"{phase}: {text}" if text else phase))

    @workflow.query(name="status")
    def status(self) -> SideStatus:
        return SideStatus(
            kind="slides",
            phase=self.phase,
            run_id=self.source.run_id,
            error=self.error,
            rate_limited_since=self.calls.waits.since(),
        )
