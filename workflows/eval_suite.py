"""The ``EvalSuite`` workflow (``deepresearch eval``, SPEC 3b): each task of
an evaluation suite is an ordinary ``DeepResearch`` run, started as a child
(id ``<suite id>-<task id>-r<n>``, plan auto-accepted), a few at once; each
finished report is scored by an activity (and, when asked, judged by the
JUDGE model beside it). The suite is durable like any run: a worker killed
mid-suite resumes it, and the children that finished are not run again.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

from workflows.activity_calls import MODEL_CALL, failure_reason
from workflows.rate_limits import ProviderWaits, model_queue

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.eval_models import (
        EvalProgress,
        EvalSuiteInput,
        EvalSuiteResult,
        EvalTask,
        ScoreRequest,
        TaskRecord,
        TaskScore,
    )
    from workflows.models import Message, ModelReply, ModelRequest, ResearchInput, ResearchResult, Usage

SCORE_CALL = dict(
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5),
)
JUDGE_REPORT_CHARS = 60_000  # what of a report the judge reads


def child_id(suite_id: str, task_id: str, run: int) -> str:
    return f"{suite_id}-{task_id}-r{run}"


def children_on_close() -> ParentClosePolicy:
    """A cancelled suite ends at once (the SDK does not wait for its children):
    its running research runs are then asked to cancel, so each writes a
    partial report, instead of being terminated without one."""
    if workflow.patched("eval-children-cancel"):
        return ParentClosePolicy.REQUEST_CANCEL
    return ParentClosePolicy.TERMINATE


def task_input(request: EvalSuiteInput, task: EvalTask) -> ResearchInput:
    """The run of one task: the suite's run options, the task's own on top,
    its resources, the plan accepted without review."""
    resources = [*request.options.get("resources", []), *task.resources]
    options = {**request.options, **task.options, "auto_accept_plan": True, "resources": resources}
    return ResearchInput(question=task.question, **options)


@workflow.defn(name="EvalSuite")
class EvalSuite:
    @workflow.init
    def __init__(self, request: EvalSuiteInput) -> None:
        self.progress = EvalProgress(total=len(request.tasks) * request.runs)
        self.judge_usage = Usage()  # the judge's waits on the provider's rate limit
        self.waits = ProviderWaits(lambda: self.judge_usage)

    @workflow.run
    async def run(self, request: EvalSuiteInput) -> EvalSuiteResult:
        slots = asyncio.Semaphore(request.concurrency)
        jobs = [(task, run) for run in range(1, request.runs + 1) for task in request.tasks]
        records = await asyncio.gather(*(self._one(request, task, run, slots) for task, run in jobs))
        return EvalSuiteResult(suite=request.suite, records=list(records))

    async def _one(self, request: EvalSuiteInput, task: EvalTask, run: int, slots: asyncio.Semaphore) -> TaskRecord:
        async with slots:
            run_id = child_id(request.id_prefix or workflow.info().workflow_id, task.id, run)
            self.progress.running.append(run_id)
            started = workflow.now()
            result, error = None, None
            try:
                result = await workflow.execute_child_workflow(
                    "DeepResearch",
                    task_input(request, task),
                    id=run_id,
                    result_type=ResearchResult,
                    memo={"question": task.question[:1000]},
                    parent_close_policy=children_on_close(),
                )
            except ChildWorkflowError as err:
                error = failure_reason(err)
            except ValueError as err:  # the suite's and the task's options together do not validate
                error = f"invalid run options: {err}".splitlines()[0]
            seconds = (workflow.now() - started).total_seconds()
            judged, problem = await self._judge(task, result) if request.judge and result else (None, None)
            scores = await workflow.execute_activity(
                "score_eval_task",
                ScoreRequest(
                    task=task,
                    corpus=request.corpus,
                    result=result,
                    judge_reply=judged.content if judged else None,
                    judge_problem=problem,
                    judge_tokens=judged.prompt_tokens + judged.completion_tokens if judged else 0,
                ),
                result_type=TaskScore,
                summary=f"score {task.id} r{run}",
                **SCORE_CALL,
            )
            self.progress.running.remove(run_id)
            self.progress.finished.append(f"{task.id}-r{run}")
            self.progress.done += 1
        usage = result.usage if result else None
        return TaskRecord(
            **scores.model_dump(),
            id=task.id,
            run=run,
            run_id=run_id,
            status=result.status if result else "failed",
            tokens=usage.prompt_tokens + usage.completion_tokens if usage else 0,
            model_calls=usage.llm_calls if usage else 0,
            searches=usage.searches if usage else 0,
            crawls=usage.crawls if usage else 0,
            rate_limited_seconds=usage.rate_limited_seconds if usage else 0.0,
            seconds=round(seconds, 3),
            error=error,
            warnings=list(result.warnings) if result else [],
        )

    async def _judge(self, task: EvalTask, result: ResearchResult) -> tuple[ModelReply | None, str | None]:
        """The JUDGE model's rubric of the report (prompts/judge.md), or why
        there is none: a judge that fails leaves the task unjudged, never failed."""
        text = f"# The task\n{task.question}\n\n# The report\n{result.final_report[:JUDGE_REPORT_CHARS]}"
        try:
            reply = await self.waits.call(
                "chat",
                ModelRequest(
                    role="judge", prompt="judge", json_mode=True, messages=[Message(role="user", content=text)]
                ),
                result_type=ModelReply,
                summary=f"judge {task.id}",
                options=MODEL_CALL,
                task_queue=model_queue,
            )
        except (ActivityError, ApplicationError) as err:
            return None, f"the judge failed: {failure_reason(err)}"
        return reply, None

    @workflow.query(name="progress")
    def get_progress(self) -> EvalProgress:
        return self.progress
