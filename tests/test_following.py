"""Following a run (`watch`, `run`, `attach`) leaves its history as it is:
the progress stream is read by query, so no stream-poll updates appear
between the run's model and tool calls in the Temporal UI (issue 20). Its
review hint names the plan version, and a version that does not exist is
called that."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from testkit.runs import start, wait_for_phase

CLI = Path(sys.executable).parent / "deepresearch"
QUESTION = "Tell me about the Lantern Rock lighthouse"


async def test_watching_a_run_adds_nothing_to_its_history(temporal_client, task_queue, worker_env, worker):
    handle = await start(temporal_client, task_queue, QUESTION)
    watch = await asyncio.create_subprocess_exec(
        str(CLI), "watch", handle.id, env=worker_env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    seen: list[str] = []
    async with asyncio.timeout(60):  # watch follows the open run up to its review
        while not any("--accept" in line for line in seen):  # the hint after "waiting for review"
            seen.append((await watch.stdout.readline()).decode())
    await wait_for_phase(handle, "awaiting_review")
    # watch's hint names the plan version, as `status` does
    assert any(f"review {handle.id} --plan-version 1 --accept" in line for line in seen), seen
    # a version that does not exist is called that, not "changed since you saw it"
    wrong = await asyncio.create_subprocess_exec(
        str(CLI), "review", handle.id, "--plan-version", "2", "--accept", env=worker_env, stderr=asyncio.subprocess.PIPE
    )
    _, said = await asyncio.wait_for(wrong.communicate(), 60)
    assert wrong.returncode == 1 and said.decode().strip().splitlines() == [
        "error: review rejected: there is no plan version 2 (the latest is version 1)"
    ], said
    await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str)
    out, err = await asyncio.wait_for(watch.communicate(), 120)
    lines = seen + out.decode().splitlines()
    assert watch.returncode == 0, err.decode()
    assert any(line.startswith("run finished: completed") for line in lines), lines
    assert any(line.startswith("  crawl: ") for line in lines), lines  # events after the review came too
    history = await handle.fetch_history()
    updates = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in history.events
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    ]
    assert updates == ["submit_review"], updates
