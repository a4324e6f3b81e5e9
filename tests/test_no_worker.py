"""A review or an answer sent to a run no worker serves ends with one line
naming the run's task queue, instead of waiting for ever (issue 20)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

CLI = Path(sys.executable).parent / "deepresearch"


async def cli(env: dict, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(CLI), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)  # the outside check's bound
    return proc.returncode, out.decode(), err.decode()


async def test_review_and_answer_without_a_worker_say_so_and_name_the_runs_task_queue(worker_env, task_queue):
    code, out, err = await cli(worker_env, "start", "Tell me about Lantern Rock")  # no worker on task_queue
    assert code == 0, err
    run_id = out.strip()
    other = worker_env | {"DEEPRESEARCH_TASK_QUEUE": "the-cli-queue"}  # the CLI's own queue is not the run's
    review, answer = await asyncio.gather(
        cli(other, "review", run_id, "--accept"), cli(other, "answer", run_id, "sodium-ion")
    )
    for (code, out, err), what in ((review, "review"), (answer, "answer")):
        assert code == 1 and out == "", (code, out, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert f"no worker polls task queue '{task_queue}'" in err and f"the {what} has not reached" in err, err
        assert "the-cli-queue" not in err
