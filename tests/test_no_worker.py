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
        # Temporal keeps the update for a worker that starts later: the line
        # must not read as if it were dropped (a review sent while the worker
        # was down is applied when it comes back).
        assert "may still reach it when a worker starts" in err and f"status {run_id}" in err, err


async def test_the_desk_review_without_a_worker_says_so(worker_env, task_queue):
    """The desk's review goes through the same bounded wait (client/updates.py)."""
    import json
    import urllib.error
    import urllib.request

    from client.devserver import free_port

    code, out, err = await cli(worker_env, "start", "Tell me about Lantern Rock")
    run_id = out.strip()
    port = free_port()
    desk = await asyncio.create_subprocess_exec(
        str(CLI), "ui", "--port", str(port), env=worker_env, stdout=asyncio.subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"

    def review() -> tuple[int, dict]:
        request = urllib.request.Request(
            f"{base}/api/runs/{run_id}/review",
            data=json.dumps({"feedback": "[ACCEPTED]"}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=90) as answered:
                return answered.status, json.loads(answered.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())

    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{base}/api/health", timeout=1)
                break
            except OSError:
                await asyncio.sleep(0.1)
        status, body = await asyncio.to_thread(review)
    finally:
        desk.terminate()
        await desk.wait()
    assert status == 409 and f"no worker polls task queue '{task_queue}'" in body["error"], (status, body)
