"""What a research run knows, in one model owned by the workflow.

``RunState`` is everything a run has gathered (topic, plan, findings, usage,
sources, crawl cache, the planner's conversation, the progress stream), so
continue-as-new hands it whole to the next run. What a new run starts afresh
(the phase, which steps are running, a pending review or question) lives on
the workflow object.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator
from temporalio.contrib.workflow_streams import WorkflowStreamState

from workflows.evidence_models import Gathered, StepEvidence
from workflows.models import Citation, Clarification, Message, Model, Plan, Step, Usage
from workflows.prior import PriorRun
from workflows.recheck_models import Recheck
from workflows.steer_models import SteerRecord
from workflows.support_models import Statement
from workflows.tool_models import ToolResult


class AgentCheckpoint(Model):
    """Where an agent's loop stands between two turns, so a step can go on in
    the next run after continue-as-new."""

    history: str | None = None  # blob ref of the conversation so far
    messages: list[Message] = Field(default_factory=list)  # turns for the next model call
    turns: int = 0  # model calls made
    cells: list[str] = Field(default_factory=list)  # code the step's sandbox session has run
    cell_refs: list[str] = Field(default_factory=list)  # the same, as blob references (newer runs)
    gathered: Gathered | None = None  # what the step read before its first turn
    steers_seen: int = 0  # the run's steers this agent has been told (workflows/steering.py)


class RunState(Model):
    topic: str
    locale: str
    background: str = ""  # what the background investigation found
    plan: Plan | None = None  # the current plan; finished steps carry their findings
    plan_iterations: int = 0  # accepted plans and replanning rounds
    observations: list[str] = Field(default_factory=list)  # each finished step's findings, in order
    usage: Usage = Field(default_factory=Usage)
    sources: dict[str, Citation] = Field(default_factory=dict)  # retrieved sources by URL
    crawled: dict[str, ToolResult] = Field(default_factory=dict)  # the per-run crawl cache
    searched: dict[str, ToolResult] = Field(default_factory=dict)  # the per-run search cache
    planner_history: str | None = None  # blob ref of the planner's conversation
    planner_pending: list[Message] = Field(default_factory=list)  # turns for its next call
    stream: WorkflowStreamState | None = None  # the progress stream, when continuing
    mid_plan: bool = False  # continued between two batches of an accepted plan's steps
    agents: dict[int, AgentCheckpoint] = Field(default_factory=dict)  # paused steps, by index
    clarifications: list[Clarification] = Field(default_factory=list)  # the user's answers, word for word
    plan_version: int = 0  # counts the plans shown for review
    budget_exhausted: bool = False  # the token budget stopped the research
    outputs: list[str] = Field(default_factory=list)  # blob refs of long tool outputs (MCP, code) to read on
    windows: dict[str, int] = Field(default_factory=dict)  # context windows learned from the provider, by role
    prior: PriorRun | None = None  # the earlier run this one builds on (--continue-from, a schedule)
    warnings: list[str] = Field(default_factory=list)  # for the result and status (Box.warn)
    evidence: list[StepEvidence] = Field(default_factory=list)  # what finished research steps rest on
    earlier_steps: list[Step] = Field(default_factory=list)  # finished steps of plans replaced since
    fallback_plan: bool = False  # the plan is the question as one step (no usable plan came)
    reporter_input: str | None = None  # the reporter's request as sent (blob), for the eval
    recheck: Recheck | None = None  # what re-reading the prior run's sources found (workflows/recheck.py)
    statements: list[Statement] = Field(default_factory=list)  # the report's, traced (workflows/statements.py)
    steers: list[SteerRecord] = Field(default_factory=list)  # notes sent while it ran (workflows/steering.py)
    plan_accepted_by: str | None = None  # the user who accepted the plan (workflows/ownership.py)
    # Tokens the run may use under its owner's daily budget (workflows/owner_limits.py),
    # and why the research stopped early when a budget stopped it.
    owner_allowance: int | None = None
    budget_note: str | None = None

    @field_validator("sources", mode="before")
    @classmethod
    def _sources_by_url(cls, value: Any) -> Any:
        # Runs continued before the state was one model carried a list.
        if isinstance(value, list):
            return {c["url"] if isinstance(c, dict) else c.url: c for c in value}
        return value

    def finished(self) -> list[Step]:
        """Every finished step: of earlier plans, then of the current one."""
        return self.earlier_steps + [s for s in (self.plan.steps if self.plan else []) if s.execution_res]

    def pages_with_text(self) -> list[ToolResult]:
        """This run's crawls that gave a page's text, each naming its page first."""
        return [r for r in self.crawled.values() if not r.error and r.blob and r.sources]

    def findings(self) -> str:
        """Every finished step's findings, as markdown sections."""
        return "\n\n".join(f"## {s.title}\n{s.execution_res}" for s in self.finished() if s.execution_res)


def state_problem(carried: Any) -> str | None:
    """None if ``carried`` is a continued run's state (or absent), else one line."""
    if carried is None:
        return None
    try:
        RunState.model_validate(carried)
    except ValueError as err:  # pydantic's ValidationError is a ValueError
        return f"the second workflow argument is not a continued run's state ({str(err).splitlines()[0]})"
    return None
