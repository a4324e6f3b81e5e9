"""Evidence without a wait: a research step's gathering (workflows/evidence.py)
overlaps what the run waits on anyway.

- **While the plan waits for review** every research step of the plan starts
  gathering (``Ahead``); an edit that keeps a step keeps its gathering, and
  only the steps the edit added or changed gather anew. A step whose
  gathering is done when it starts has its passages in its first message,
  as before.
- **Beside the first model turn** otherwise (``Later``): the agent's first
  turn starts at once, without the passages; they join the conversation
  after the first turn whose tools ran once they are there, so a model that
  searches by itself never waits for the workflow's search and crawls. A
  model that answers before it has seen them is asked again with them when
  they hold a page it did not read itself; one that called no tool at all
  keeps its answer when the passages hold it (a strong model that knew),
  else is asked its first request again, with them, and the run's later
  steps then gather first.

``step_key`` is the decision of which gathering a step can take over, a pure
function of the step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from temporalio import workflow

from workflows import evidence
from workflows.box import Box

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.evidence_models import Gathered
    from workflows.models import Message, Plan, Step
    from workflows.tool_models import ToolResult

LATER = "(Read for your step while you worked; use it with what you found.)\n\n"
AGAIN = "Write your findings again, now with these passages."


def step_key(step: Step) -> str:
    """What a step's gathering depends on (its queries and the passages' focus
    come from its title and description): a step an edit left as it was has
    the same key."""
    return "\n".join((step.step_type, " ".join(step.title.split()), " ".join(step.description.split())))


class Ahead:
    """Gatherings started before their steps run, by step key."""

    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task[Gathered]] = {}

    def start(self, box: Box, plan: Plan) -> None:
        """Gather for the research steps of a plan that waits for review; a
        step the plan no longer has keeps nothing (its gathering runs out
        unawaited: its searches and pages stay in the run's caches)."""
        wanted: dict[str, asyncio.Task[Gathered] | None] = {}
        for n, step in enumerate(plan.steps):
            if step.step_type != "research" or step.execution_res is not None:
                continue
            key = step_key(step)
            wanted[key] = self.tasks.get(key) or asyncio.create_task(
                evidence.gather(box, step, f"researcher · step {n + 1} · ahead")
            )
        self.tasks = {k: t for k, t in wanted.items() if t is not None}

    def take(self, step: Step) -> asyncio.Task[Gathered] | None:
        return self.tasks.pop(step_key(step), None)


class Later:
    """A step's evidence still being gathered when its agent's first turn
    starts: given to the agent once it is there (``ready``), or waited for
    when the agent would otherwise end without it (``due``)."""

    def __init__(
        self, task: asyncio.Task[Gathered], budget: int | None, holds: Callable[[str], Awaitable[bool]] | None = None
    ) -> None:
        self.task = task
        self.budget = budget
        self.holds = holds  # whether the passages hold an answer given before they came
        self.shown = False
        self.asked_again = False  # the model answered at once, calling no tool, before it saw the passages
        self.read: set[str] = set()  # the pages the agent read itself

    def ready(self, results: list[ToolResult]) -> list[Message]:
        """The passages as a message for the next turn, if gathered by now
        (once); [] otherwise. ``results``: what the agent's tools answered."""
        self.read.update(r.source or r.sources[0].url for r in results if r.blob and (r.source or r.sources))
        return self._message() if self.task.done() and not self.shown else []

    async def due(self) -> list[Message]:
        """The passages as a message, waiting for them if need be (once)."""
        if self.shown:
            return []
        await self.task
        return self._message()

    async def again(
        self, task: str, history: str | None, called: bool, answer: str = ""
    ) -> tuple[str | None, list[Message]] | None:
        """The next request for an agent that answered (``answer``) before it
        saw the passages: the first request again, the passages with the
        task, when it had called no tool; else its conversation, the passages
        and a word to write its findings again. None when there are none,
        when they come from pages it read itself, or when they hold its
        answer (its findings stand)."""
        if self.shown:
            return None
        await self.task
        found = self.task.result().evidence
        if called and found is not None and {p.url for p in found.pages} <= self.read:
            self.shown = True  # nothing it has not read: its findings stand
            return None
        if found is not None and self.holds is not None and answer and await self.holds(answer):
            self.shown = True  # what it wrote is what the passages say
            return None
        more = self._message()
        if not more:
            return None
        if not called:
            self.asked_again = True
            return None, [Message(role="user", content=task, blob=more[0].blob, budget=self.budget)]
        return history, [*more, Message(role="user", content=AGAIN)]

    def _message(self) -> list[Message]:
        self.shown = True
        found = self.task.result().evidence
        if found is None or not found.blob:
            return []
        return [Message(role="user", content=LATER, blob=found.blob, budget=self.budget)]
