"""The ``deepresearch`` command line (see README, "Commands").

This module only parses: each command lives in ``client/commands/<name>.py``
and is imported when it runs, so ``--help`` and quick commands start fast.
``dispatch`` turns the errors a user can cause (no server, bad configuration,
bad options, a rejected review, an unknown or failed run) into one ``error:``
line on stderr. The process ends with ``infra.process.exit_now`` after
flushing: a short-lived process that opened a temporalio client can abort at
interpreter exit (sdk-python issue #300).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from pathlib import Path

from client.options import DEV_SERVER_PORT, DEV_UI_PORT, FORMAT_HELP, FORMATS, RUN_OPTIONS
from infra.errors import cli_name

PROSE_OPTIONS = ("continue", "improve", "shorter", "longer", "fix", "zap")  # workflows/models.py


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + error
        sys.stderr.write(f"error: {message} (see `{self.prog} --help`)\n")
        sys.exit(2)


DEMO_HELP = "the scripted model and offline web of `demo`"
# The task queue a command uses when none is given, where it is not DEEPRESEARCH_TASK_QUEUE's.
QUEUE_DEFAULTS = {
    "demo": "deep-research-demo",
    "worker": "deep-research; with --demo deep-research-demo",
    "ui": "deep-research; with --demo deep-research-demo",
    "eval": "the suite's id",
}


def add_connection_options(parser: argparse.ArgumentParser, default: object, queue: str = "deep-research") -> None:
    # On the main parser (default None) and on each command (default SUPPRESS,
    # so a value given before the command is not overwritten).
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--address", default=default, help="Temporal host:port (TEMPORAL_ADDRESS; default localhost:7233)"
    )
    group.add_argument(
        "--namespace", default=default, help="Temporal namespace (TEMPORAL_NAMESPACE; default 'default')"
    )
    group.add_argument("--task-queue", default=default, help=f"task queue (DEEPRESEARCH_TASK_QUEUE; default {queue})")


def add_run_options(
    parser: argparse.ArgumentParser,
    question_optional: bool = False,
    id_help: str = "workflow id (default research-<random>)",
    leave_out: tuple[str, ...] = (),
) -> None:
    if question_optional:
        parser.add_argument("question", nargs="?", default="", help="what to research (not with --attach)")
    else:
        parser.add_argument("question", help="what to research")
    parser.add_argument("--id", help=id_help)
    group = parser.add_argument_group("run options")
    for option, field, keywords in RUN_OPTIONS:
        if field not in leave_out:
            group.add_argument(option, dest=field, default=argparse.SUPPRESS, **keywords)
    group.add_argument(
        "--share",
        action="append",
        metavar="USER|team:NAME",
        help="who else may read the run (repeatable, or comma-separated); the run is DEEPRESEARCH_USER's",
    )


def add_eval_command(sub: argparse.ArgumentParser) -> None:
    """`eval`'s options (SPEC 3b; client/commands/eval.py)."""
    sub.add_argument("--suite", help="a built-in suite: builtin (the default without --tasks)")
    sub.add_argument("--tasks", type=Path, metavar="FILE.jsonl", help="your own task file (with --corpus)")
    sub.add_argument("--corpus", type=Path, metavar="DIR", help="the folder of documents the tasks ask about")
    sub.add_argument("--only", metavar="ID,...", help="run only these tasks")
    sub.add_argument("--runs", type=int, default=1, metavar="N", help="run each task N times: mean and spread")
    sub.add_argument("--concurrency", type=int, default=2, metavar="N", help="tasks at once (default 2)")
    sub.add_argument("--judge-model", metavar="M", help="also have model M score each report on a rubric")
    sub.add_argument("--json", type=Path, metavar="FILE", help="write every score to this JSON file")
    sub.add_argument("--compare", nargs=2, type=Path, metavar=("A.json", "B.json"), help="compare two results")
    sub.add_argument("--id", help="the suite's workflow id (default: from the tasks, corpus, options and models)")
    group = sub.add_argument_group("run options (every task's; a task's own options win)")
    for option, field, keywords in RUN_OPTIONS:
        if field != "auto_accept_plan":
            group.add_argument(option, dest=field, default=argparse.SUPPRESS, **keywords)


def build_parser() -> Parser:
    parser = Parser(prog=cli_name(), description="Durable deep research on Temporal.")
    add_connection_options(parser, None)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: str, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(handler=handler)
        if name != "server":
            add_connection_options(sub, argparse.SUPPRESS, QUEUE_DEFAULTS.get(name, "deep-research"))
        return sub

    run = command("run", "run:main", "research a question: start, follow, review the plan, print the report")
    add_run_options(run, question_optional=True)
    run.add_argument(
        "-o", "--output", type=Path, help="save the report here (default <data dir>/reports/<id>.<format>)"
    )
    run.add_argument("--format", choices=FORMATS, help="format of the saved report: " + FORMAT_HELP)
    run.add_argument("--attach", metavar="ID", help="follow the run ID started elsewhere instead of starting one")
    run.add_argument(
        "--worker",
        action=argparse.BooleanOptionalAction,
        help="run a worker in this process (default: only when it starts the dev server itself)",
    )

    demo = command(
        "demo", "demo:main", "try the whole flow with no key and no network: a scripted model, an offline web"
    )
    add_run_options(demo, question_optional=True)
    demo.add_argument(
        "-o", "--output", type=Path, help="save the report here (default <data dir>/reports/<id>.<format>)"
    )
    demo.add_argument("--format", choices=FORMATS, help="format of the saved report: " + FORMAT_HELP)
    demo.add_argument(
        "--pace", type=float, default=0.0, metavar="S", help="each research turn takes S seconds: time to steer it"
    )

    add_run_options(command("start", "start:main", "start a run and print its workflow id"))

    review = command("review", "review:main", "send plan feedback to a run waiting for review")
    review.add_argument("workflow_id", metavar="ID")
    choice = review.add_mutually_exclusive_group(required=True)
    choice.add_argument("--accept", action="store_true", help="accept the plan")
    choice.add_argument("--edit", metavar="TEXT", help="ask the planner for these changes")
    choice.add_argument("--feedback", metavar="RAW", help="raw feedback starting with [ACCEPTED] or [EDIT_PLAN]")
    review.add_argument(
        "--plan-version",
        type=int,
        metavar="N",
        help="the plan version you reviewed (shown by `status`); rejected if the plan has changed since",
    )

    answer = command("answer", "review:answer", "answer a run's clarifying question")
    answer.add_argument("workflow_id", metavar="ID")
    answer.add_argument("text", help="the answer")

    status = command("status", "status:main", "show a run's phase, plan, steps and pending question")
    status.add_argument("workflow_id", metavar="ID")
    status.add_argument("--json", action="store_true", help="print the status as JSON")

    watch = command("watch", "watch:main", "follow a run's progress until it ends")
    watch.add_argument("workflow_id", metavar="ID")

    result = command("result", "result:main", "wait for a run and print its report")
    result.add_argument("workflow_id", metavar="ID")
    shape = result.add_mutually_exclusive_group()
    shape.add_argument("--format", choices=FORMATS, help=FORMAT_HELP)
    shape.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    result.add_argument("-o", "--output", type=Path, help="write it to this file instead (- for standard output)")

    listing = command("list", "list_runs:main", "recent runs with their status")
    listing.add_argument("--limit", type=int, default=20, help="how many (default 20)")

    cancel = command("cancel", "cancel:main", "cancel a run: it ends with a partial report of what it found")
    cancel.add_argument("workflow_id", metavar="ID")

    steer = command("steer", "steer:main", "send a running run a note: it applies at the next safe point")
    steer.add_argument("workflow_id", metavar="ID")
    steer.add_argument("note", nargs="?", help='what the research should do differently, e.g. "only EU sources"')
    steer.add_argument("--url", action="append", metavar="URL", help="a page for the run to read (repeatable)")
    steer.add_argument("--file", metavar="F", help="read the note from file F (- for standard input)")
    steer.add_argument("--json", action="store_true", help="print {accepted, applies_at, message}")

    podcast = command("podcast", "podcast:main", "turn a finished run's report into a two-host audio conversation")
    podcast.add_argument("workflow_id", metavar="ID")
    podcast.add_argument("-o", "--output", type=Path, help="audio file (default <data dir>/reports/<ID>.mp3 or .wav)")
    podcast.add_argument("--json", action="store_true", help="print the result (file, script, usage) as JSON")

    slides = command("slides", "slides:main", "turn a finished run's report into a slide deck")
    slides.add_argument("workflow_id", metavar="ID")
    slides.add_argument("-o", "--output", type=Path, help="file (default <data dir>/reports/<ID>.pptx or .md)")
    slides.add_argument("--format", choices=("pptx", "md"), help="a PowerPoint deck (default) or its Marp markdown")
    slides.add_argument("--json", action="store_true", help="print the result (file, slides, usage) as JSON")

    prose = command("prose", "prose:main", "rewrite a text (or a run's report): continue, improve, shorten, ...")
    prose.add_argument("text", nargs="?", help="the text (or use --run ID)")
    prose.add_argument("--option", required=True, choices=PROSE_OPTIONS, help="what to do with the text")
    prose.add_argument("--command", help="for --option zap: what to do, e.g. 'turn it into a press release'")
    prose.add_argument("--run", metavar="ID", help="rewrite this finished run's report")
    prose.add_argument("--json", action="store_true", help="print the result as JSON")

    ui = command("ui", "ui:main", "serve the research desk: a web page to start, follow, review and read runs")
    ui.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; others need users: a trusted proxy's header, "
        "DEEPRESEARCH_UI_USERS or DEEPRESEARCH_UI_TOKEN)",
    )
    ui.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    ui.add_argument(
        "--new-user",
        metavar="NAME",
        help="make a token for user NAME and its line of the users file (added to DEEPRESEARCH_UI_USERS when set), "
        "print the token, and exit",
    )
    ui.add_argument("--role", default="researcher", help="with --new-user: reader, researcher or admin")
    ui.add_argument("--team", action="append", default=[], metavar="TEAM", help="with --new-user: a team (repeatable)")
    ui.add_argument(
        "--resources-dir",
        action="append",
        type=Path,
        metavar="DIR",
        help="runs started on the desk may search local documents inside DIR (repeatable; DEEPRESEARCH_UI_RESOURCES)",
    )

    attach = command("attach", "attach:main", "follow a run started elsewhere, with the review prompt: as `run` does")
    attach.add_argument("workflow_id", metavar="ID")
    attach.add_argument(
        "-o", "--output", type=Path, help="save the report here (default <data dir>/reports/<id>.<format>)"
    )
    attach.add_argument("--format", choices=FORMATS, help="format of the saved report: " + FORMAT_HELP)

    blob = command("blob", "blob:main", "print what the blob store keeps under a sha256: reference (a crawled page, …)")
    blob.add_argument("ref", metavar="REF", help="sha256:<64 hex digits>, as history and results show them")
    blob.add_argument("-o", "--output", type=Path, help="save the bytes to this file instead")

    gc = command("gc", "gc:main", "delete stored pages, conversations and payloads no kept run can need")
    gc.add_argument(
        "--older-than", type=float, default=30, metavar="DAYS", help="only files older than this (default 30)"
    )
    gc.add_argument("--dry-run", action="store_true", help="say what would be deleted, delete nothing")

    add_research_goes_on(command)
    add_eval_command(command("eval", "eval:main", "run an evaluation suite on an offline corpus and score the reports"))

    command("worker", "worker:main", "run a worker until Ctrl-C")
    command("doctor", "doctor:main", "check the configuration: one row per check, naming what to set")

    server = command("server", "server:main", "run the embedded Temporal dev server with its UI until Ctrl-C")
    # Defaults (None) come from the same variables as `run`'s embedded server.
    server.add_argument("--port", type=int, help=f"gRPC port (DEEPRESEARCH_DEV_SERVER_PORT; default {DEV_SERVER_PORT})")
    server.add_argument("--ui-port", type=int, help=f"web UI port (DEEPRESEARCH_DEV_UI_PORT; default {DEV_UI_PORT})")
    server.add_argument("--db", type=Path, help="SQLite file (default <data dir>/temporal.db)")
    add_demo_options(commands.choices)
    return parser


def add_demo_options(commands: dict[str, argparse.ArgumentParser]) -> None:
    """`--demo` on `worker`, `ui` and `eval` (SPEC 3c, "Keyless beyond the demo")."""
    server = " (no key; starts the embedded server when none runs)"
    for name, what in (
        ("worker", f"serve the demo's task queue with {DEMO_HELP}{server}"),
        ("ui", f"with a worker of {DEMO_HELP} in this process{server}"),
        ("eval", "research with the scripted model of `demo` (no key; it scores its rules, not a model)"),
    ):
        commands[name].add_argument("--demo", action="store_true", help=what)


def add_research_goes_on(command) -> None:
    """`ask` (follow-up questions on a run) and `schedule` (research that repeats)."""
    ask = command("ask", "ask:main", "ask a finished run a follow-up question (researches more when needed)")
    ask.add_argument("workflow_id", metavar="ID")
    ask.add_argument("question", help="the follow-up question")
    ask.add_argument("--review", action="store_true", help="review the plan of any further research")
    ask.add_argument("--json", action="store_true", help="print {workflow_id, answer, citations, researched}")

    schedule = command("schedule", "schedule:main", "research that repeats on a Temporal Schedule")
    actions = schedule.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a schedule: each run builds on its last completed one")
    create.add_argument("name", metavar="NAME")
    # Plans are accepted unless --review (no --auto-accept), and each run builds on
    # the schedule's own last run (no --continue-from) and always re-checks it (no --recheck).
    add_run_options(
        create,
        id_help="the start of each run's workflow id (default NAME; Temporal adds the start time)",
        leave_out=("auto_accept_plan", "continue_from", "recheck"),
    )
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--every", metavar="DURATION", help="e.g. 1w, 1d, 12h, 30m (s, m, h, d, w)")
    when.add_argument("--cron", metavar="EXPR", help="a cron expression, e.g. '0 8 * * MON'")
    create.add_argument("--review", action="store_true", help="each run waits for plan review (default: auto-accept)")
    create.add_argument(
        "--demo", action="store_true", help="its runs go to the demo's task queue: `worker --demo` serves them, no key"
    )
    add_connection_options(create, argparse.SUPPRESS)
    add_connection_options(
        actions.add_parser("list", help="the schedules, their next and last runs"), argparse.SUPPRESS
    )
    for action, text in (("pause", "pause"), ("unpause", "resume"), ("trigger", "start a run now of"),
                         ("delete", "delete")):  # fmt: skip
        sub = actions.add_parser(action, help=f"{text} the schedule NAME")
        sub.add_argument("name", metavar="NAME")
        add_connection_options(sub, argparse.SUPPRESS)


def load_quietly(name: str) -> object:
    """Import a command's module with the garbage collector paused: the
    imports (temporalio, pydantic, protobuf) allocate objects that all stay
    alive, so collecting while importing finds nothing and costs a quick
    command about a tenth of its time. They are frozen afterwards, so later
    collections skip them too."""
    gc.disable()
    try:
        return importlib.import_module(name)
    finally:
        gc.freeze()
        gc.enable()


def dispatch(args: argparse.Namespace) -> int:
    import asyncio
    import traceback

    from client.errors import error_line
    from client.terminal_text import guard_terminal

    guard_terminal()  # no C1 control reaches the terminal, whatever a run or an id holds
    module, function = args.handler.split(":")
    try:
        handler = getattr(load_quietly(f"client.commands.{module}"), function)
        return asyncio.run(handler(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): nothing to say, as with SIGPIPE
        return 141
    except Exception as err:
        line = error_line(err, args)
        if line is None:
            traceback.print_exc()
            return 1
        print(f"error: {line}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> None:
    from client.options import id_problem, text_problem

    args = build_parser().parse_args(argv)
    if problem := text_problem(args) or id_problem(args):
        print(f"error: {problem}", file=sys.stderr)
        code = 2
    else:
        code = dispatch(args)
    from infra.process import exit_now

    exit_now(code)


if __name__ == "__main__":
    main()
