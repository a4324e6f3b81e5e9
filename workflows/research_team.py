"""Step 5 of the flow, the research team: the plan's steps, each done by an
agent — research steps by the researcher (web search, crawl, local search),
processing steps by the coder (Python), analysis steps by the analyst (no
tools). Consecutive research steps run side by side; a step sees the
findings of the steps finished before it.

``batches`` is the decision, a pure function of the plan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from temporalio import workflow

from workflows import evidence
from workflows.agent import Finished, agent_tools, run_agent
from workflows.box import Box
from workflows.evidence_ahead import Ahead, Later
from workflows.steering import Steering

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.evidence_models import EvidencePage, Gathered, StepEvidence
    from workflows.models import Plan, Step, StepStatus
    from workflows.state import AgentCheckpoint

AGENT_FOR_STEP = {"research": "researcher", "processing": "coder", "analysis": "analyst"}
EARLY_ANSWER_HELD = 0.75  # share of an answer given before its step's passages came that they must hold to stand


def batches(plan: Plan, parallel: bool) -> list[list[int]]:
    """Indexes of steps to run together. Consecutive research steps form one
    batch; processing and analysis steps wait for everything before them,
    and the steps after them wait for them. Sequential mode: one at a time."""
    todo = [i for i, step in enumerate(plan.steps) if step.execution_res is None]
    if not parallel:
        return [[i] for i in todo]
    groups: list[list[int]] = []
    for i in todo:
        if plan.steps[i].step_type == "research" and groups and _all_research(plan, groups[-1]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _all_research(plan: Plan, group: list[int]) -> bool:
    return all(plan.steps[i].step_type == "research" for i in group)


class ResearchTeam:
    """Runs batches of a plan's steps, at most ``max_parallel_steps`` at once,
    and knows which are running (for the status query)."""

    def __init__(self, box: Box, steering: Steering) -> None:
        self.box = box
        self.steering = steering  # notes sent while the run runs: in each task and between turns
        self.running: set[int] = set()
        self.limit = asyncio.Semaphore(box.request.max_parallel_steps)
        self.ahead = Ahead()  # evidence gathered while the plan waits for review
        self.gather_first = False  # the model answered before it saw its passages: later steps wait for them
        self.listing: list[asyncio.Task[list[dict]]] = []  # the agents' MCP tools, listed ahead

    def tools_ahead(self) -> None:
        """List the agents' MCP tools now, while the run investigates and
        plans (a first turn needs them), instead of before each role's first turn."""
        if workflow.patched("mcp-tools-ahead"):
            for role in ("researcher", "coder"):
                self.listing.append(asyncio.create_task(self.box.calls.mcp_tools(role)))

    def gather_ahead(self, plan: Plan) -> None:
        """While ``plan`` waits for its review, its research steps gather
        their evidence (workflows/evidence_ahead.py)."""
        r = self.box.request
        # evidence-ahead first: a history recorded before it has gather-evidence's
        # marker later, at its first step, not at the review
        if r.evidence_pages > 0 and workflow.patched("evidence-ahead") and workflow.patched("gather-evidence"):
            self.ahead.start(self.box, plan)

    async def run_batch(self, plan: Plan, batch: list[int]) -> bool:
        """Run the steps of ``batch``; False when some paused for continue-as-new."""
        earlier = self.box.state.findings()  # steps see what finished before them
        await asyncio.gather(*(self.run_step(plan, i, earlier) for i in batch))
        done = [i for i in batch if plan.steps[i].execution_res is not None]
        self.box.state.observations += [plan.steps[i].execution_res or "" for i in done]
        return len(done) == len(batch)

    async def run_step(self, plan: Plan, index: int, earlier: str) -> None:
        box, step = self.box, plan.steps[index]
        async with self.limit:
            self.running.add(index)
            workflow.set_current_details(f"Step {index + 1}/{len(plan.steps)}: {step.title}")
            box.emit("step_started", step.title, index)
            role = AGENT_FOR_STEP[step.step_type]
            where = f"{role} · step {index + 1}"
            resume = box.state.agents.pop(index, None)
            reads = role == "researcher" and box.request.evidence_pages > 0 and workflow.patched("gather-evidence")
            gathered = resume.gathered if resume else None
            following, later = None, None
            if reads and resume is None:
                given = await self.steering.read_pages() if box.state.steers else []  # pages a steer gave
                pending = self.gathering(step, where, given)
                if pending is None or pending.done() or self.gather_first:
                    gathered = await pending if pending else await evidence.gather(box, step, where, given)
                    following = evidence.follow_lead(box, gathered, where)
                else:  # beside the agent's first turn; its lead once it is gathered
                    later = Later(pending, box.request.evidence_tokens, self.holds(step, pending, where))
                    following = asyncio.create_task(self.lead_after(pending, where))
            try:
                outcome = await self.agent(step, index, earlier, resume, gathered, where, later)
            except BaseException:
                if following:
                    following.cancel()
                raise
            if later:
                gathered = await later.task
                self.gather_first = self.gather_first or later.asked_again
            if following:
                await following  # its pages, for the findings (or the paused step's checkpoint)
            if isinstance(outcome, AgentCheckpoint):  # paused: the next run goes on from here
                outcome.gathered = gathered
                box.state.agents[index] = outcome
            else:
                step.execution_res = await self.findings(step, outcome, gathered if reads else None, where)
                box.emit("step_finished", step.title, index)
            self.running.discard(index)

    def gathering(self, step: Step, where: str, given: list[EvidencePage]) -> asyncio.Task[Gathered] | None:
        """The step's gathering: started ahead (the plan's review), or now;
        None on histories recorded before gathering overlapped the first turn.
        ``given``: pages a steer sent (a gathering started ahead has none of them)."""
        if not workflow.patched("evidence-beside-turn"):
            return None
        ahead = self.ahead.take(step)
        if ahead and not given:
            return ahead
        return asyncio.create_task(evidence.gather(self.box, step, where, given))

    def holds(self, step: Step, pending: asyncio.Task[Gathered], where: str) -> Callable[[str], Awaitable[bool]]:
        """Whether the step's passages hold an answer its agent gave before
        they came: most of its statements stated or derived from them
        (activities/support.py); an answer with nothing to judge is not held."""

        async def check(answer: str) -> bool:
            support = await evidence.support(self.box, step, answer, None, await pending, f"{where} · early answer")
            share = support.statements.supported_share() if support.statements else None
            return share is not None and share >= EARLY_ANSWER_HELD

        return check

    async def lead_after(self, pending: asyncio.Task[Gathered], where: str) -> None:
        following = evidence.follow_lead(self.box, await pending, where)
        if following:
            await following

    async def agent(
        self,
        step: Step,
        index: int,
        earlier: str,
        resume: AgentCheckpoint | None,
        gathered: Gathered | None,
        where: str,
        later: Later | None = None,
    ) -> Finished | AgentCheckpoint:
        """The step's agent loop, from the evidence it gathered (or from where it paused)."""
        box, role = self.box, AGENT_FOR_STEP[step.step_type]
        task, told = self.task(step, earlier), 0
        if resume is None:  # a step starting now: told every steer so far
            task, told = self.steering.into_task(task, where)
        return await run_agent(
            box.calls,
            role,
            task,
            box.variables(has_resources=bool(box.request.resources)),
            box.request.agent_max_turns,
            f"{workflow.info().workflow_id}/{box.state.plan_iterations}/{index}",
            agent_tools(role, bool(box.request.resources)),
            out_of_budget=box.out_of_budget,
            resume=resume,
            where=where,
            evidence=gathered.evidence.blob if gathered and gathered.evidence else None,
            evidence_tokens=box.request.evidence_tokens,
            later=later,
            guidance=self.steering.for_turn,
            told=told,
        )

    def statuses(self, plan: Plan | None) -> list[StepStatus]:
        """Each step of ``plan`` as ``status`` shows it: done, running or
        pending, and how a finished research step's findings are supported."""
        traced = {e.title: e.statements for e in reversed(self.box.state.evidence)}  # the latest of a title
        return [
            StepStatus(
                title=s.title,
                step_type=s.step_type,
                status="done" if s.execution_res is not None else "running" if i in self.running else "pending",
                statements=traced.get(s.title),
            )
            for i, s in enumerate(plan.steps if plan else [])
        ]

    def task(self, step: Step, earlier: str) -> str:
        """The agent's task: the question, its step and what earlier steps
        found; the question's background search too when the plan is the
        question itself (the planner gave none)."""
        state = self.box.state
        task = f"# Research question\n{state.topic}\n\n# Your step\n## {step.title}\n{step.description}\n\n"
        if state.fallback_plan and state.background:
            task += f"# What a first search on the question found\n{state.background}\n\n"
        return task + (f"# Findings of earlier steps\n{earlier}\n" if earlier else "")

    async def findings(self, step: Step, outcome: Finished, gathered: Gathered | None, where: str) -> str:
        """The step's findings; a researcher's with the passages they rest on
        kept for the reporter, and said plainly when nothing was read."""
        if gathered is None:
            return outcome.text
        box = self.box
        support = await evidence.support(box, step, outcome.text, outcome.history, gathered, where)
        box.state.evidence.append(
            StepEvidence(title=step.title, support=support.blob, read=support.read, statements=support.statements)
        )
        return support.findings
