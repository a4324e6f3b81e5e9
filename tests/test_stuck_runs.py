"""A run whose workflow task keeps failing (a bug, a bad deploy) says so:
`status` shows the failure and the attempts instead of hanging, `list`
marks it, and `cancel` still ends it once a fixed worker runs; the run then
reads `cancelled` everywhere, and cancelling it again says it has ended."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from infra.settings import Settings
from testkit.runs import polled, start
from worker import build_worker
from workflows.models import PHASE_ATTRIBUTE, RunStatus

CLI = Path(sys.executable).parent / "deepresearch"
MARKER = "FAIL-MY-WORKFLOW-TASK"


class _Broken(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput):
        question = (input.args[0] or {}).get("question", "") if isinstance(input.args[0], dict) else ""
        if MARKER in question:
            raise RuntimeError("injected bug: this worker's workflow code is broken")
        return await super().execute_workflow(input)


class BrokenWorkflowCode(Interceptor):
    """Test only: fails the workflow task of runs whose question has MARKER,
    as a bug in a deployed worker would."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput):
        return _Broken


async def cli(env: dict, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(CLI), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


async def test_a_stuck_run_says_so_and_can_be_cancelled(
    temporal_client, task_queue, worker_env, script, research_worker
):

    settings = Settings.from_env(worker_env)
    broken, held = build_worker(temporal_client, settings, task_queue, interceptors=[BrokenWorkflowCode()])
    async with broken:
        handle = await start(temporal_client, task_queue, f"Tell me about Lantern Rock {MARKER}")
        for _ in range(100):  # the task fails and is retried: wait for the second attempt
            described = await handle.describe()
            if described.raw_description.pending_workflow_task.attempt >= 2:
                break
            await asyncio.sleep(0.2)
        code, out, err = await cli(worker_env, "status", handle.id)
        assert code == 1 and len(err.strip().splitlines()) == 1, err
        assert f"run {handle.id} is stuck" in err and "injected bug" in err and "deepresearch cancel" in err
        code, out, err = await cli(worker_env, "status", handle.id, "--json")
        shown = json.loads(out)
        assert shown["stuck"] and shown["workflow_task_attempts"] >= 2 and "injected bug" in shown["error"]
        code, out, err = await cli(worker_env, "list")
        assert code == 0 and "STUCK" in out
        code, out, err = await cli(worker_env, "cancel", handle.id)
        assert code == 0, err
    await held.close_all()
    # "Deploy a fix": a good worker takes the run on; it ends with a partial report.
    async with research_worker():
        result = await asyncio.wait_for(handle.result(), 60)
        status = await handle.query("status", result_type=RunStatus)
        described = await handle.describe()
        code, out, err = await cli(worker_env, "status", handle.id, "--json")
        shown = json.loads(out)
        listed = await polled(  # the run's end reaches the visibility store a moment later
            lambda: cli(worker_env, "list", "--limit", "1000"),  # (other tests' runs still going list first)
            lambda listed: any(handle.id in line and "running" not in line for line in listed[1].splitlines()),
        )
        again = await cli(worker_env, "cancel", handle.id)
    # Cancelled reads cancelled everywhere, not completed (issue 20).
    assert result.status == "cancelled" and status.phase == "cancelled" and shown["phase"] == "cancelled"
    assert described.typed_search_attributes.get(PHASE_ATTRIBUTE) == "cancelled"
    row = next(line for line in listed[1].splitlines() if handle.id in line)
    assert "cancelled" in row and "completed" not in row, listed[1]
    # Cancelling it again says it has already ended, and how.
    assert again[0] == 1 and len(again[2].strip().splitlines()) == 1, again
    assert "already ended (cancelled)" in again[2] and "partial report" not in again[1] + again[2]
