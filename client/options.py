"""The run options and how the CLI turns what the user typed into workflow
input and feedback."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from client.errors import CliError

if TYPE_CHECKING:
    from infra.connection import Connection
    from workflows.models import ResearchInput

REPORT_STYLES = ("academic", "popular_science", "news", "social_media", "strategic_investment")
# The review prefixes, as workflows/review.py reads them. Copied, not imported:
# workflows.review loads Temporal's workflow module, which `review` must not
# (tests/test_cli_imports.py); tests/test_cli_unit.py checks the two agree.
ACCEPT, EDIT = "[ACCEPTED]", "[EDIT_PLAN]"
FORMATS = ("md", "html", "json", "pdf", "docx")  # report formats (client/export.py)
EXTENSIONS = {"md": ".md", "html": ".html", "json": ".json", "pdf": ".pdf", "docx": ".docx"}
_FORMAT_OF_SUFFIX = {".html": "html", ".htm": "html", ".json": "json", ".pdf": "pdf", ".docx": "docx"}
BINARY_FORMATS = ("pdf", "docx")


def format_for_path(path: str | Path) -> str:
    """The format a file name asks for: .html/.htm, .json, otherwise markdown."""
    return _FORMAT_OF_SUFFIX.get(Path(path).suffix.lower(), "md")


def resource_path(value: str) -> str:
    path = Path(value).expanduser().resolve()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file or folder: {value}")
    return str(path)


# (option, ResearchInput field, argparse keywords). Options left out keep the
# model's defaults, so the defaults live in one place: workflows/models.py.
RUN_OPTIONS: tuple[tuple[str, str, dict], ...] = (
    ("--locale", "locale", {"metavar": "LOCALE", "help": "language of the report, e.g. en-US, zh-CN"}),
    (
        "--max-plan-iterations",
        "max_plan_iterations",
        {"type": int, "metavar": "N", "help": "planning rounds (default 1)"},
    ),
    ("--max-step-num", "max_step_num", {"type": int, "metavar": "N", "help": "steps per plan (default 3)"}),
    (
        "--max-search-results",
        "max_search_results",
        {"type": int, "metavar": "N", "help": "results per web search (default 3)"},
    ),
    ("--auto-accept", "auto_accept_plan", {"action": "store_true", "help": "skip the human plan review"}),
    (
        "--no-background-investigation",
        "enable_background_investigation",
        {"action": "store_false", "help": "no web search before planning"},
    ),
    (
        "--clarify",
        "enable_clarification",
        {"action": "store_true", "help": "let the coordinator ask clarifying questions"},
    ),
    (
        "--max-clarification-rounds",
        "max_clarification_rounds",
        {"type": int, "metavar": "N", "help": "questions it may ask (default 3)"},
    ),
    ("--deep-thinking", "enable_deep_thinking", {"action": "store_true", "help": "plan with the reasoning model"}),
    (
        "--report-style",
        "report_style",
        {"choices": REPORT_STYLES, "metavar": "STYLE", "help": f"one of {', '.join(REPORT_STYLES)} (default academic)"},
    ),
    (
        "--max-agent-turns",
        "agent_max_turns",
        {"type": int, "metavar": "N", "help": "tool-use turns per agent (default 25)"},
    ),
    (
        "--resource",
        "resources",
        {
            "action": "append",
            "type": resource_path,
            "metavar": "PATH",
            "help": "local file or folder to search (repeatable)",
        },
    ),
    ("--sequential", "parallel_research", {"action": "store_false", "help": "run research steps one at a time"}),
    (
        "--token-budget",
        "token_budget",
        {
            "type": int,
            "metavar": "N",
            "help": "stop researching once the run has used N prompt + completion tokens; the report is written from what was found",
        },
    ),
    (
        "--evidence-pages",
        "evidence_pages",
        {
            "type": int,
            "metavar": "N",
            "help": "pages each research step reads before its first model turn (default 5; 0: the model alone decides what to read)",
        },
    ),
    (
        "--evidence-tokens",
        "evidence_tokens",
        {
            "type": int,
            "metavar": "N",
            "help": "tokens one page or one step's evidence may put into a prompt, whatever the context window (default 3000)",
        },
    ),
    (
        "--review-timeout",
        "review_timeout_hours",
        {
            "type": float,
            "metavar": "HOURS",
            "help": "stop waiting for a plan review after this long (default: wait indefinitely)",
        },
    ),
    (
        "--on-review-timeout",
        "on_review_timeout",
        {
            "choices": ("accept", "end"),
            "help": "what a review timeout does: accept the plan or end the run (default end)",
        },
    ),
    (
        "--continue-from",
        "continue_from",
        {
            "metavar": "ID",
            "help": "build on a finished run: plan from what it found and research only what is missing",
        },
    ),
    (
        "--recheck",
        "recheck",
        {
            "action": "store_true",
            "help": "with --continue-from: first read its sources again and re-run its searches; the report "
            "says what changed, each old and new value cited (scheduled runs always do)",
        },
    ),
)
OPTION_OF_FIELD = {field: option for option, field, _ in RUN_OPTIONS}


FORMAT_HELP = (
    "md (the report), html (a standalone page with the report and its sources), json "
    "(the whole result), pdf or docx (a PDF or Word document with headings, tables and linked sources); "
    "default: from the -o file's extension (.html/.htm, .json, .pdf, .docx), else md"
)


def output_format(args: argparse.Namespace) -> str:
    """--format (or --json) when given, else what the -o file's extension says, else md."""
    if args.format:
        return args.format
    return format_for_path(args.output) if args.output else "md"


def report_path(args: argparse.Namespace, reports: Path, workflow_id: str) -> tuple[Path, str]:
    """Where `run` saves the report, and in which format."""
    from client.ids import file_stem

    fmt = output_format(args)
    return args.output or reports / f"{file_stem(workflow_id)}{EXTENSIONS[fmt]}", fmt


def research_input(args: argparse.Namespace) -> ResearchInput:
    from pydantic import ValidationError

    from workflows.models import ResearchInput

    """The workflow input from the options the user gave."""
    question = args.question.strip()
    if not question:
        raise CliError("the question is empty")
    given = {field: getattr(args, field) for _, field, _ in RUN_OPTIONS if hasattr(args, field)}
    if hasattr(args, "share"):  # a command that starts runs: they are the CLI user's (client/users.py)
        from client.users import cli_user
        from workflows.user_names import split_shares

        given["owner"] = cli_user()
        if args.share:
            given["shared_with"] = split_shares(args.share)
    try:
        return ResearchInput(question=question, **given)
    except ValidationError as err:
        problems = "; ".join(f"{_option(e['loc'])}: {e['msg']}" for e in err.errors())
        raise CliError(f"invalid run options: {problems}") from None


def _option(loc: tuple) -> str:
    field = str(loc[0]) if loc else "input"
    return {"shared_with": "--share", "owner": "DEEPRESEARCH_USER"}.get(field) or OPTION_OF_FIELD.get(field, field)


# Text arguments that go to Temporal (and so must be UTF-8), and how to name them.
TEXT_ARGUMENTS = {
    "question": "the question",
    "edit": "--edit",
    "feedback": "--feedback",
    "text": "the text",
    "command": "--command",
    "id": "--id",
    "workflow_id": "the run id",
    "run": "--run",
    "locale": "--locale",
    "note": "the note",
}


def text_problem(args: argparse.Namespace) -> str | None:
    """One line when a text argument is not UTF-8 (bytes the terminal or a
    script passed in another encoding, which Python keeps as surrogates)."""
    for name, what in TEXT_ARGUMENTS.items():
        value = getattr(args, name, None)
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as err:
                byte = value[err.start].encode("utf-8", "surrogateescape")
                return (
                    f"{what} is not UTF-8 text (byte {byte.hex(' ')} at character {err.start + 1}): "
                    "set your terminal or script to UTF-8, or retype it"
                )
    return None


def id_problem(args: argparse.Namespace) -> str | None:
    """One line when an id this command would give a new run or schedule
    holds a control character (ids other clients gave are read as they are,
    and shown safely: ``client.terminal_text.one_line``)."""
    from client.ids import control_in_id

    given = [("--id", getattr(args, "id", None))]
    if getattr(args, "action", None) == "create":  # `schedule create NAME`: its runs' ids start with NAME
        given.append(("the schedule's NAME", getattr(args, "name", None)))
    for what, value in given:
        if isinstance(value, str) and (where := control_in_id(value)):
            return f"{what} holds a control character ({where}): an id must be one line of visible text"
    return None


def review_feedback(args: argparse.Namespace) -> str:
    if args.accept:
        return ACCEPT
    if args.edit is not None:
        return f"{EDIT} {args.edit}"
    return args.feedback


def feedback_from_reply(reply: str) -> str:
    """What a reply typed at the review prompt means."""
    reply = reply.strip()
    if reply.lower() in ("", "y", "yes", "accept"):
        return ACCEPT
    return reply if reply.startswith("[") else f"{EDIT} {reply}"


def connection(args: argparse.Namespace) -> Connection:
    from infra.connection import Connection

    return Connection.from_env(address=args.address, namespace=args.namespace, task_queue=args.task_queue)


# The embedded dev server (`run` when none is reachable, `server`).
DEV_SERVER_PORT = 7233
DEV_UI_PORT = 8233


def dev_server_ports(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """The embedded dev server's gRPC and UI ports: DEEPRESEARCH_DEV_SERVER_PORT
    and DEEPRESEARCH_DEV_UI_PORT, default 7233 and 8233."""
    env = os.environ if env is None else env
    ports = []
    for name, default in (("DEEPRESEARCH_DEV_SERVER_PORT", DEV_SERVER_PORT), ("DEEPRESEARCH_DEV_UI_PORT", DEV_UI_PORT)):
        value = (env.get(name) or "").strip()
        if not value:
            ports.append(default)
        elif value.isdigit() and 0 < int(value) < 65536:
            ports.append(int(value))
        else:
            raise CliError(f"{name} must be a port number, not {value!r}")
    return ports[0], ports[1]
