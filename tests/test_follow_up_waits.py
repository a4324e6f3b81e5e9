"""A follow-up thread waits for its next question for days, on the SDK's
time-skipping test server: thirty days pass (skipped, not waited) and the
thread still answers, remembering the question before the wait."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.client import WorkflowUpdateStage

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
