"""External payload storage: payloads above a threshold leave the workflow
history and are kept in a content-addressed store, with only a claim in history.

The embedded default is a folder under the data dir (one machine, or a shared
filesystem). Client, worker and replayer must use the same converter.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from infra.blobs import refresh
from infra.s3 import S3Config, s3_client

MISSING_PAYLOAD = "external payload"  # how a missing one's error starts (client/talk.py tells it apart)


class FileStorageDriver(StorageDriver):
    """Stores each payload as a file named by its SHA-256. Never rename: the
    name is recorded in every claim in history."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def name(self) -> str:
        return "deepresearch-file"

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        claims = []
        for payload in payloads:
            data = payload.SerializeToString(deterministic=True)
            digest = hashlib.sha256(data).hexdigest()
            path = self.root / digest[:2] / digest
            if not refresh(path):  # the same payload again: `gc` sees it as new
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            claims.append(StorageDriverClaim(claim_data={"sha256": digest}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        payloads = []
        for claim in claims:
            digest = claim.claim_data["sha256"]
            path = self.root / digest[:2] / digest
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise RuntimeError(
                    f"{MISSING_PAYLOAD} {digest} is missing under {self.root} (deleted, or client and "
                    "worker do not share DEEPRESEARCH_DATA_DIR)"
                ) from None
            refresh(path)
            payload = Payload()
            payload.ParseFromString(data)
            payloads.append(payload)
        return payloads


def payload_storage_location(root: Path, env: Mapping[str, str] | None = None) -> str:
    """Where large payloads go, for logs."""
    s3 = S3Config.from_env(env)
    return s3.where if s3 else f"{root / 'payloads'}"


async def check_payload_storage(env: Mapping[str, str] | None = None) -> None:
    """Open the S3 client and check the bucket now (PayloadStorageError if it is
    missing or unreachable); nothing to check for the file driver."""
    s3 = S3Config.from_env(env)
    if s3 is not None:
        await s3_client(s3).ensure_open()
