"""Podcast, slides and prose from the client's side: the finished run they
start from, starting their workflows once per run, and writing their files.
Shared by the CLI commands and the research desk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.common import TypedSearchAttributes, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from client.errors import CliError
from client.ids import file_stem
from client.wording import waiting_text
from infra.blobs import BlobNotFound, blob_store
from infra.connection import Connection
from infra.errors import cli_name
from infra.finished_runs import NoReport, finished_research
from infra.search_attributes import owner_pairs, search_attributes_ready
from workflows.side_models import PodcastResult, ProseResult, SideStatus, SlidesResult, SourceReport

SIDE_TYPES = {"podcast": "Podcast", "slides": "Slides", "prose": "Prose"}
RESULT_TYPES: dict[str, Any] = {"Podcast": PodcastResult, "Slides": SlidesResult, "Prose": ProseResult}


def status_lines(status: SideStatus, workflow_id: str, state: str) -> list[str]:
    """What `status` prints for a podcast, slides or prose workflow: its
    phase, how far the speaking is, the failure, and what to do next. (Its
    status query answers a ``SideStatus``, not a research run's status.)
    ``state`` is the workflow's own (running, completed, terminated, …): a
    terminated podcast still reports the phase it stopped in."""
    of_run = f" of run {status.run_id}" if status.run_id else ""
    lines = [f"{status.kind} {workflow_id}{of_run} ({state})", f"phase: {status.phase}"]
    if status.kind == "podcast" and status.total:
        lines.append(f"line {status.done} of {status.total} spoken")
    if status.error:
        lines.append(f"error: {status.error}")
    if waiting := waiting_text(status.rate_limited_since):
        lines.append(waiting)
    if state == "running":
        lines.append(f"follow it with `{cli_name()} watch {workflow_id}`")
    elif state == "completed":
        lines.append(f"fetch it with `{cli_name()} result {workflow_id}`")
    elif status.kind != "prose" and status.run_id:
        lines.append(f"start it again with `{cli_name()} {status.kind} {status.run_id}`")
    return lines


async def finished_report(client: Client, run_id: str, namespace: str) -> SourceReport:
    """The report of a completed research run; CliError (one line) when the
    run does not exist, has not completed, or ended without a report."""
    try:
        result = await finished_research(client, run_id, namespace)
    except NoReport as err:
        raise CliError(str(err)) from None
    return SourceReport(
        run_id=run_id,
        title=result.plan.title if result.plan else result.question,
        report=result.final_report,
        locale=result.locale,
        citations=result.citations,
        owner=result.owner,
        shared_with=result.shared_with,
    )


SOURCE_RUN = "source_run"  # memo key: the Temporal run id of the research run a side output was made from


async def start_once(client: Client, conn: Connection, kind: str, argument: Any, workflow_id: str):
    """The side output's workflow for this run: started if there is none,
    the existing one (running or completed) otherwise; a failed one is
    started again. A podcast or deck made from an earlier run that had the
    same workflow id is not this run's: a new one replaces it."""
    workflow_type = SIDE_TYPES[kind]
    reuse, conflict, memo = (
        WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
        WorkflowIDConflictPolicy.USE_EXISTING,
        None,
    )
    attributes = TypedSearchAttributes.empty
    if isinstance(argument, SourceReport):
        # The side output is the run owner's, shared as the run is.
        ready = await search_attributes_ready(client.service_client, conn.namespace)
        attributes = TypedSearchAttributes(owner_pairs(ready, argument.owner, argument.shared_with))
        source = await client.get_workflow_handle(argument.run_id).describe()
        memo = {SOURCE_RUN: source.run_id}
        if await made_from_another_run(client, workflow_id, source):
            reuse, conflict = WorkflowIDReusePolicy.ALLOW_DUPLICATE, WorkflowIDConflictPolicy.TERMINATE_EXISTING
    try:
        return await client.start_workflow(
            workflow_type,
            argument,
            id=workflow_id,
            task_queue=conn.task_queue,
            result_type=RESULT_TYPES[workflow_type],
            id_conflict_policy=conflict,
            id_reuse_policy=reuse,
            memo=memo,
            search_attributes=attributes,
            static_summary=f"{kind} of {argument.run_id}" if hasattr(argument, "run_id") else None,
        )
    except WorkflowAlreadyStartedError:  # completed before: fetch it again
        return client.get_workflow_handle(workflow_id, result_type=RESULT_TYPES[workflow_type])


async def made_from_another_run(client: Client, workflow_id: str, source: Any) -> bool:
    """Whether the side output ``workflow_id`` exists and was made from
    another run than ``source`` (the research run's description): by the
    run id in its memo, or, for one made before that memo, by its start
    before the run's end (a side output starts only after its run ended)."""
    try:
        side = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    made_from = side.raw_info.memo.fields.get(SOURCE_RUN)
    if made_from is not None:
        try:
            return client.data_converter.payload_converter.from_payloads([made_from])[0] != source.run_id
        except Exception:  # not readable: tell by the times below
            pass
    return source.close_time is not None and side.start_time < source.close_time


async def write_blob(conn: Connection, ref: str, path: Path) -> Path:
    """A file the worker left in the blob store (audio, a deck), written to
    ``path``; CliError (one line, naming the blob) when it is gone."""
    try:
        data = await blob_store(conn.data_dir).get_bytes(ref)
    except BlobNotFound as err:
        raise CliError(f"{path.name} cannot be written: {err}") from None
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def default_path(conn: Connection, run_id: str, extension: str) -> Path:
    """``<data dir>/reports/<run id as a safe file name><extension>``."""
    return conn.data_dir / "reports" / f"{file_stem(run_id)}{extension}"
