"""The terminal review keeps its transcript: after an edit and an accept
typed at the prompt of `attach`, the plan box, the prompts with what was
typed and the confirmations are still on screen; the live panel goes on
after the review (its phase leaves awaiting_review) and its last counters
are the closing line's. What stays on screen is read with a terminal
emulator (pyte) fed everything the CLI wrote to its pseudo-terminal."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import time

import pyte

from testkit.worker_process import WorkerProcess
from tests.test_first_hour import BIN, QUESTION, cli

COLUMNS, LINES = 120, 400  # tall enough that nothing scrolls away


class Terminal:
    """`deepresearch ARGS` on a pseudo-terminal, its output kept on a pyte screen."""

    def __init__(self, env: dict, *args: str) -> None:
        self.screen = pyte.Screen(COLUMNS, LINES)
        self.stream = pyte.ByteStream(self.screen)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the CLI on a terminal
            argv = [str(BIN / "deepresearch"), *args]
            os.execve(argv[0], argv, env | {"TERM": "xterm", "COLUMNS": str(COLUMNS), "LINES": "50"})

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display).rstrip()

    def wait_for(self, pattern: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.3)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                self.stream.feed(chunk)
            if re.search(pattern, self.text()):
                return self.text()
        raise AssertionError(f"no {pattern!r} on screen:\n{self.text()[-4000:]}")

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\r")

    def close(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)


async def test_the_review_transcript_stays_on_screen_and_the_panel_goes_on(
    worker_env, temporal_client, tmp_path, script
):
    with WorkerProcess(worker_env, tmp_path / "worker.log") as process:
        await process.ready(temporal_client)
        run_id = cli(worker_env, "start", QUESTION).stdout.strip()
        terminal = Terminal(worker_env, "attach", run_id)
        try:
            terminal.wait_for(r"Accept the plan\?")
            terminal.type("add a step on shipwrecks")
            terminal.wait_for(r"Edited: add a step on shipwrecks[\s\S]*Accept the plan\?")
            terminal.type("")
            # the live panel is back below the transcript, and moving on (a quick run may be done already)
            terminal.wait_for(
                r"plan accepted: the research team starts[\s\S]*(researching|reporting|completed)\s+\d+:\d\d"
            )
            screen = terminal.wait_for(r"report saved to", timeout=120)
        finally:
            terminal.close()
    lines = screen.splitlines()
    # the transcript: both prompts with what was typed, both confirmations, both plan boxes whole
    assert any(re.search(r"Accept the plan\?.*add a step on shipwrecks", line) for line in lines), screen
    assert "plan edit requested: revising the plan with your edit (add a step on shipwrecks)" in screen, screen
    assert "plan accepted: the research team starts" in screen, screen
    assert len([line for line in lines if line.startswith("╰")]) >= 2, screen  # the two plan boxes' ends
    # the panel went on after the accept, and its last counters are the closing line's
    closing = screen.split(f"\nrun {run_id}: ", 1)[1].split("\nreport saved to", 1)[0]  # it may wrap
    usage = " ".join(closing.split("; ", 1)[1].split())
    panel_usage = [line.removeprefix("usage: ") for line in lines if line.startswith("usage: ")]
    assert panel_usage and panel_usage[-1] == usage, (panel_usage, closing)
    assert not re.search(r"awaiting_review\s+\d+:\d\d", screen.split("plan accepted", 1)[1]), screen


async def test_the_panel_ends_on_the_results_counters_when_the_last_query_goes_unanswered():
    """Under load the status query after the run's end went unanswered and
    the panel kept the counters of its last poll (10 LLM calls) above a
    closing line that said 12: the panel's last state is the result's."""
    from client.interactive import ended
    from workflows.models import ResearchResult, RunStatus, Usage

    seen = RunStatus(phase="reporting", question="q", usage=Usage(llm_calls=10, searches=4))
    done = asyncio.get_running_loop().create_future()
    done.set_result(
        ResearchResult(status="completed", question="q", locale="en-US", final_report="r", usage=Usage(llm_calls=12))
    )
    final = ended(seen, done)
    assert final is not None and final.usage.llm_calls == 12 and final.phase == "completed"
    assert final.outcome == "completed" and final.question == "q"
    failed = asyncio.get_running_loop().create_future()
    failed.set_exception(RuntimeError("the run failed"))
    assert ended(seen, failed) is None and ended(None, done) is None  # nothing better to show
