"""`deepresearch gc`: delete stored blobs (crawled pages, conversations,
audio, decks) and large-payload files that no run Temporal still knows can
need, and that are older than `--older-than` days.

The stores are content-addressed, so a run often keeps a file that is
already there (a page crawled again, an input two runs share); the stores
then refresh the file's modified time, as they do on every read
(infra/blobs.py ``refresh``). So every file a run uses was modified after
the run started, and nothing is deleted that is newer than the oldest run
Temporal still keeps (running, or closed and within the namespace's
retention). Each file's time is read again right before it is deleted, so
one a run has just kept again stays. Besides, whatever the file times say,
no file is deleted that the history of a run Temporal keeps names (a blob
reference or an external payload's digest, also inside the payload files
those name): so runs started by a worker from before the time refresh are
safe too. Files in an S3 bucket are left to the
bucket's lifecycle rules (see docs/operations.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from client.options import connection
from infra.temporal import connect


async def main(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = await connect(conn)
    runs = [run async for run in client.list_workflows("")]  # every workflow Temporal still keeps
    oldest = min((run.start_time for run in runs), default=None)
    used = await in_use(client, runs, conn.data_dir / "payloads")
    cutoff = datetime.now(UTC) - timedelta(days=args.older_than)
    if oldest is not None and oldest < cutoff:
        cutoff = oldest
    deleted = kept = freed = 0
    for folder in (conn.data_dir / "blobs", conn.data_dir / "payloads"):
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if not path.is_file():
                continue
            if path.name in used:  # a kept run's history names it
                kept += 1
                continue
            info = path.stat()
            if older(path, cutoff) and (args.dry_run or delete_if_older(path, cutoff)):
                deleted += 1
                freed += info.st_size
            else:
                kept += 1
    verb = "would delete" if args.dry_run else "deleted"
    print(
        f"{verb} {deleted:,} stored file(s), {freed / 1e6:.1f} MB, older than "
        f"{cutoff.astimezone().strftime('%Y-%m-%d %H:%M')}; kept {kept:,} "
        f"(the oldest run Temporal keeps started {oldest.astimezone():%Y-%m-%d %H:%M})"
        if oldest
        else f"{verb} {deleted:,} stored file(s), {freed / 1e6:.1f} MB; kept {kept:,}"
    )
    return 0


_DIGEST = re.compile(rb"[0-9a-f]{64}")  # a blob reference's or a payload claim's SHA-256


async def in_use(client, runs: list, payloads: Path) -> set[str]:
    """The digests the kept runs' histories name, and those named inside
    the payload files they name (a large activity result holding blob
    references). A hex string that is no file's name only keeps nothing."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest

    found: set[str] = set()
    at_once = asyncio.Semaphore(8)

    async def scan(run) -> None:
        token = b""
        async with at_once:
            while True:
                page = await client.workflow_service.get_workflow_execution_history(
                    GetWorkflowExecutionHistoryRequest(
                        namespace=client.namespace,
                        execution=WorkflowExecution(workflow_id=run.id, run_id=run.run_id),
                        next_page_token=token,
                    ),
                    retry=True,
                )
                for event in page.history.events:
                    found.update(d.decode() for d in _DIGEST.findall(event.SerializeToString()))
                token = page.next_page_token
                if not token:
                    return

    await asyncio.gather(*(scan(run) for run in runs))
    for digest in list(found):
        path = payloads / digest[:2] / digest
        if path.is_file():
            found.update(d.decode() for d in _DIGEST.findall(path.read_bytes()))
    return found


def older(path: Path, cutoff: datetime) -> bool:
    """Whether the file was last kept or read before ``cutoff`` (False once it is gone)."""
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC) < cutoff
    except FileNotFoundError:
        return False


def delete_if_older(path: Path, cutoff: datetime) -> bool:
    """Delete the file unless a run has kept or read it since it was looked at."""
    if not older(path, cutoff):
        return False
    path.unlink(missing_ok=True)
    return True


def touch(path: Path, days_ago: float) -> None:
    """For tests: make ``path`` look ``days_ago`` days old."""
    when = time.time() - days_ago * 86400
    os.utime(path, (when, when))
