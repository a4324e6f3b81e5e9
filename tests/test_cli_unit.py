"""Fast tests of the `deepresearch` command line that need no Temporal server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from client.cli import (
    CliError,
    build_parser,
    error_line,
    feedback_from_reply,
    research_input,
    review_feedback,
)
from client.display import status_changes
from workflows.models import ResearchInput, RunStatus, StepStatus

DEEPRESEARCH = Path(sys.executable).parent / "deepresearch"
COMMANDS = ("run", "start", "review", "answer", "status", "watch", "result", "list", "worker", "server")


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("command", ["run", "start"])
def test_every_run_option_maps_to_its_input_field(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.md").write_text("local notes")
    (tmp_path / "docs").mkdir()
    args = parse(
        command, " What is Temporal? ",
        "--locale", "zh-CN",
        "--max-plan-iterations", "2",
        "--max-step-num", "5",
        "--max-search-results", "7",
        "--auto-accept",
        "--no-background-investigation",
        "--clarify",
        "--max-clarification-rounds", "2",
        "--deep-thinking",
        "--report-style", "news",
        "--max-agent-turns", "9",
        "--resource", "notes.md",
        "--resource", "docs",
        "--sequential",
    )  # fmt: skip
    assert research_input(args) == ResearchInput(
        question="What is Temporal?",
        locale="zh-CN",
        max_plan_iterations=2,
        max_step_num=5,
        max_search_results=7,
        auto_accept_plan=True,
        enable_background_investigation=False,
        enable_clarification=True,
        max_clarification_rounds=2,
        enable_deep_thinking=True,
        report_style="news",
        agent_max_turns=9,
        resources=[str(tmp_path / "notes.md"), str(tmp_path / "docs")],
        parallel_research=False,
    )


def test_options_not_given_keep_the_model_defaults():
    request = research_input(parse("start", "Why is the sky blue?"))
    assert request.model_fields_set == {"question"}
    assert request == ResearchInput(question="Why is the sky blue?")


def test_out_of_range_option_names_the_flag():
    with pytest.raises(CliError, match="--max-step-num"):
        research_input(parse("start", "q", "--max-step-num", "99"))


def test_empty_question_is_one_clear_error():
    with pytest.raises(CliError, match="question is empty"):
        research_input(parse("run", "   "))


def test_missing_resource_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse("start", "q", "--resource", str(tmp_path / "missing.pdf"))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("error: argument --resource: no such file")


@pytest.mark.parametrize(
    "argv",
    [
        ["review", "ID"],
        ["review", "ID", "--accept", "--edit", "more"],
        ["review", "ID", "--edit", "more", "--feedback", "[ACCEPTED]"],
    ],
)
def test_review_needs_exactly_one_kind_of_feedback(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(*argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "feedback"),
    [
        (["--accept"], "[ACCEPTED]"),
        (["--edit", "add a step on costs"], "[EDIT_PLAN] add a step on costs"),
        (["--feedback", "[edit_plan] fewer steps"], "[edit_plan] fewer steps"),
    ],
)
def test_review_feedback_text(argv, feedback):
    assert review_feedback(parse("review", "research-1", *argv)) == feedback


@pytest.mark.parametrize(
    ("reply", "feedback"),
    [
        ("", "[ACCEPTED]"),
        ("y", "[ACCEPTED]"),
        (" Accept\n", "[ACCEPTED]"),
        ("add a step on costs", "[EDIT_PLAN] add a step on costs"),
        ("[EDIT_PLAN] as is", "[EDIT_PLAN] as is"),
        ("[nonsense]", "[nonsense]"),
    ],
)
def test_reply_at_the_review_prompt(reply, feedback):
    assert feedback_from_reply(reply) == feedback


@pytest.mark.parametrize(
    "argv",
    [
        ["--address", "h:1", "--namespace", "ns", "--task-queue", "tq", "status", "ID"],
        ["status", "ID", "--address", "h:1", "--namespace", "ns", "--task-queue", "tq"],
    ],
)
def test_connection_options_before_or_after_the_command(argv):
    args = parse(*argv)
    assert (args.address, args.namespace, args.task_queue) == ("h:1", "ns", "tq")


def test_rejected_update_names_the_command_and_reason():
    err = WorkflowUpdateFailedError(ApplicationError("feedback must start with [ACCEPTED] or [EDIT_PLAN]"))
    assert error_line(err, parse("review", "ID", "--accept")) == (
        "review rejected: feedback must start with [ACCEPTED] or [EDIT_PLAN]"
    )


def test_status_changes_are_one_line_each():
    before = RunStatus(phase="planning", question="q")
    after = RunStatus(
        phase="awaiting_review",
        question="q",
        title="Plan",
        steps=[StepStatus(title="Find sources", step_type="research")],
        review_pending=True,
    )
    assert status_changes(before, after) == [
        "phase: awaiting_review",
        "plan: Plan (1 steps)",
        "step 1 pending: Find sources",
        "plan review pending",
    ]
    assert status_changes(after, after) == []


def run_cli(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DEEPRESEARCH_"))}
    env["DEEPRESEARCH_DATA_DIR"] = str(tmp_path)
    return subprocess.run(
        [str(DEEPRESEARCH), *argv], capture_output=True, text=True, env=env, timeout=60
    )


def test_unreachable_server_is_one_error_line(tmp_path):
    done = run_cli("status", "research-1", "--address", "127.0.0.1:1", tmp_path=tmp_path)
    assert done.returncode != 0
    assert done.stderr.startswith("error: cannot reach Temporal at 127.0.0.1:1")
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr + done.stdout


def test_help_lists_all_ten_commands(tmp_path):
    done = run_cli("--help", tmp_path=tmp_path)
    assert done.returncode == 0
    for command in COMMANDS:
        assert f"\n    {command} " in done.stdout
