"""`deepresearch eval`: run an evaluation suite against its offline corpus with
the configured models, show a progress bar, then a table per task and the
totals; ``--json`` writes them, ``--compare`` sets two results side by side.

The corpus is served on loopback for the duration (client/evaluation/web.py);
a worker in this process, on the suite's own task queue, runs the research
with the user's model settings and search and crawling pointed at it. The
suite is the durable ``EvalSuite`` workflow (workflows/eval_suite.py) with a
deterministic id: killed and run again, the command attaches to it and the
tasks that finished are not run again."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from contextlib import AsyncExitStack
from datetime import timedelta

from client import terminal_log
from client.commands.run import (
    dev_ports,
    embedded_server,
    in_process_worker,
    no_model_line,
    server_to_use,
    split_address,
)
from client.display import make_console
from client.errors import CliError
from client.evaluation import results
from client.evaluation.suite import (
    eval_settings,
    load_suite,
    models_used,
    preferred_port,
    run_options,
    suite_id,
)
from client.evaluation.web import CorpusWeb
from client.options import connection
from infra.errors import ConfigError, cli_name
from infra.local_models import local_settings
from infra.process import cancel_on_sigterm
from infra.settings import Settings, private_dir
from infra.temporal import connect
from workflows.eval_models import EvalProgress, EvalSuiteInput, EvalSuiteResult

POLL_SECONDS = 0.5
NOTICE_SECONDS = 30.0  # how often the eval says it still serves a cancelled suite's runs


async def main(args: argparse.Namespace) -> int:
    console = make_console()
    if args.compare:
        results.compare(console, *args.compare)
        return 0
    if args.runs < 1 or args.runs > 20:
        raise CliError("--runs must be between 1 and 20")
    if args.concurrency < 1 or args.concurrency > 32:
        raise CliError("--concurrency must be between 1 and 32")
    suite = load_suite(args)  # a bad task file: one line before anything starts
    if not getattr(args, "demo", False):
        return await evaluate(args, console, suite)
    if args.judge_model:
        raise CliError("--judge-model needs a language model; the demo's scripted model cannot judge a report")
    from client.demo.backend import SCRIPTED, demo_backend, ignored_pace

    ignored = ignored_pace()  # not a rate: refused before anything starts
    console.print(f"DEMO: {SCRIPTED} These scores are the scripted rules', not a model's.", style="bold yellow")
    if ignored:
        console.print(ignored, markup=False)
    with demo_backend(web=False):  # the suite's own corpus is the web
        return await evaluate(args, console, suite, demo=True)


async def evaluate(args, console, suite, demo: bool = False) -> int:
    """``demo``: the environment names the demo's model (client/demo/backend.py)."""
    if demo:
        base, local_line = Settings.from_env(), None
    else:
        base, local_line = await local_settings()  # a local model server when there is no key, as `run` does
    try:  # no model configured: one line now (search is the offline web's, whatever is set for it)
        eval_settings(base, "http://127.0.0.1", args.judge_model).check()
    except ConfigError as err:
        keyless = not base.openai_api_key and not base.openai_base_url
        raise ConfigError(no_model_line() if keyless else str(err)) from None
    if local_line:
        console.print(local_line, markup=False)
    request = EvalSuiteInput(
        suite=suite.name,
        tasks=suite.tasks,
        corpus=[document.path for document in suite.documents],
        options=run_options(args),
        runs=args.runs,
        concurrency=args.concurrency,
        judge=bool(args.judge_model),
    )
    models = models_used(eval_settings(base, "http://127.0.0.1", args.judge_model), request.judge)
    workflow_id = args.id or suite_id(suite, request, models, "demo" if demo else base.openai_base_url)
    request.id_prefix = workflow_id
    records = await run_suite(args, console, suite, request, base, workflow_id)
    data = results.suite_json(suite.name, models, [r.model_dump(mode="json") for r in records])
    results.show(console, data)
    console.print(
        f"each task's report: `{cli_name()} result RUN_ID` (run ids in --json, or {workflow_id}-<task>-r1)",
        markup=False,
    )
    if args.json:
        results.write_json(args.json, data)
        console.print(f"results written to {args.json}", markup=False)
    failed = [r for r in records if r.error]
    if failed:
        first = failed[0]
        raise CliError(f"{len(failed)} of {len(records)} task runs could not run; {first.id}: {first.error}")
    return 0


async def run_suite(args, console, suite, request: EvalSuiteInput, base: Settings, workflow_id: str) -> list:
    conn = connection(args)
    if args.task_queue is None:
        conn = dataclasses.replace(conn, task_queue=workflow_id)  # the suite's own queue
    dev_port, ui_port = dev_ports()
    conn, start_server = server_to_use(conn, dev_port)
    port = split_address(conn.address)[1]
    private_dir(conn.data_dir)
    log_file = terminal_log.setup(conn.data_dir)  # one line per failed call; tracebacks to the log file
    console.print(f"details in {log_file}", markup=False)
    web = CorpusWeb(
        suite.corpus_folder, port=preferred_port(workflow_id), documents=suite.documents, any_port_if_taken=True
    )
    async with AsyncExitStack() as stack:
        stack.enter_context(cancel_on_sigterm())
        stack.enter_context(web)
        if start_server:
            server = stack.enter_context(embedded_server(conn, port, ui_port))
            conn = dataclasses.replace(conn, address=server.address)
            console.print(f"started the embedded Temporal dev server at {server.address}", markup=False)
        client = await connect(conn)
        settings = eval_settings(base, web.base_url, args.judge_model)
        worker = await stack.enter_async_context(in_process_worker(conn, settings))
        console.print(
            f"suite {workflow_id}: {len(request.tasks)} task(s) x {request.runs} run(s) on the corpus "
            f"{suite.corpus_folder} ({len(suite.documents)} documents, served at {web.base_url})",
            markup=False,
        )
        handle = await start_or_attach(client, conn, request, workflow_id, console)
        try:
            result = await follow(handle, worker, console)
        except SuiteCancelled as cancelled:
            await finish_cancelled(client, handle, cancelled.progress, console)
            raise CliError(f"evaluation suite {workflow_id} was cancelled: {cancelled.summary()}") from None
        except asyncio.CancelledError:
            console.print(
                f"\nThe suite {workflow_id} waits durably; run the same command again to finish it.", markup=False
            )
            raise
    return result.records


async def start_or_attach(client, conn, request: EvalSuiteInput, workflow_id: str, console):
    from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
    from temporalio.exceptions import WorkflowAlreadyStartedError

    try:
        handle = await client.start_workflow(
            "EvalSuite",
            request,
            id=workflow_id,
            task_queue=conn.task_queue,
            result_type=EvalSuiteResult,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
            static_summary=f"evaluation suite {request.suite}: {len(request.tasks)} task(s)",
        )
    except WorkflowAlreadyStartedError:
        console.print(
            f"suite {workflow_id} has already finished: showing its results (give --id NEW to run it again)",
            markup=False,
        )
        return client.get_workflow_handle(workflow_id, result_type=EvalSuiteResult)
    return handle


class SuiteCancelled(Exception):
    """The suite was cancelled (`deepresearch cancel`), with its last progress."""

    def __init__(self, progress: EvalProgress | None) -> None:
        super().__init__("cancelled")
        self.progress = progress

    def summary(self) -> str:
        done, total = (self.progress.done, self.progress.total) if self.progress else (0, "?")
        return f"{done} of {total} task run(s) had finished; the same `eval` command runs it anew"


async def finish_cancelled(client, handle, progress: EvalProgress | None, console) -> None:
    """A cancelled suite ends at once and asks its running research runs to
    cancel: they need this process's worker to write their partial reports,
    so it serves them until every one has ended, however slow the model,
    saying so every ``NOTICE_SECONDS``. Stopped while it waits (Ctrl-C,
    SIGTERM), it terminates those still open: none is left without a worker."""
    running = await running_at_cancel(handle, progress)
    if not running:
        return
    console.print(
        f"\nthe suite was cancelled; serving its running task run(s) while they write their partial reports: "
        f"{', '.join(running)}",
        markup=False,
    )

    async def ended(run_id: str) -> None:
        try:
            await client.get_workflow_handle(run_id).result()
        except Exception:  # noqa: BLE001 - cancelled, failed: ended either way
            pass

    waits = {run_id: asyncio.ensure_future(ended(run_id)) for run_id in running}
    try:
        while not all(wait.done() for wait in waits.values()):
            await asyncio.wait(waits.values(), timeout=NOTICE_SECONDS)
            left = [run_id for run_id, wait in waits.items() if not wait.done()]
            if left:
                console.print(
                    f"still serving {len(left)} cancelled task run(s) while they write their partial reports "
                    f"(a slow model takes a while): {', '.join(left)}",
                    markup=False,
                )
    except asyncio.CancelledError:
        left = [run_id for run_id, wait in waits.items() if not wait.done()]
        for wait in waits.values():
            wait.cancel()
        await terminate(client, left, console)
        raise


async def running_at_cancel(handle, progress: EvalProgress | None) -> list[str]:
    """The suite's task runs still going when it was cancelled: its progress
    as its history ends (the last progress seen may be half a second old)."""
    try:
        progress = await handle.query("progress", result_type=EvalProgress, rpc_timeout=timedelta(seconds=10))
    except Exception:  # noqa: BLE001 - not answered: the last progress seen
        pass
    return list(progress.running) if progress else []


async def terminate(client, run_ids: list[str], console) -> None:
    """End the runs this eval can no longer serve: no worker would."""
    for run_id in run_ids:
        try:
            await client.get_workflow_handle(run_id).terminate(
                reason="the eval serving it was stopped before its partial report was written"
            )
        except Exception:  # noqa: BLE001 - it ended meanwhile
            continue
        console.print(f"terminated {run_id}: the eval was stopped before its partial report was written", markup=False)


async def follow(handle, worker: asyncio.Task, console) -> EvalSuiteResult:
    """A progress bar until the suite ends; the worker's failure ends it too."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import CancelledError as TemporalCancelledError

    outcome = asyncio.ensure_future(handle.result())
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        line = bar.add_task("tasks", total=None)
        progress = None
        try:
            while not outcome.done():
                if worker.done():
                    worker.result()  # raises the worker's error (bad configuration, ...)
                    raise CliError("the eval's worker stopped")
                try:
                    progress = await handle.query("progress", result_type=EvalProgress)
                    running = ", ".join(r.removeprefix(handle.id + "-") for r in progress.running[:4])
                    if not console.is_terminal and progress.done != bar.tasks[0].completed:
                        # no bar drawn (a log file, CI): one line per finished task
                        console.print(
                            f"tasks {progress.done}/{progress.total} done; running: {running or '-'}", markup=False
                        )
                    bar.update(line, total=progress.total, completed=progress.done, description=f"tasks {running}")
                except Exception:  # noqa: BLE001 - not queryable yet (first task pending): try again
                    pass
                await asyncio.wait({outcome}, timeout=POLL_SECONDS)
        finally:
            if not outcome.done():
                outcome.cancel()
        try:
            result = outcome.result()
        except WorkflowFailureError as err:
            if isinstance(err.cause, TemporalCancelledError):
                raise SuiteCancelled(progress) from None
            raise
        bar.update(line, total=len(result.records), completed=len(result.records), description="tasks done")
    return result
