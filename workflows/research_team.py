"""Step 5 of the flow, the research team: the plan's steps, each done by an
agent — research steps by the researcher (web search, crawl, local search),
processing steps by the coder (Python), analysis steps by the analyst (no
tools). Consecutive research steps run side by side; a step sees the
findings of the steps finished before it.

``batches`` is the decision, a pure function of the plan.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

from workflows import evidence
from workflows.agent import Finished, agent_tools, run_agent
from workflows.box import Box
from workflows.steering import Steering

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.evidence_models import Gathered, StepEvidence
    from workflows.models import Plan, Step, StepStatus
    from workflows.state import AgentCheckpoint

AGENT_FOR_STEP = {"research": "researcher", "processing": "coder", "analysis": "analyst"}


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
            following = None
            if reads and resume is None:
                given = await self.steering.read_pages() if box.state.steers else []  # pages a steer gave
                gathered = await evidence.gather(box, step, where, given)
                following = evidence.follow_lead(box, gathered, where)
            try:
                outcome = await self.agent(step, index, earlier, resume, gathered, where)
            except BaseException:
                if following:
                    following.cancel()
                raise
            if following:
                await following  # its pages, for the findings (or the paused step's checkpoint)
            if isinstance(outcome, AgentCheckpoint):  # paused: the next run goes on from here
                outcome.gathered = gathered
                box.state.agents[index] = outcome
            else:
                step.execution_res = await self.findings(step, outcome, gathered if reads else None, where)
                box.emit("step_finished", step.title, index)
            self.running.discard(index)

    async def agent(
        self,
        step: Step,
        index: int,
        earlier: str,
        resume: AgentCheckpoint | None,
        gathered: Gathered | None,
        where: str,
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
