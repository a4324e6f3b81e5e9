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
one a run has just kept again stays. Files in an S3 bucket are left to the
bucket's lifecycle rules (see docs/operations.md).
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from client.options import connection
from infra.temporal import connect


async def main(args: argparse.Namespace) -> int:
    conn = connection(args)
    client = await connect(conn)
    oldest = None
    async for run in client.list_workflows(""):  # every workflow Temporal still keeps
        if oldest is None or run.start_time < oldest:
            oldest = run.start_time
    cutoff = datetime.now(UTC) - timedelta(days=args.older_than)
    if oldest is not None and oldest < cutoff:
        cutoff = oldest
    deleted = kept = freed = 0
    for folder in (conn.data_dir / "blobs", conn.data_dir / "payloads"):
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if not path.is_file():
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
