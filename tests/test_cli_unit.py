"""Fast tests of the `deepresearch` command line that need no Temporal server."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

import client.commands.result
from client import quick
from client.cli import build_parser
from client.commands.result import main as cmd_result
from client.commands.status import show_quick
from client.display import status_changes
from client.errors import CliError, UpdateRejected, error_line
from client.options import feedback_from_reply, output_format, report_path, research_input, review_feedback
from infra.connection import Connection
from infra.converter import data_converter
from infra.errors import ConnectionFailed
from workflows.models import Citation, ResearchInput, ResearchResult, RunStatus, StepStatus

DEEPRESEARCH = Path(sys.executable).parent / "deepresearch"
COMMANDS = (
    "run",
    "start",
    "review",
    "answer",
    "status",
    "watch",
    "result",
    "list",
    "cancel",
    "worker",
    "server",
    "doctor",
)


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("command", ["run", "start"])
def test_every_run_option_maps_to_its_input_field(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.md").write_text("local notes")
    (tmp_path / "docs").mkdir()
    args = parse(
        command,
        " What is Temporal? ",
        "--locale",
        "zh-CN",
        "--max-plan-iterations",
        "2",
        "--max-step-num",
        "5",
        "--max-search-results",
        "7",
        "--auto-accept",
        "--no-background-investigation",
        "--clarify",
        "--max-clarification-rounds",
        "2",
        "--deep-thinking",
        "--report-style",
        "news",
        "--max-agent-turns",
        "9",
        "--resource",
        "notes.md",
        "--resource",
        "docs",
        "--sequential",
        "--share",
        "bob,team:ops",
        "--share",
        "carol",
    )
    monkeypatch.setenv("DEEPRESEARCH_USER", "alice")
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
        owner="alice",  # the run is DEEPRESEARCH_USER's, readable by whom --share names
        shared_with=["bob", "team:ops", "carol"],
    )


def test_options_not_given_keep_the_model_defaults(monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_USER", "alice")
    request = research_input(parse("start", "Why is the sky blue?"))
    assert request.model_fields_set == {"question", "owner"}  # a run always has an owner
    assert request == ResearchInput(question="Why is the sky blue?", owner="alice")


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


@pytest.mark.parametrize("reply", ["", "y", "add a step on costs"])
def test_what_the_review_prompt_sends_is_what_the_workflow_reads(reply):
    # client/options.py keeps its own copy of the prefixes (see there); this
    # keeps it equal to workflows/review.py.
    from workflows.review import parse_review

    review = parse_review(feedback_from_reply(reply))
    assert review.accepted == (reply in ("", "y"))
    assert review.edit == ("" if review.accepted else reply)


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


def test_a_rejection_the_quick_way_reads_as_one_from_the_full_client():
    reason = "feedback must start with [ACCEPTED] or [EDIT_PLAN]"
    quick_way = error_line(UpdateRejected(reason), parse("answer", "ID", "yes"))
    full_client = error_line(WorkflowUpdateFailedError(ApplicationError(reason)), parse("answer", "ID", "yes"))
    assert quick_way == full_client == f"answer rejected: {reason}"


async def test_the_quick_way_reads_only_one_payload_of_plain_json(tmp_path):
    converter = data_converter(tmp_path)
    status = {"phase": "researching", "title": "Ω"}
    assert quick.plain(await converter.encode([status])) == status
    kept_outside = await converter.encode([status | {"title": "Ω" * 100_000}])  # over 128 KiB: external storage
    for payloads in ([], await converter.encode([status, status]), kept_outside, await converter.encode([b"bytes"])):
        with pytest.raises(quick.NotQuick):
            quick.plain(payloads)


async def test_an_update_argument_too_large_for_history_takes_the_full_client():
    nowhere = Connection(address="127.0.0.1:1")  # decided before connecting: nothing is sent
    with pytest.raises(quick.NotQuick):
        await quick.update(nowhere, "run-1", "submit_review", ["[EDIT_PLAN] " + "x" * 200_000], "update-1")
    with pytest.raises(ConnectionFailed):  # a small one is sent the quick way
        await quick.update(nowhere, "run-1", "submit_review", ["[EDIT_PLAN] shorter"], "update-1")


def test_a_status_from_a_worker_older_than_the_cli_takes_the_full_client():
    status = RunStatus(phase="awaiting_review", question="q", review_pending=True, plan_version=2)
    data = status.model_dump(mode="json")
    args = parse("status", "run-1")
    assert show_quick(data, args) == 0  # every field there: printed the quick way
    del data["plan_version"]  # a field this CLI knows and the worker does not
    with pytest.raises(quick.NotQuick):
        show_quick(data, args)


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


def run_cli(*argv: str, tmp_path: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DEEPRESEARCH_"))}
    env["DEEPRESEARCH_DATA_DIR"] = str(tmp_path)
    return subprocess.run([str(DEEPRESEARCH), *argv], capture_output=True, text=True, env=env | extra_env, timeout=60)


def test_help_names_the_command_as_the_user_ran_it(tmp_path):
    assert run_cli("--help", tmp_path=tmp_path).stdout.startswith("usage: deepresearch ")
    through_dr = run_cli("review", "--help", tmp_path=tmp_path, DEEPRESEARCH_CLI="./dr")
    assert through_dr.stdout.startswith("usage: ./dr review ")
    wrong = run_cli("review", tmp_path=tmp_path, DEEPRESEARCH_CLI="./dr")
    assert "(see `./dr review --help`)" in wrong.stderr


def test_server_takes_its_ports_from_the_same_variables_as_run(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        done = run_cli("server", tmp_path=tmp_path, DEEPRESEARCH_DEV_SERVER_PORT=port)
    assert done.returncode == 1
    assert done.stderr == f"error: port {port} is in use: is a Temporal server already running? (see --port)\n"
    bad = run_cli("server", tmp_path=tmp_path, DEEPRESEARCH_DEV_UI_PORT="eighty")
    assert bad.stderr == "error: DEEPRESEARCH_DEV_UI_PORT must be a port number, not 'eighty'\n"


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


@pytest.mark.parametrize(
    ("argv", "fmt"),
    [
        ([], "md"),
        (["--format", "md"], "md"),
        (["--format", "html"], "html"),
        (["--format", "json"], "json"),
        (["--json"], "json"),
        (["-o", "report.html"], "html"),
        (["-o", "out/Report.HTM"], "html"),
        (["-o", "report.json"], "json"),
        (["-o", "report.md"], "md"),
        (["-o", "report.txt"], "md"),
        (["-o", "report"], "md"),
        (["--format", "md", "-o", "report.html"], "md"),
        (["--format", "html", "-o", "report.txt"], "html"),
        (["--json", "-o", "report.md"], "json"),
    ],
)
def test_result_format_from_the_option_or_the_file_extension(argv, fmt):
    assert output_format(parse("result", "research-1", *argv)) == fmt


@pytest.mark.parametrize(
    "argv",
    [
        ["--format", "odt"],
        ["--json", "--format", "html"],
        ["--format", "md", "--json"],
    ],
)
def test_bad_or_conflicting_result_formats_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse("result", "research-1", *argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "name", "fmt"),
    [
        ([], "reports/research-1.md", "md"),
        (["--format", "html"], "reports/research-1.html", "html"),
        (["--format", "json"], "reports/research-1.json", "json"),
        (["-o", "mine.htm"], "mine.htm", "html"),
        (["-o", "mine.json"], "mine.json", "json"),
        (["-o", "mine.txt"], "mine.txt", "md"),
        (["-o", "mine.txt", "--format", "html"], "mine.txt", "html"),
    ],
)
def test_run_saves_the_report_in_the_chosen_format(argv, name, fmt):
    args = parse("run", "q", *argv)
    path, chosen = report_path(args, Path("reports"), "research-1")
    assert (path, chosen) == (Path(name), fmt)


FINISHED = ResearchResult(
    status="completed",
    question="q",
    locale="en-US",
    final_report="# Lighthouses\n\nThey guide ships.\n",
    citations=[Citation(title="Lighthouse", url="https://example.org/lighthouse")],
)


class FinishedRun:
    """Stands in for the Temporal client: every run is a `DeepResearch` that
    has already finished."""

    def get_workflow_handle(self, workflow_id, result_type=None):
        self.result_type = result_type
        return self

    async def describe(self):
        return types.SimpleNamespace(workflow_type="DeepResearch")

    async def result(self):
        assert self.result_type is ResearchResult
        return FINISHED


@pytest.fixture
def finished_run(monkeypatch, data_dir):
    """(in a data dir of its own: one holding a run's stored state would be read through the embedded server)"""

    async def connect(conn):
        return FinishedRun()

    monkeypatch.setattr(client.commands.result, "connect", connect)


@pytest.mark.parametrize(
    ("argv", "check"),
    [
        ([], lambda out: out == FINISHED.final_report),
        (["--json"], lambda out: ResearchResult.model_validate_json(out) == FINISHED),
        (["--format", "json"], lambda out: json.loads(out)["citations"][0]["title"] == "Lighthouse"),
        (["--format", "html"], lambda out: out.startswith("<!DOCTYPE html>") and "<title>Lighthouses</title>" in out),
    ],
)
def test_result_prints_the_chosen_format(argv, check, finished_run, capsys):
    assert asyncio.run(cmd_result(parse("result", "research-1", *argv))) == 0
    assert check(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("argv", "name", "start"),
    [
        (["-o", "report.html"], "report.html", "<!DOCTYPE html>"),
        (["-o", "report.json"], "report.json", "{"),
        (["-o", "report.md"], "report.md", "# Lighthouses"),
        (["-o", "report.txt", "--format", "html"], "report.txt", "<!DOCTYPE html>"),
    ],
)
def test_result_writes_the_file_in_the_inferred_format(argv, name, start, finished_run, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert asyncio.run(cmd_result(parse("result", "research-1", *argv))) == 0
    assert (tmp_path / name).read_text(encoding="utf-8").startswith(start)
    assert capsys.readouterr().out == f"saved to {name}\n"


def test_usage_reads_as_english_in_the_singular_and_the_plural():
    from client.wording import usage_text
    from workflows.models import Usage

    one = usage_text(Usage(llm_calls=1, searches=1, crawls=1, code_runs=1))
    assert one.startswith("1 LLM call (") and "1 search," in one and "1 crawl," in one and one.endswith("1 code run")
    many = usage_text(Usage(llm_calls=2, searches=3, crawls=0, code_runs=2, cache_hits=4))
    assert "2 LLM calls" in many and "3 searches" in many and "0 crawls" in many and many.endswith("4 cache hits")


class ReviewedRun:
    """What the terminal review talks to: a run that takes every update and
    notes which status (plan version or question) was on screen for it."""

    id = "research-terminal"

    def __init__(self) -> None:
        self.status: RunStatus | None = None
        self.updates: list[tuple[str, list, object]] = []

    async def query(self, *args, **kwargs) -> RunStatus | None:
        return self.status

    def get_workflow_handle(self, workflow_id: str) -> ReviewedRun:  # as the client, it hands out itself
        return self

    async def execute_update(self, name: str, args: list, **kwargs) -> str:
        shown = self.status.pending_question or self.status.plan_version
        self.updates.append((name, args, shown))
        return "ok"


async def test_the_terminal_review_does_not_ask_again_for_a_plan_or_question_it_answered(monkeypatch):
    """Right after an answer, a status can still show the same plan (or question)
    pending; the next typed line is for the next plan, not a second review of it."""
    import io

    from rich.console import Console

    from client.display import ProgressView
    from client.interactive import TerminalReview
    from workflows.models import Clarification, Plan

    plan = Plan(locale="en-US", has_enough_context=False, thought="", title="A plan", steps=[])

    def pending(version: int) -> RunStatus:
        return RunStatus(phase="awaiting_review", question="q", plan=plan, review_pending=True, plan_version=version)

    monkeypatch.setattr(sys, "stdin", io.StringIO("add costs\n\nIn Norway\nIn 1911\n"))
    monkeypatch.setenv("DEEPRESEARCH_USER", "alice")
    run = ReviewedRun()
    review = TerminalReview(run, run, ProgressView(Console(file=io.StringIO()), run.id))

    async def shown(status: RunStatus) -> None:
        run.status = status
        await review.maybe_ask(status)

    await shown(pending(1))
    await shown(pending(1))  # the edit is not yet seen by this status
    await shown(pending(2))
    asked = RunStatus(phase="clarifying", question="q", pending_question="Where?")
    await shown(asked)
    await shown(asked.model_copy(update={"clarifications": []}))  # the answer is not yet seen by this status
    answered = [Clarification(question="Where?", answer="In Norway")]
    await shown(asked.model_copy(update={"clarifications": answered, "pending_question": "When?"}))
    assert run.updates == [
        ("submit_review", [{"feedback": "[EDIT_PLAN] add costs", "by": "alice"}, 1], 1),  # the review names who
        ("submit_review", [{"feedback": "[ACCEPTED]", "by": "alice"}, 2], 2),
        ("answer_clarification", ["In Norway"], "Where?"),
        ("answer_clarification", ["In 1911"], "When?"),
    ]


def test_list_never_cuts_a_run_id_whatever_the_terminals_width():
    """Issue 27, item 10: at 80 columns a schedule's run ids were cut with "…",
    so they could not be copied."""
    from rich.console import Console

    from client.commands.list_runs import show

    ids = ["watch-2026-11-26T09:00:00Z", "a-long-schedule-name-of-a-topic-to-watch-2026-11-26T09:00:00Z"]
    for width in (80, 60, 120):
        for shown in (ids[:1], ids):
            console = Console(record=True, width=width, color_system=None)
            rows = [(i, "completed", "2026-11-26 09:00:01", "Scripted research\n(schedule watch)") for i in shown]
            show(console, rows)
            lines = console.export_text().splitlines()
            for run_id in shown:
                assert any(run_id in line and "completed" in line for line in lines), (width, lines)


def test_demo_help_names_its_own_task_queue(tmp_path):
    """Issue 27, item 10: `demo --help` said the queue defaults to deep-research."""

    def helped(command: str) -> str:
        return " ".join(run_cli(command, "--help", tmp_path=tmp_path, COLUMNS="300").stdout.split())

    assert "(DEEPRESEARCH_TASK_QUEUE; default deep-research-demo)" in helped("demo")
    assert "(DEEPRESEARCH_TASK_QUEUE; default the suite's id)" in helped("eval")


def test_hints_for_the_demos_runs_name_the_keyless_worker(monkeypatch):
    """Issue 27, item 8: `ask` on a demo run said to start `worker --task-queue
    deep-research-demo`, which fails without OPENAI_API_KEY."""
    from client.commands.run import resume_hint
    from client.talk import waiting_for_worker, worker_command
    from client.updates import no_worker_line

    monkeypatch.setenv("DEEPRESEARCH_CLI", "./dr")
    assert worker_command("deep-research-demo").startswith("`./dr worker --demo`")
    assert worker_command("deep-research") == "`./dr worker`"
    assert worker_command("mine") == "`./dr worker --task-queue mine`"
    conn = Connection.from_env({}, task_queue="deep-research-demo")
    for line in (waiting_for_worker(conn), no_worker_line("research-1", "deep-research-demo", "submit_review")):
        assert "`./dr worker --demo`" in line and "--task-queue" not in line
    assert "`./dr worker --demo`" in resume_hint("research-1", conn, started_server=True)
