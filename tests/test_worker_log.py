"""A worker's log shows a retried call as one line, not a traceback per
attempt (issue 23: a real model's timeouts and loops filled it with them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit.worker_process import WorkerProcess

BIN = Path(sys.executable).parent


async def worker_log_of_a_run(env: dict, temporal_client, tmp_path: Path) -> str:
    """What a worker process logged while a run (`start hello`) went through it."""
    with WorkerProcess(env, tmp_path / "worker.log") as worker:
        await worker.ready(temporal_client)
        run_id = subprocess.run(
            [str(BIN / "deepresearch"), "start", "hello"], env=env, capture_output=True, text=True, timeout=60
        ).stdout.strip()
        await temporal_client.get_workflow_handle(run_id).result()
    return worker.log_text()


async def test_a_retried_model_call_is_one_line_in_the_workers_log(worker_env, script, llm, temporal_client, tmp_path):
    llm.fail_next(2, 500)  # the coordinator's first two attempts fail; the third goes through
    log = await worker_log_of_a_run(worker_env, temporal_client, tmp_path)
    assert "Traceback" not in log, log[-3000:]
    failed = [line for line in log.splitlines() if "chat failed (attempt" in line]
    assert len(failed) == 2 and all("Temporal retries it" in line for line in failed), log[-3000:]


async def test_tracebacks_come_back_when_asked_for(worker_env, script, llm, temporal_client, tmp_path):
    llm.fail_next(1, 500)
    env = worker_env | {"DEEPRESEARCH_LOG_TRACEBACKS": "1"}
    assert "Traceback" in await worker_log_of_a_run(env, temporal_client, tmp_path)
