"""Sharing a run's index between workers on several machines, through the
payload bucket (DEEPRESEARCH_PAYLOAD_S3_BUCKET)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from activities.local_docs.index import LocalIndex
from infra.blobs import ObjectClient, get_if_present, write_atomically


class SharedIndexes:
    """Copies of run indexes in an S3 bucket, ``<prefix><file name>``, so that
    any worker can search the documents another worker indexed."""

    def __init__(self, client: ObjectClient, bucket: str, prefix: str = "indexes/") -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix

    async def upload(self, index: LocalIndex) -> None:
        data = await asyncio.to_thread(index.snapshot)
        await self.client.put_object(bucket=self.bucket, key=self.prefix + index.path.name, data=data)

    async def download(self, index: LocalIndex) -> bool:
        """Fetch the run's index into ``index.path``; False if none was shared."""
        data = await get_if_present(self.client, self.bucket, self.prefix + index.path.name)
        if data is None:
            return False
        for leftover in ("-wal", "-shm"):  # of an older copy: not for this file
            Path(f"{index.path}{leftover}").unlink(missing_ok=True)
        write_atomically(index.path, data)
        return True
