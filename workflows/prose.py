"""The ``Prose`` workflow, DeerFlow's writing assistant: a text (or a run's
report) rewritten as asked, in one model call (role prose).

Options: ``continue`` (write on), ``improve``, ``shorter``, ``longer``,
``fix`` (spelling and grammar), ``zap`` (do what ``command`` says).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.activity_calls import failure_reason
from workflows.side_calls import SideCalls

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.languages import guess_locale
    from workflows.models import Message, ModelRequest
    from workflows.side_models import ProseInput, ProseResult, SideStatus


@workflow.defn(name="Prose")
class Prose:
    @workflow.init
    def __init__(self, request: ProseInput) -> None:
        self.request = request
        self.calls = SideCalls()
        self.phase = "writing"
        self.error: str | None = None

    @workflow.run
    async def run(self, request: ProseInput) -> ProseResult:
        content = request.text
        if request.option == "zap":
            content = f"# What to do\n{request.command or 'Improve the text.'}\n\n# The text\n{request.text}"
        try:
            reply = await self.calls.write(
                ModelRequest(
                    role="prose",
                    prompt=f"prose_{request.option}",
                    variables={"locale": guess_locale(request.text)},
                    messages=[Message(role="user", content=content)],
                ),
                "prose",
            )
        except (ActivityError, ApplicationError) as err:
            self.error, self.phase = failure_reason(err), "failed"
            raise ApplicationError(self.error, type="ProseFailed", non_retryable=True) from err
        self.phase = "completed"
        return ProseResult(status="completed", option=request.option, text=reply.content, usage=self.calls.usage)

    @workflow.query(name="status")
    def status(self) -> SideStatus:
        return SideStatus(
            kind="prose",
            phase=self.phase,
            run_id=self.request.run_id,
            error=self.error,
            rate_limited_since=self.calls.waits.since(),
        )
