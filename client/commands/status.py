"""`deepresearch status`: a run's phase, plan, steps and pending question;
for a run whose workflow task keeps failing, the failure and what to do.
A podcast, slides or prose workflow answers with its own, smaller status.

The quick way (client/quick.py) answers a research run's status from the
query's JSON, without the SDK's full client or the models; the full client
takes over for side outputs, for anything unusual, and to explain a query
no worker answered."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from rich.text import Text
from temporalio.service import RPCError, RPCStatusCode

from client import quick
from client.display import make_console, render_status
from client.errors import CliError
from client.ids import may_be_side_output
from client.options import connection
from client.talk import QUERY_TIMEOUT, next_action, query_status, stuck, worker_command
from client.terminal_text import one_line
from client.wording import waiting_text
from infra.errors import cli_name

if TYPE_CHECKING:
    from temporalio.client import WorkflowHandle

    from infra.connection import Connection
    from workflows.models import ResearchResult, RunStatus
    from workflows.side_models import SideStatus


async def main(args: argparse.Namespace) -> int:
    from client.stored_runs import stored_runs

    with stored_runs(connection(args)) as reading:  # no server: the runs stored in the data dir
        conn = reading.conn
        failed: RPCError | None = None
        if not may_be_side_output(args.workflow_id) and not reading.embedded:  # no worker there to answer
            try:
                return show_quick(await quick.query(conn, args.workflow_id, "status", QUERY_TIMEOUT), args)
            except quick.NotQuick:
                pass
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    raise
                failed = err  # no worker answered, or the run is stuck: said below
        return await full(args, conn, failed, reading.embedded)


def show_quick(status: dict[str, Any], args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(status, ensure_ascii=False, indent=2))
        return 0
    try:
        return show(quick.Fields(status), args.workflow_id)
    except AttributeError as err:  # a worker older than this CLI: the model has defaults
        raise quick.NotQuick(f"no field {err}") from None


def show(status: RunStatus | quick.Fields, workflow_id: str) -> int:
    workflow_id = one_line(workflow_id)  # one from another client may hold a newline: never printed raw
    shown, hint = render_status(status, workflow_id), next_action(status, workflow_id)  # all read before printing
    console = make_console()
    console.print(shown)
    if hint:
        console.print(Text(hint, style="bold yellow"))
    return 0


async def full(args: argparse.Namespace, conn: Connection, failed: RPCError | None, embedded: bool = False) -> int:
    """With the SDK's client and the models; ``failed``: the quick query's
    error; ``embedded``: the server was started to read the stored runs, so
    no worker answers a query (an ended run's status comes from its result)."""
    from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError

    from client.commands.result import SIDE_KINDS
    from client.stored_runs import no_worker_here
    from infra.temporal import connect
    from workflows.eval_models import EvalSuiteResult
    from workflows.side_models import SideStatus

    client = await connect(conn)
    handle = client.get_workflow_handle(args.workflow_id)
    described = await handle.describe()  # the quick way did not answer: what is it?
    if described.workflow_type == "FollowUp" and not embedded:
        return await show_thread(handle, args.json)
    if described.workflow_type == "EvalSuite":
        return await show_suite(
            client.get_workflow_handle(handle.id, result_type=EvalSuiteResult), described, args.json
        )
    kind = SIDE_KINDS.get(described.workflow_type)
    # An ended research run's status needs no worker: what the run left says it.
    research_ended = described.status != WorkflowExecutionStatus.RUNNING and described.workflow_type == "DeepResearch"
    if embedded:
        if not research_ended:
            raise CliError(no_worker_here(handle.id, described.task_queue))
        return show_research(await ended_status(client, handle.id), handle.id, args.json)
    try:
        if failed is not None:
            raise failed
        status = await (query_side_status(handle) if kind else query_status(handle))
    except (RPCError, WorkflowQueryFailedError) as err:
        if isinstance(err, RPCError) and err.status == RPCStatusCode.NOT_FOUND:
            raise
        if research_ended:
            return show_research(await ended_status(client, handle.id), handle.id, args.json)
        if problem := await stuck(client, handle):
            if args.json:
                shown = {"phase": problem.phase, "stuck": True, "workflow_task_attempts": problem.attempts}
                print(json.dumps(shown | {"error": problem.error}, indent=2))
                return 1
            raise CliError(problem.line(handle.id)) from None
        if isinstance(err, WorkflowQueryFailedError):
            raise
        return unanswered(handle.id, described, conn.task_queue)
    if isinstance(status, SideStatus):
        return await show_side_status(handle, status, args.json)
    return show_research(status, handle.id, args.json)


def show_research(status: RunStatus, workflow_id: str, as_json: bool) -> int:
    if as_json:
        print(status.model_dump_json(indent=2))
        return 0
    return show(status, workflow_id)


def unanswered(workflow_id: str, described, default_queue: str) -> int:
    """No worker answered the status query: the run's own task queue named
    (an eval's runs poll the eval's), and for a run that has ended, how it
    ended and where its report is."""
    from temporalio.client import WorkflowExecutionStatus

    workflow_id = one_line(workflow_id)
    queue = described.task_queue or default_queue
    in_eval = bool(described.parent_id) and queue == described.parent_id  # the queue of the suite's `eval`
    serves = "the `eval` command that ran it" if in_eval else f"a worker on task queue {queue!r}"
    if described.status not in (None, WorkflowExecutionStatus.RUNNING):
        state = described.status.name.lower()
        print(
            f"run {workflow_id} has ended ({state}); its status needs {serves}, and none answers now: "
            f"`{cli_name()} result {workflow_id}` shows its report"
        )
        return 0
    start = "run the same `eval` command again" if in_eval else worker_command(queue)
    raise CliError(f"no worker answered the status query within {QUERY_TIMEOUT.seconds} s; it needs {serves} ({start})")


async def show_thread(handle: WorkflowHandle, as_json: bool) -> int:
    """A follow-up thread: its questions and answers so far."""
    from workflows.follow_up_models import ThreadStatus

    status = await handle.query("status", result_type=ThreadStatus, rpc_timeout=QUERY_TIMEOUT)
    if as_json:
        print(json.dumps({"workflow_id": handle.id} | status.model_dump(mode="json"), ensure_ascii=False, indent=2))
        return 0
    lines = [f"follow-up thread {handle.id} on run {status.run_id}: {status.phase}, {status.questions} question(s)"]
    for turn in status.turns:
        more = f" (researched more in {turn.research_run})" if turn.researched else ""
        lines += [f"Q: {turn.question}", f"A: {' '.join(turn.answer.split())[:500]}{more}"]
    lines += [f"waiting: {q}" for q in status.waiting]
    if waiting := waiting_text(status.rate_limited_since):
        lines.append(waiting)
    if status.research_run:
        lines.append(f"researching now in run {status.research_run}")
    lines.append(f"ask more with `{cli_name()} ask {status.run_id} QUESTION`")
    print("\n".join(lines))
    return 0


async def show_suite(handle: WorkflowHandle, described, as_json: bool) -> int:
    """An evaluation suite: how many of its task runs finished. Its worker
    lives in the `eval` process, so only a running `eval` answers."""
    from temporalio.client import WorkflowExecutionStatus

    from workflows.eval_models import EvalProgress

    again = "run the same `eval` command again"
    if described.status == WorkflowExecutionStatus.COMPLETED:
        return await show_finished_suite(handle, as_json)
    if described.status != WorkflowExecutionStatus.RUNNING:
        state = described.status.name.lower() if described.status else "closed"
        print(f"evaluation suite {handle.id} has ended ({state}): the same `eval` command runs it anew")
        return 0
    try:
        progress = await handle.query("progress", result_type=EvalProgress, rpc_timeout=QUERY_TIMEOUT)
    except RPCError:
        raise CliError(f"evaluation suite {handle.id} waits: no `eval` serves it now; {again} to go on") from None
    if as_json:
        print(json.dumps({"workflow_id": handle.id} | progress.model_dump(mode="json"), indent=2))
        return 0
    lines = [f"evaluation suite {handle.id}: {progress.done} of {progress.total} task run(s) finished"]
    lines += [f"running: {run}" for run in progress.running]
    print("\n".join(lines))
    return 0


async def show_finished_suite(handle: WorkflowHandle, as_json: bool) -> int:
    """A finished evaluation suite: its table and totals, read from its
    history (no worker needed)."""
    from client.evaluation import results
    from workflows.eval_models import EvalSuiteResult

    done: EvalSuiteResult = await handle.result()
    data = results.suite_json(done.suite, {}, [r.model_dump(mode="json") for r in done.records])
    if as_json:
        data.pop("models")
        print(json.dumps({"workflow_id": handle.id, "status": "completed"} | data, ensure_ascii=False, indent=2))
        return 0
    console = make_console()
    console.print(f"evaluation suite {handle.id} has finished: {len(done.records)} task run(s)", markup=False)
    results.show(console, data)
    console.print(f"each task's report: `{cli_name()} result RUN_ID` ({handle.id}-<task>-r1)", markup=False)
    return 0


async def query_side_status(handle: WorkflowHandle) -> SideStatus:
    from workflows.side_models import SideStatus

    return await handle.query("status", result_type=SideStatus, rpc_timeout=QUERY_TIMEOUT)


async def show_side_status(handle: WorkflowHandle, status: SideStatus, as_json: bool) -> int:
    """The side output's phase (and, for a podcast, how many lines are
    spoken) beside the workflow's own state, which tells a podcast that
    stopped mid-speech (terminated) from one still speaking."""
    from client.side_outputs import status_lines

    described = await handle.describe()
    state = described.status.name.lower() if described.status else "unknown"
    if as_json:
        shown = {"workflow_id": handle.id, "state": state} | status.model_dump(mode="json")
        print(json.dumps(shown, ensure_ascii=False, indent=2))
        return 0
    print("\n".join(status_lines(status, handle.id, state)))
    return 0


async def ended_status(client, workflow_id: str) -> RunStatus:
    """An ended research run's status from its result (or its failure),
    which needs no worker: a query on an ended run does (it replays it)."""
    from temporalio.client import WorkflowFailureError

    from client.errors import failure_message
    from workflows.models import ResearchResult, RunStatus, StepStatus

    handle = client.get_workflow_handle(workflow_id, result_type=ResearchResult)
    try:
        result = await handle.result()
    except WorkflowFailureError as err:
        described = await handle.describe()
        memo = await described.memo_value("question", "") if "question" in described.raw_info.memo.fields else ""
        return RunStatus(phase="failed", question=str(memo), error=failure_message(err), note=FROM_RESULT)
    done = "done" if result.status == "completed" else "pending"
    steps = [
        StepStatus(title=step.title, step_type=step.step_type, status="done" if n < len(result.observations) else done)
        for n, step in enumerate(result.plan.steps if result.plan else [])
    ]
    return RunStatus(
        phase="cancelled" if result.status == "cancelled" else "completed",
        outcome=result.status,
        question=result.question,
        title=result.plan.title if result.plan else None,
        plan=result.plan,
        plan_iterations=result.plan_iterations,
        steps=steps,
        clarifications=result.clarifications,
        usage=result.usage,
        budget_exhausted=result.budget_exhausted,
        warnings=result.warnings,
        sources=sources_of(result),
        steers=result.steers,
        note=FROM_RESULT,
    )


def sources_of(result: ResearchResult) -> int:
    """The sources an ended run retrieved, as its status query counted them
    (a result before that was kept: the pages it read and the sources it
    cites, which it retrieved too). It showed 0: the count was not read."""
    if result.sources is not None:
        return result.sources
    return len({page.url for page in result.pages or []} | {citation.url for citation in result.citations})


FROM_RESULT = "the run has ended and no worker answered its status query: shown from its result"
