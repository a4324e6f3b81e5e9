"""The ``deepresearch`` command line (SPEC §3).

One async function per command; ``dispatch`` turns the errors a user can cause
(no server, bad configuration, bad options, a rejected review, an unknown or
failed run) into one ``error:`` line on stderr. The process ends with
``os._exit`` after flushing: a short-lived process that opened a temporalio
client can abort at interpreter exit (sdk-python issue #300).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import threading
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from datetime import timedelta
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from client.devserver import DevServer, DevServerError, port_open
from client.display import (
    ProgressView,
    event_line,
    make_console,
    print_report,
    render_plan,
    render_status,
    usage_text,
)
from client.export import EXTENSIONS, FORMATS, format_for_path, render
from client.runs import WORKFLOW_TYPE, new_workflow_id, start_research
from infra.errors import ConfigError, ConnectionFailed
from infra.process import cancel_on_sigterm, exit_now, stop_on_signals
from infra.settings import Settings, data_dir
from infra.temporal import Connection, connect
from workflows.models import (
    PHASE_ATTRIBUTE,
    PROGRESS_TOPIC,
    REPORT_STYLES,
    TITLE_ATTRIBUTE,
    ProgressEvent,
    ResearchInput,
    ResearchResult,
    RunStatus,
)

POLL_SECONDS = 0.5
QUERY_TIMEOUT = timedelta(seconds=5)
DEV_SERVER_PORT = 7233
DEV_UI_PORT = 8233


class CliError(Exception):
    """A one-line error for the user."""


# --- parsing -------------------------------------------------------------------


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
)
OPTION_OF_FIELD = {field: option for option, field, _ in RUN_OPTIONS}


FORMAT_HELP = (
    "md (the report), html (a standalone page with the report and its sources) or json "
    "(the whole result); default: from the -o file's extension (.html/.htm, .json), else md"
)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + error
        sys.stderr.write(f"error: {message} (see `{self.prog} --help`)\n")
        sys.exit(2)


def add_connection_options(parser: argparse.ArgumentParser, default: object) -> None:
    # On the main parser (default None) and on each command (default SUPPRESS,
    # so a value given before the command is not overwritten).
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--address", default=default, help="Temporal host:port (TEMPORAL_ADDRESS; default localhost:7233)"
    )
    group.add_argument(
        "--namespace", default=default, help="Temporal namespace (TEMPORAL_NAMESPACE; default 'default')"
    )
    group.add_argument(
        "--task-queue", default=default, help="task queue (DEEPRESEARCH_TASK_QUEUE; default deep-research)"
    )


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="what to research")
    parser.add_argument("--id", help="workflow id (default research-<random>)")
    group = parser.add_argument_group("run options")
    for option, field, keywords in RUN_OPTIONS:
        group.add_argument(option, dest=field, default=argparse.SUPPRESS, **keywords)


def build_parser() -> Parser:
    parser = Parser(prog="deepresearch", description="Durable deep research on Temporal.")
    add_connection_options(parser, None)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Callable, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(handler=handler)
        if name != "server":
            add_connection_options(sub, argparse.SUPPRESS)
        return sub

    run = command("run", cmd_run, "research a question: start, follow, review the plan, print the report")
    add_run_options(run)
    run.add_argument(
        "-o", "--output", type=Path, help="save the report here (default <data dir>/reports/<id>.<format>)"
    )
    run.add_argument("--format", choices=FORMATS, help="format of the saved report: " + FORMAT_HELP)
    run.add_argument(
        "--worker",
        action=argparse.BooleanOptionalAction,
        help="run a worker in this process (default: only when it starts the dev server itself)",
    )

    add_run_options(command("start", cmd_start, "start a run and print its workflow id"))

    review = command("review", cmd_review, "send plan feedback to a run waiting for review")
    review.add_argument("workflow_id", metavar="ID")
    choice = review.add_mutually_exclusive_group(required=True)
    choice.add_argument("--accept", action="store_true", help="accept the plan")
    choice.add_argument("--edit", metavar="TEXT", help="ask the planner for these changes")
    choice.add_argument("--feedback", metavar="RAW", help="raw feedback starting with [ACCEPTED] or [EDIT_PLAN]")

    answer = command("answer", cmd_answer, "answer a run's clarifying question")
    answer.add_argument("workflow_id", metavar="ID")
    answer.add_argument("text", help="the answer")

    status = command("status", cmd_status, "show a run's phase, plan, steps and pending question")
    status.add_argument("workflow_id", metavar="ID")
    status.add_argument("--json", action="store_true", help="print the status as JSON")

    watch = command("watch", cmd_watch, "follow a run's progress until it ends")
    watch.add_argument("workflow_id", metavar="ID")

    result = command("result", cmd_result, "wait for a run and print its report")
    result.add_argument("workflow_id", metavar="ID")
    shape = result.add_mutually_exclusive_group()
    shape.add_argument("--format", choices=FORMATS, help=FORMAT_HELP)
    shape.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    result.add_argument("-o", "--output", type=Path, help="write it to this file instead")

    listing = command("list", cmd_list, "recent runs with their status")
    listing.add_argument("--limit", type=int, default=20, help="how many (default 20)")

    command("worker", cmd_worker, "run a worker until Ctrl-C")

    server = command("server", cmd_server, "run the embedded Temporal dev server with its UI until Ctrl-C")
    server.add_argument("--port", type=int, default=DEV_SERVER_PORT, help=f"gRPC port (default {DEV_SERVER_PORT})")
    server.add_argument("--ui-port", type=int, default=DEV_UI_PORT, help=f"web UI port (default {DEV_UI_PORT})")
    server.add_argument("--db", type=Path, help="SQLite file (default <data dir>/temporal.db)")
    return parser


def output_format(args: argparse.Namespace) -> str:
    """--format (or --json) when given, else what the -o file's extension says, else md."""
    if args.format:
        return args.format
    return format_for_path(args.output) if args.output else "md"


def report_path(args: argparse.Namespace, reports: Path, workflow_id: str) -> tuple[Path, str]:
    """Where `run` saves the report, and in which format."""
    fmt = output_format(args)
    return args.output or reports / f"{workflow_id}{EXTENSIONS[fmt]}", fmt


def research_input(args: argparse.Namespace) -> ResearchInput:
    """The workflow input from the options the user gave."""
    question = args.question.strip()
    if not question:
        raise CliError("the question is empty")
    given = {field: getattr(args, field) for _, field, _ in RUN_OPTIONS if hasattr(args, field)}
    try:
        return ResearchInput(question=question, **given)
    except ValidationError as err:
        problems = "; ".join(f"{OPTION_OF_FIELD.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}" for e in err.errors())
        raise CliError(f"invalid run options: {problems}") from None


def review_feedback(args: argparse.Namespace) -> str:
    if args.accept:
        return "[ACCEPTED]"
    if args.edit is not None:
        return f"[EDIT_PLAN] {args.edit}"
    return args.feedback


def feedback_from_reply(reply: str) -> str:
    """What a reply typed at the review prompt means."""
    reply = reply.strip()
    if reply.lower() in ("", "y", "yes", "accept"):
        return "[ACCEPTED]"
    return reply if reply.startswith("[") else f"[EDIT_PLAN] {reply}"


def connection(args: argparse.Namespace) -> Connection:
    return Connection.from_env(address=args.address, namespace=args.namespace, task_queue=args.task_queue)


# --- talking to a run ------------------------------------------------------------


async def query_status(handle: WorkflowHandle) -> RunStatus:
    return await handle.query("status", result_type=RunStatus, rpc_timeout=QUERY_TIMEOUT)


async def poll_status(handle: WorkflowHandle) -> RunStatus | None:
    """The status, or None while no worker answers (or the run is just starting)."""
    try:
        return await query_status(handle)
    except WorkflowQueryFailedError:
        return None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise
        return None


def rejection_reason(err: WorkflowUpdateFailedError) -> str:
    return getattr(err.cause, "message", None) or str(err.cause)


def failure_message(err: BaseException) -> str:
    messages: list[str] = []
    cause: BaseException | None = err.cause if isinstance(err, WorkflowFailureError) else err
    while cause is not None:
        text = getattr(cause, "message", None) or str(cause)
        if text and text not in messages:
            messages.append(text)
        cause = cause.__cause__
    return ": ".join(messages) or "unknown failure"


def next_action(status: RunStatus, workflow_id: str) -> str | None:
    if status.review_pending:
        return f"review the plan: deepresearch review {workflow_id} --accept  (or --edit TEXT)"
    if status.phase == "clarifying" and status.pending_question:
        return f"answer the question: deepresearch answer {workflow_id} TEXT"
    return None


def waiting_for_worker(conn: Connection) -> str:
    return (
        f"waiting for a worker on task queue {conn.task_queue!r}: start one with "
        "`deepresearch worker` (or pass --worker)"
    )


def exit_code(result: ResearchResult) -> int:
    return 1 if result.status == "plan_failed" else 0


def write_file(path: Path, text: str) -> Path:
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- the interactive run -----------------------------------------------------------


class LineReader:
    """Reads stdin lines in a daemon thread, so the event loop (and the worker in
    it) keeps running while the user types, and Ctrl-C is never stuck in input()."""

    def __init__(self) -> None:
        self.eof = False
        self._line: asyncio.Future[str | None] | None = None

    def readline(self) -> asyncio.Future[str | None]:
        # A read still waiting is reused; a line typed for an abandoned prompt is dropped.
        if self._line is None or self._line.done():
            loop = asyncio.get_running_loop()
            future: asyncio.Future[str | None] = loop.create_future()

            def deliver(line: str) -> None:
                if not future.done():
                    future.set_result(line or None)

            threading.Thread(
                target=lambda: loop.call_soon_threadsafe(deliver, sys.stdin.readline()), daemon=True
            ).start()
            self._line = future
        return self._line


class TerminalReview:
    """Asks at the terminal when the run waits for a plan review or an answer."""

    def __init__(self, handle: WorkflowHandle, view: ProgressView) -> None:
        self.handle = handle
        self.view = view
        self.console = view.console
        self.reader = LineReader()

    async def maybe_ask(self, status: RunStatus) -> None:
        if self.reader.eof:
            return
        if status.review_pending:
            await self.ask(
                render_plan(status.plan) if status.plan else Text("The plan is ready for review."),
                "Accept the plan? [Enter/y accepts, or type the changes you want] ",
                lambda s: s.review_pending,
                "submit_review",
                feedback_from_reply,
            )
        elif status.phase == "clarifying" and status.pending_question:
            await self.ask(
                Text(status.pending_question, style="bold yellow"),
                "Your answer: ",
                lambda s: s.phase == "clarifying" and bool(s.pending_question),
                "answer_clarification",
                str.strip,
            )

    async def ask(
        self,
        intro: RenderableType,
        prompt: str,
        still_pending: Callable[[RunStatus], bool],
        update: str,
        to_argument: Callable[[str], str],
    ) -> None:
        with self.view.paused():
            self.console.print(intro)
            while (line := await self.read_line(prompt, still_pending)) is not None:
                if not (argument := to_argument(line)):
                    continue
                try:
                    reply = await self.handle.execute_update(update, argument, result_type=str)
                except WorkflowUpdateFailedError as err:
                    self.console.print(Text(f"rejected: {rejection_reason(err)}", style="red"))
                    continue
                self.console.print(Text(reply, style="green"))
                return

    async def read_line(self, prompt: str, still_pending: Callable[[RunStatus], bool]) -> str | None:
        """A typed line; None at end of input or once the question was answered elsewhere."""
        self.console.print(Text(prompt, style="bold"), end="")
        line = self.reader.readline()
        while not (await asyncio.wait({line}, timeout=1.0))[0]:
            status = await poll_status(self.handle)
            if status is not None and not still_pending(status):
                self.console.print("\n(answered elsewhere)")
                return None
        text = line.result()
        if text is None:
            self.reader.eof = True
            status = await poll_status(self.handle)
            hint = next_action(status, self.handle.id) if status else None
            self.console.print(f"\nend of input; {hint or 'nothing to send'}. Waiting for the run to finish.")
            return None
        if not sys.stdin.isatty():
            self.console.print(text.rstrip("\n"), markup=False)  # so a transcript shows the answer
        return text


async def show_tool_calls(client: Client, workflow_id: str, view: ProgressView) -> None:
    """Print each tool call from the run's progress stream as it happens."""
    stream = WorkflowStreamClient.create(client, workflow_id)
    async for item in stream.subscribe(PROGRESS_TOPIC, result_type=ProgressEvent):
        if item.data.kind == "tool_call":
            view.note(event_line(item.data), style="dim")


async def follow_run(
    client: Client, handle: WorkflowHandle, conn: Connection, console: Console, worker: asyncio.Task | None
) -> ResearchResult:
    result = asyncio.create_task(handle.result())
    tool_calls: asyncio.Task | None = None
    try:
        with ProgressView(console, handle.id) as view:
            tool_calls = asyncio.create_task(show_tool_calls(client, handle.id, view))
            review = TerminalReview(handle, view)
            said_waiting = False
            while not result.done():
                if worker is not None and worker.done():
                    worker.result()  # raises what stopped it
                    raise CliError("the in-process worker stopped unexpectedly")
                status = await poll_status(handle)
                if status is not None:
                    view.update(status)
                    await review.maybe_ask(status)
                elif not said_waiting and worker is None:
                    view.note(waiting_for_worker(conn), style="yellow")
                    said_waiting = True
                await asyncio.wait({result}, timeout=POLL_SECONDS)
        return result.result()
    finally:
        result.cancel()
        if tool_calls:
            tool_calls.cancel()


@asynccontextmanager
async def in_process_worker(conn: Connection, settings: Settings) -> AsyncIterator[asyncio.Task]:
    from worker import run_worker

    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(conn, settings, stop=stop))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait({task})  # its failure, if any, was reported by follow_run


def resume_hint(workflow_id: str, conn: Connection, started_server: bool) -> str:
    where = (
        f" (its state is in {conn.data_dir / 'temporal.db'}; it goes on when `deepresearch server` "
        "and `deepresearch worker` run)"
        if started_server
        else ""
    )
    return (
        f"\nThe run {workflow_id} continues durably{where}. Follow it with "
        f"`deepresearch watch {workflow_id}` or get the report with `deepresearch result {workflow_id}`."
    )


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "localhost", int(port or DEV_SERVER_PORT)


async def cmd_run(args: argparse.Namespace) -> int:
    request = research_input(args)
    conn = connection(args)
    host, port = split_address(conn.address)
    start_server = not conn.address_given and not port_open(host, port)
    with_worker = start_server if args.worker is None else args.worker
    settings = Settings.from_env() if with_worker else None
    if settings is not None:
        settings.check()
    console = make_console()
    async with AsyncExitStack() as stack:
        stack.enter_context(cancel_on_sigterm())
        if start_server:
            server = DevServer(
                db_file=conn.data_dir / "temporal.db",
                port=port,
                ui_port=DEV_UI_PORT,
                log_file=conn.data_dir / "temporal-server.log",
            )
            console.print(f"starting the Temporal dev server (state in {server.db_file})", markup=False)
            stack.enter_context(server)
            conn = dataclasses.replace(conn, address=server.address)
            console.print(f"Temporal UI: {server.ui_url}", markup=False)
        client = await connect(conn)
        worker = await stack.enter_async_context(in_process_worker(conn, settings)) if settings else None
        handle = await start_research(client, conn, request, args.id or new_workflow_id())
        console.print(f"run {handle.id} started", markup=False)
        try:
            result = await follow_run(client, handle, conn, console, worker)
        except asyncio.CancelledError:
            console.print(resume_hint(handle.id, conn, start_server), markup=False)
            local = [name for name, ours in (("worker", worker), ("Temporal server", start_server)) if ours]
            if local:
                console.print(f"stopping the local {' and '.join(local)}…", markup=False)
            raise
    print_report(console, result.final_report)
    path, fmt = report_path(args, conn.data_dir / "reports", handle.id)
    path = write_file(path, render(result, fmt))
    console.print(f"run {handle.id}: {result.status}; {usage_text(result.usage)}", markup=False)
    console.print(f"report saved to {path}", markup=False)
    return exit_code(result)


# --- the other commands ------------------------------------------------------------


async def cmd_start(args: argparse.Namespace) -> int:
    request = research_input(args)
    conn = connection(args)
    handle = await start_research(await connect(conn), conn, request, args.id or new_workflow_id())
    print(handle.id)
    return 0


async def send_update(args: argparse.Namespace, update: str, argument: str) -> int:
    client = await connect(connection(args))
    print(await client.get_workflow_handle(args.workflow_id).execute_update(update, argument, result_type=str))
    return 0


async def cmd_review(args: argparse.Namespace) -> int:
    return await send_update(args, "submit_review", review_feedback(args))


async def cmd_answer(args: argparse.Namespace) -> int:
    if not args.text.strip():
        raise CliError("the answer is empty")
    return await send_update(args, "answer_clarification", args.text.strip())


async def cmd_status(args: argparse.Namespace) -> int:
    conn = connection(args)
    handle = (await connect(conn)).get_workflow_handle(args.workflow_id)
    try:
        status = await query_status(handle)
    except RPCError as err:
        if err.status not in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
            raise
        raise CliError(
            f"no worker answered the status query within {QUERY_TIMEOUT.seconds} s; "
            f"is one running on task queue {conn.task_queue!r}? (`deepresearch worker`)"
        ) from None
    if args.json:
        print(status.model_dump_json(indent=2))
        return 0
    console = make_console()
    console.print(render_status(status, handle.id))
    if hint := next_action(status, handle.id):
        console.print(Text(hint, style="bold yellow"))
    return 0


async def cmd_watch(args: argparse.Namespace) -> int:
    """Follow the run's progress stream (every event since the start, then
    live) until the run ends; events survive worker crashes."""
    client = await connect(connection(args))
    handle = client.get_workflow_handle(args.workflow_id, result_type=ResearchResult)
    await handle.describe()  # an unknown id is one clear error, not a silent wait
    console = make_console()
    stream = WorkflowStreamClient.create(client, handle.id)
    async for item in stream.subscribe(PROGRESS_TOPIC, result_type=ProgressEvent):
        console.print(event_line(item.data), markup=False)
        if item.data.kind == "review_requested":
            console.print(f"review with `deepresearch review {handle.id} --accept` or `--edit TEXT`", markup=False)
        elif item.data.kind == "question":
            console.print(f"answer with `deepresearch answer {handle.id} TEXT`", markup=False)
    result = await handle.result()
    console.print(f"run {handle.id} finished: {result.status}; {usage_text(result.usage)}", markup=False)
    console.print(f"print the report with `deepresearch result {handle.id}`", markup=False)
    return exit_code(result)


async def cmd_result(args: argparse.Namespace) -> int:
    client = await connect(connection(args))
    handle = client.get_workflow_handle(args.workflow_id, result_type=ResearchResult)
    result: ResearchResult = await handle.result()
    fmt = output_format(args)
    text = render(result, fmt)
    if args.output:
        print(f"saved to {write_file(args.output, text)}")
    elif fmt == "md":
        print_report(make_console(), text)
    else:
        print(text, end="" if text.endswith("\n") else "\n")
    return exit_code(result)


async def cmd_list(args: argparse.Namespace) -> int:
    client = await connect(connection(args))
    runs = [run async for run in client.list_workflows(f'WorkflowType="{WORKFLOW_TYPE}"', limit=args.limit)]
    console = make_console()
    if not runs:
        console.print("no runs yet")
        return 0
    table = Table("id", "status", "started", "title")
    for run in sorted(runs, key=lambda r: r.start_time, reverse=True):
        state = run.status.name.lower() if run.status else "?"
        phase = run.typed_search_attributes.get(PHASE_ATTRIBUTE)
        if phase and run.status == WorkflowExecutionStatus.RUNNING:
            state += f" ({phase})"
        started = run.start_time.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(run.id, state, started, Text(run.typed_search_attributes.get(TITLE_ATTRIBUTE) or ""))
    console.print(table)
    return 0


async def cmd_worker(args: argparse.Namespace) -> int:
    from worker import run_worker

    conn = connection(args)
    stop = asyncio.Event()
    print(f"worker for task queue {conn.task_queue!r} on {conn.address}; Ctrl-C to stop", flush=True)
    with stop_on_signals(stop):
        await run_worker(conn, Settings.from_env(), stop=stop)
    print("worker stopped")
    return 0


async def cmd_server(args: argparse.Namespace) -> int:
    if port_open("127.0.0.1", args.port):
        raise CliError(f"port {args.port} is in use: is a Temporal server already running? (see --port)")
    folder = data_dir()
    server = DevServer(
        db_file=args.db or folder / "temporal.db",
        port=args.port,
        ui_port=args.ui_port,
        log_file=folder / "temporal-server.log",
    )
    stop = asyncio.Event()
    with server, stop_on_signals(stop):
        print(f"Temporal dev server at {server.address}, UI at {server.ui_url}", flush=True)
        print(f"state in {server.db_file}, log in {server.log_file}; Ctrl-C to stop", flush=True)
        while not stop.is_set():
            if server.process is None or server.process.poll() is not None:
                raise CliError(f"the Temporal dev server exited; see {server.log_file}")
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    print("server stopped")
    return 0


# --- errors and exit -------------------------------------------------------------


def error_line(err: Exception, args: argparse.Namespace) -> str | None:
    """The one line to show for an error the user can cause; None for a bug."""
    workflow_id = getattr(args, "workflow_id", None)
    if isinstance(err, CliError | ConnectionFailed | ConfigError | DevServerError):
        return str(err)
    if isinstance(err, WorkflowUpdateFailedError):
        return f"{args.command} rejected: {rejection_reason(err)}"
    if isinstance(err, WorkflowFailureError):
        return f"the run failed: {failure_message(err)}"
    if isinstance(err, WorkflowAlreadyStartedError):
        return f"a run with id {err.workflow_id} is already running"
    if isinstance(err, WorkflowQueryFailedError):
        return f"the status query failed: {err.message}"
    if isinstance(err, RPCError):
        if err.status == RPCStatusCode.NOT_FOUND and workflow_id and "namespace" not in err.message.lower():
            if "completed" in err.message:
                return f"run {workflow_id} has already finished (see `deepresearch result {workflow_id}`)"
            return f"no run with id {workflow_id} in namespace {connection(args).namespace}"
        return f"Temporal: {err.message}"
    return None


def dispatch(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(args.handler(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        line = error_line(err, args)
        if line is None:
            traceback.print_exc()
            return 1
        print(f"error: {line}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> None:
    exit_now(dispatch(build_parser().parse_args(argv)))


if __name__ == "__main__":
    main()
