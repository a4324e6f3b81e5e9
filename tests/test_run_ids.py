"""Run ids with control characters (issue 36, item 7b): an id this CLI would
give a new run or schedule is refused in one line; an id another client gave
(Temporal accepts any) is shown on one line by `list` and `status`. Before,
`start --id $'a\\nb'` was accepted and `list` printed the id across two
lines, so a crafted id could fake a row."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from client.cli import build_parser
from client.options import id_problem
from testkit.runs import polled
from workflows.models import RunStatus

CLI = Path(sys.executable).parent / "deepresearch"
BAD = {
    "newline": "a\nb",
    "carriage-return": "a\rb",
    "escape": "a\x1b[2Jb",
    "nel": "a\x85b",
    "line-separator": "a\u2028b",
    "bidi-override": "a\u202eb",
    "nul": "a\x00b",
}


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_an_id_for_a_new_run_or_schedule_with_a_control_character_is_refused(bad):
    for argv in (
        ["start", "q", "--id", bad],
        ["run", "q", "--id", bad],
        ["demo", "--id", bad],
        ["eval", "--demo", "--id", bad],
        ["schedule", "create", bad, "q", "--every", "1d"],
    ):
        problem = id_problem(build_parser().parse_args(argv))
        assert problem and "control character (U+" in problem and "one line of visible text" in problem, argv
        assert problem.isprintable(), problem
    for fine in ("research-1", "调研-一", "run with spaces", "emoji-🧭"):
        assert id_problem(build_parser().parse_args(["start", "q", "--id", fine])) is None


def test_start_with_a_newline_in_its_id_says_so_in_one_line_and_starts_nothing(worker_env):
    done = subprocess.run(
        [str(CLI), "start", "Tell me about Lantern Rock", "--id", "real-run\nfake-row  completed"],
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""  # no id printed: nothing was started
    assert done.stderr == (
        "error: --id holds a control character (U+000A at character 9): an id must be one line of visible text\n"
    )


async def test_list_and_status_show_another_clients_id_on_one_line(temporal_client, worker_env, capsys):
    from client.commands.list_runs import QUERY
    from client.commands.status import show

    tag = uuid.uuid4().hex[:8]
    crafted = f"real-{tag}\nfake-{tag}  completed"  # started by another client: Temporal takes it
    await temporal_client.start_workflow("DeepResearch", {"question": "x"}, id=crafted, task_queue=f"nobody-{tag}")
    try:

        async def listing() -> set[str]:
            return {run.id async for run in temporal_client.list_workflows(QUERY, limit=100)}

        await polled(listing, lambda seen: crafted in seen, seconds=30)
        proc = await asyncio.create_subprocess_exec(
            str(CLI),
            "list",
            "--limit",
            "1000",
            env=worker_env | {"COLUMNS": "200"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = (text.decode() for text in await asyncio.wait_for(proc.communicate(), 60))
        assert proc.returncode == 0, err
        (row,) = [line for line in out.splitlines() if f"fake-{tag}" in line]
        assert f"real-{tag}\u240afake-{tag}  completed" in row  # one row, the newline shown as ␊

        show(RunStatus(phase="completed", outcome="completed", question="x"), crafted)
        shown = capsys.readouterr().out
        assert not [line for line in shown.splitlines() if line.startswith(f"fake-{tag}")], shown
        assert f"real-{tag}\u240afake-{tag}" in shown
    finally:
        await temporal_client.get_workflow_handle(crafted).terminate("test over")
