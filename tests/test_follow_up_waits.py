"""A follow-up thread waits for its next question for days, on the SDK's
time-skipping test server: thirty days pass (skipped, not waited) and the
thread still answers, remembering the question before the wait; after 180
idle days it ends, and the next question starts a new thread."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateStage

from workflows.follow_up_models import FollowUpAnswer, FollowUpInput, ThreadStatus
from workflows.models import ResearchInput, ResearchResult

from .test_long_waits import env, worker  # noqa: F401 - fixtures: the time-skipping server and a worker


async def test_a_thread_answers_after_thirty_days(env, worker, llm):  # noqa: F811
    run_id = f"thread-{uuid.uuid4().hex[:8]}"
    run = await env.client.execute_workflow(
        "DeepResearch",
        ResearchInput(question="Tell me about Lantern Rock", auto_accept_plan=True),
        id=run_id,
        task_queue="long-waits",
        result_type=ResearchResult,
    )
    assert run.status == "completed"
    thread = await env.client.start_workflow(
        "FollowUp", FollowUpInput(run_id=run_id), id=f"{run_id}-ask", task_queue="long-waits"
    )
    first = await thread.execute_update("ask", args=["How many ships did the keeper log?", False],
                                        result_type=FollowUpAnswer)  # fmt: skip
    assert "4417" in first.answer

    await env.sleep(timedelta(days=30))  # the thread waits, durably, at no cost
    status = await thread.query("status", result_type=ThreadStatus)
    assert status.phase == "waiting" and status.questions == 1

    handle = await thread.start_update(
        "ask", args=["Repeat your previous answer, please", False],
        wait_for_stage=WorkflowUpdateStage.ACCEPTED, result_type=FollowUpAnswer,
    )  # fmt: skip
    second = await handle.result()
    assert first.answer in second.answer
    assert await env.get_current_time() - (await thread.describe()).start_time >= timedelta(days=30)
    assert len(llm.calls("followup")) == 2


async def test_a_thread_idle_for_180_days_ends_and_the_next_question_starts_afresh(env, worker, llm):  # noqa: F811
    """After IDLE (180 days) without a question the thread ends, saying so in
    its result; the next question starts a new thread under the same id, the
    way `ask` starts one (update-with-start), answered from the run's findings."""
    from temporalio.client import WithStartWorkflowOperation
    from temporalio.common import WorkflowIDConflictPolicy

    run_id = f"idle-{uuid.uuid4().hex[:8]}"
    await env.client.execute_workflow(
        "DeepResearch", ResearchInput(question="Tell me about Lantern Rock", auto_accept_plan=True),
        id=run_id, task_queue="long-waits", result_type=ResearchResult,
    )  # fmt: skip

    async def ask(question: str) -> FollowUpAnswer:
        start = WithStartWorkflowOperation(
            "FollowUp", FollowUpInput(run_id=run_id), id=f"{run_id}-ask", task_queue="long-waits",
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )  # fmt: skip
        return await env.client.execute_update_with_start_workflow(
            "ask", args=[question, False], start_workflow_operation=start, result_type=FollowUpAnswer
        )

    first = await ask("How many ships did the keeper log?")
    assert "4417" in first.answer
    old = env.client.get_workflow_handle(f"{run_id}-ask", result_type=ThreadStatus)
    await env.sleep(timedelta(days=179))
    assert (await old.describe()).status == WorkflowExecutionStatus.RUNNING  # still waiting for a question
    await env.sleep(timedelta(days=2))
    assert (await old.describe()).status == WorkflowExecutionStatus.COMPLETED  # ended by itself
    ended = await old.result()  # with its transcript
    assert ended.phase == "ended" and ended.questions == 1 and ended.turns[0].question.startswith("How many ships")

    again = await ask("How many ships did the keeper log, again?")
    assert "4417" in again.answer  # the new thread still answers from the run's findings
    fresh = await env.client.get_workflow_handle(f"{run_id}-ask").query("status", result_type=ThreadStatus)
    assert fresh.phase == "waiting" and fresh.questions == 1  # a new thread: the old turns are not in it
    assert [t.question for t in fresh.turns] == ["How many ships did the keeper log, again?"]
