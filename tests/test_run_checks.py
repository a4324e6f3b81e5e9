"""Smaller things a real small model showed (issue 31, item 11): a search
that failed every attempt is no search in the run's usage, and a reply that
looped (retried, as expected) is one line in the log, not a traceback per
attempt. Real dev server, real worker, scripted model and search over HTTP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit.llm_server import Reply
from testkit.runs import start

QUESTION = "How many ships did the Lantern Rock lighthouse keeper log in 1911?"
BIN = Path(sys.executable).parent


async def test_a_search_that_failed_every_attempt_is_not_counted(temporal_client, task_queue, worker, tavily, script):
    def search(query: str, max_results: int) -> list[dict]:
        raise RuntimeError("the search engine is down")

    tavily.handler = search  # every attempt of every search: HTTP 500
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    assert result.status == "completed"
    assert len(tavily.requests) >= 6  # background + researcher, three attempts each
    assert result.usage.searches == 0


def test_a_looping_reply_is_one_line_in_the_log_without_a_traceback(worker_env, llm, script):
    greeted = script.coordinator

    def coordinator(request: dict) -> Reply | str:
        if len(llm.calls("coordinator")) == 1:
            return "I repeat myself again. " * 200  # cut off while it streams: ModelRepetition, retried
        return greeted(request)

    script.coordinator = coordinator
    done = subprocess.run(
        [str(BIN / "deepresearch"), "run", "Hello!", "--worker", "--id", "looping-greeting"],
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    log = (Path(worker_env["DEEPRESEARCH_DATA_DIR"]) / "logs" / "deepresearch.log").read_text()
    failed = [line for line in log.splitlines() if "chat failed (attempt 1 of 3)" in line]  # a loop: 3 at most
    assert len(failed) == 1 and "degenerated into repetition" in failed[0], log[-3000:]
    assert "Traceback" not in log, log[-3000:]
