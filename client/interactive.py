"""The interactive part of `deepresearch run`: the live view, and the review
and clarification prompts at the terminal."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable

from rich.console import Console, RenderableType
from rich.text import Text
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.service import RPCError

from client.display import ProgressView, event_line, render_plan
from client.errors import CliError, rejection_reason
from client.follow import progress_events
from client.options import ACCEPT, EDIT, feedback_from_reply
from client.talk import POLL_SECONDS, next_action, poll_status, waiting_for_worker
from client.updates import execute_update
from client.users import acting
from infra.connection import Connection
from workflows.models import ResearchResult, RunStatus


class LineReader:
    """Reads stdin lines in a daemon thread, so the event loop (and the worker in
    it) keeps running while the user types, and Ctrl-C is never stuck in input()."""

    def __init__(self) -> None:
        self.eof = False
        self._line: asyncio.Future[str | None] | None = None

    def readline(self) -> asyncio.Future[str | None]:
        # A read still waiting is reused; a line typed for an abandoned prompt is dropped.
        if self._line is None or self._line.done():
            loop = asyncio.get_running_loop()
            future: asyncio.Future[str | None] = loop.create_future()

            def deliver(line: str) -> None:
                if not future.done():
                    future.set_result(line or None)

            threading.Thread(
                target=lambda: loop.call_soon_threadsafe(deliver, sys.stdin.readline()), daemon=True
            ).start()
            self._line = future
        return self._line


class TerminalReview:
    """Asks at the terminal when the run waits for a plan review or an answer."""

    def __init__(self, client: Client, handle: WorkflowHandle, view: ProgressView) -> None:
        self.client = client
        self.handle = handle
        self.view = view
        self.console = view.console
        self.reader = LineReader()
        # What was last answered here: right after an answer, a status can
        # still show the same plan or question pending, and must not ask again.
        self.answered: tuple[str, int] | None = None

    async def maybe_ask(self, status: RunStatus) -> None:
        if self.reader.eof:
            return
        if status.review_pending:
            if status.plan_version and self.answered == ("review", status.plan_version):
                return
            await self.ask(
                ("review", status.plan_version),
                render_plan(status.plan, status.steps_cut) if status.plan else Text("The plan is ready for review."),
                "Accept the plan? [Enter/y accepts, or type the changes you want] ",
                lambda s: s.review_pending,
                "submit_review",
                feedback_from_reply,
                extra=[status.plan_version] if status.plan_version else [],
            )
        elif status.phase == "clarifying" and status.pending_question:
            if self.answered == ("question", len(status.clarifications)):
                return
            await self.ask(
                ("question", len(status.clarifications)),
                Text(status.pending_question, style="bold yellow"),
                "Your answer: ",
                lambda s: s.phase == "clarifying" and bool(s.pending_question),
                "answer_clarification",
                str.strip,
            )

    async def ask(
        self,
        asked: tuple[str, int],
        intro: RenderableType,
        prompt: str,
        still_pending: Callable[[RunStatus], bool],
        update: str,
        to_argument: Callable[[str], str],
        extra: list | None = None,
    ) -> None:
        with self.view.paused():
            self.console.print(intro)
            while (line := await self.read_line(prompt, still_pending)) is not None:
                if not (argument := to_argument(line)):
                    continue
                try:  # bounded: no worker on the run's task queue is one line (client/updates.py)
                    # A review names who sent it (workflows/ownership.py).
                    sent = acting({"feedback": argument}) if update == "submit_review" else argument
                    reply = await execute_update(self.client, self.handle.id, update, [sent, *(extra or [])])
                except WorkflowUpdateFailedError as err:
                    self.console.print(Text(f"rejected: {rejection_reason(err)}", style="red"))
                    continue
                except CliError as err:
                    self.console.print(Text(str(err), style="red"))
                    return
                self.console.print(Text(f"{reply}: {what_next(argument)}", style="green"))
                self.answered = asked
                return

    async def read_line(self, prompt: str, still_pending: Callable[[RunStatus], bool]) -> str | None:
        """A typed line; None at end of input or once the question was answered elsewhere."""
        self.console.print(Text(prompt, style="bold"), end="")
        line = self.reader.readline()
        while not (await asyncio.wait({line}, timeout=1.0))[0]:
            status = await poll_status(self.handle)
            if status is not None and not still_pending(status):
                self.console.print("\n(answered elsewhere)")
                return None
        text = line.result()
        if text is None:
            self.reader.eof = True
            status = await poll_status(self.handle)
            hint = next_action(status, self.handle.id) if status else None
            self.console.print(f"\nend of input; {hint or 'nothing to send'}. Waiting for the run to finish.")
            return None
        if not sys.stdin.isatty():
            self.console.print(text.rstrip("\n"), markup=False)  # so a transcript shows the answer
        return text


def what_next(argument: str) -> str:
    """What happens after the user's answer, with their words kept on screen."""
    if argument.upper().startswith(ACCEPT):
        return "the research team starts"
    if argument.upper().startswith(EDIT):
        return f"revising the plan with your edit ({argument[len(EDIT) :].strip()})…"
    return f"thanks ({argument}); the coordinator goes on…"


FINAL_READ_SECONDS = 30.0  # how long the end of a run waits for its last tool calls to be printed (a query on
# a closed run is answered by a worker replaying it: seconds on a loaded machine)


async def show_tool_calls(client: Client, workflow_id: str, view: ProgressView) -> None:
    """Print each tool call (and each steer taken or applied) from the run's progress stream as it happens."""
    try:
        async for _, event in progress_events(client, workflow_id):  # by query: nothing added to the run's history
            if event.kind == "tool_call":
                view.note(event_line(event), style="dim")
            elif event.kind in ("steer_received", "steer_applied"):  # a note sent from elsewhere (`steer`)
                view.note(event_line(event), style="bold cyan")
    except (WorkflowQueryFailedError, RPCError) as err:  # its reads after the end failed: the result says the rest
        view.note(
            f"the last tool calls could not be read ({str(err)[:200]}); `deepresearch watch {workflow_id}` shows them",
            style="dim",
        )
    except Exception as err:  # noqa: BLE001 - said once; the run goes on, and `watch` reads the same stream
        view.note(
            f"tool calls can no longer be shown here ({type(err).__name__}: {str(err)[:200]}); "
            f"`deepresearch watch {workflow_id}` shows them",
            style="yellow",
        )


def ended(status: RunStatus | None, result: asyncio.Task) -> RunStatus | None:
    """The last status seen, with the result's counters: what the panel shows
    last when the status query after the end was not answered (a busy
    worker), so its counters are still the closing line's."""
    if status is None or result.cancelled() or result.exception() is not None:
        return None
    done = result.result()
    return status.model_copy(update={"phase": "completed", "outcome": done.status, "usage": done.usage})


async def follow_run(
    client: Client, handle: WorkflowHandle, conn: Connection, console: Console, worker: asyncio.Task | None
) -> ResearchResult:
    result = asyncio.create_task(handle.result())
    tool_calls: asyncio.Task | None = None
    try:
        with ProgressView(console, handle.id) as view:
            tool_calls = asyncio.create_task(show_tool_calls(client, handle.id, view))
            review = TerminalReview(client, handle, view)
            said_waiting, seen = False, None
            while not result.done():
                if worker is not None and worker.done():
                    worker.result()  # raises what stopped it
                    raise CliError("the in-process worker stopped unexpectedly")
                status = await poll_status(handle)
                if status is not None:
                    seen = status
                    view.update(status)
                    await review.maybe_ask(status)
                elif not said_waiting and worker is None:
                    view.note(waiting_for_worker(conn), style="yellow")
                    said_waiting = True
                await asyncio.wait({result}, timeout=POLL_SECONDS)
            if (final := await poll_status(handle) or ended(seen, result)) is not None:
                view.update(final)  # the last counters are the closing line's
            if tool_calls:  # its last read, after the end, prints the calls not shown yet
                await asyncio.wait({tool_calls}, timeout=FINAL_READ_SECONDS)
        return result.result()
    finally:
        result.cancel()
        if tool_calls:
            tool_calls.cancel()
