"""`gc` never deletes what a run Temporal keeps still uses, whatever the
file's time; and a blob that is gone anyway ends the run at once with a
clear error and a partial report (issue 20, item 1). Real worker, dev
server, CLI and scripted servers."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.converter import StorageDriverClaim

from client.commands.gc import touch
from client.errors import failure_message
from client.talk import Stuck
from infra.payload_storage import FileStorageDriver
from testkit.faults import blobs_deleted_at_first_crawl
from testkit.runs import start
from workflows.failures import partial_report

CLI = Path(sys.executable).parent / "deepresearch"
QUESTION = "Tell me about Lantern Rock"
REF = re.compile(rb"sha256:[0-9a-f]{64}")


async def cli(env: dict, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(CLI), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


async def blobs_used(handle) -> set[str]:
    """Every blob reference in the run's history (activity inputs and results)."""
    history = await handle.fetch_history()
    return {ref.decode() for event in history.events for ref in REF.findall(event.SerializeToString())}


def blob_file(data: Path, ref: str) -> Path:
    digest = ref.removeprefix("sha256:")
    return data / "blobs" / digest[:2] / digest


async def test_gc_keeps_what_a_new_run_kept_again_however_old_the_file(
    worker_env, temporal_client, task_queue, worker, script
):
    """A page crawled long ago and again by a new run, and a payload two
    runs' inputs share: the stores skip writing what is there, and `gc`
    deletes by file time; the new run's use must count."""
    data = Path(worker_env["DEEPRESEARCH_DATA_DIR"])
    first = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    assert (await first.result()).status == "completed"
    earlier = await blobs_used(first)
    for path in (data / "blobs").rglob("*"):
        if path.is_file():
            touch(path, days_ago=400)  # as if crawled last year, by a run Temporal no longer keeps
    driver = FileStorageDriver(data / "payloads")
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"' + b"a long input " * 20_000 + b'"')
    (claim,) = await driver.store(None, [payload])
    stored = data / "payloads" / claim.claim_data["sha256"][:2] / claim.claim_data["sha256"]
    touch(stored, days_ago=400)

    second = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    assert (await second.result()).status == "completed"
    await driver.store(None, [payload])  # a second run's input, the same payload
    used = await blobs_used(second)
    assert used & earlier  # the case at hand: the new run kept files that were there already

    code, out, err = await cli(worker_env, "gc", "--older-than", "0")
    assert code == 0, err
    gone = sorted(ref for ref in used if not blob_file(data, ref).exists())
    assert not gone, f"gc deleted blobs a kept run uses: {gone}"
    assert stored.exists()


async def test_a_blob_gone_mid_run_fails_it_at_once_with_a_partial_report(
    worker_env, temporal_client, task_queue, worker, script
):
    """The researcher's third turn deletes every blob (as a careless hand
    would): its next model call finds a crawled page gone."""
    data = Path(worker_env["DEEPRESEARCH_DATA_DIR"])
    blobs_deleted_at_first_crawl(script, data)
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), 120)
    message = failure_message(failed.value)
    assert re.search(r"blob sha256:[0-9a-f]{64} is missing from ", message), message
    report = partial_report(failed.value)
    # The reporter wrote it, told why the run stopped (the scripted reporter echoes what it is told;
    # a long data-dir path can push "partial" past where the run looks, and it says so itself on top).
    assert report and "# Scripted Report" in report and "the run failed: blob sha256:" in report

    # The model call that found it gone was not retried.
    events = (await handle.fetch_history()).events
    failures = [e for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert len(failures) == 1 and "is missing" in failures[0].activity_task_failed_event_attributes.failure.message
    started = {e.event_id: e for e in events}[failures[0].activity_task_failed_event_attributes.started_event_id]
    assert started.activity_task_started_event_attributes.attempt == 1

    # `result` shows the partial report, then the reason in one line.
    code, out, err = await cli(worker_env | {"COLUMNS": "200"}, "result", handle.id)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "the run failed: " in err and "is missing" in err
    assert "Scripted Report" in out and "the run failed: blob sha256:" in out
    # Following it says where the partial report is.
    code, out, err = await cli(worker_env, "attach", handle.id)
    assert code == 1 and "is missing" in err and f"result {handle.id}`" in err, err


async def test_a_run_stuck_on_a_missing_payload_is_not_told_to_wait_for_a_fixed_worker(tmp_path):
    driver = FileStorageDriver(tmp_path)
    with pytest.raises(RuntimeError) as gone:
        await driver.retrieve(None, [StorageDriverClaim(claim_data={"sha256": "0" * 64})])
    line = Stuck(attempts=3, error=str(gone.value), phase="awaiting_review").line("run-1")
    assert "deploy a fixed worker" not in line and "cancel" not in line
    assert "temporal workflow terminate --workflow-id run-1" in line
    # Any other failure still gets the usual advice.
    assert "deploy a fixed worker" in Stuck(attempts=3, error="a bug", phase=None).line("run-1")


async def test_gc_keeps_what_a_kept_runs_history_names_whatever_the_file_time(
    worker_env, temporal_client, task_queue, worker, script
):
    """Files a run kept before the stores refreshed times (an older worker)
    look old: the history of a run Temporal keeps still names them."""
    data = Path(worker_env["DEEPRESEARCH_DATA_DIR"])
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    assert (await handle.result()).status == "completed"
    used = await blobs_used(handle)
    assert used
    for path in (data / "blobs").rglob("*"):
        if path.is_file():
            touch(path, days_ago=400)
    unused = data / "blobs" / "00" / ("0" * 64)
    unused.parent.mkdir(parents=True, exist_ok=True)
    unused.write_text("a page no kept run names")
    touch(unused, days_ago=400)

    code, out, err = await cli(worker_env, "gc", "--older-than", "0")
    assert code == 0, err
    assert not unused.exists()  # what no kept run names still goes
    gone = sorted(ref for ref in used if not blob_file(data, ref).exists())
    assert not gone, f"gc deleted blobs a kept run names: {gone}"
