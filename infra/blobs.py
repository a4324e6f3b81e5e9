"""Content-addressed blob store for long texts (crawled pages, big outputs,
agent conversations) and binary files (audio clips, decks). Workflow history
carries only the short reference,
``sha256:<hex>``; the same content always gets the same reference, so a
retried activity is idempotent.

Two backends with one interface (``put`` / ``get`` for text, ``put_bytes`` /
``get_bytes`` for binary data):

- ``FileBlobStore``: ``<data dir>/blobs/<aa>/<sha256>``, the default. Several
  workers on one machine share the directory; several machines would need a
  shared filesystem.
- ``S3BlobStore``: ``s3://<bucket>/blobs/<aa>/<sha256>``, chosen by the worker
  when DEEPRESEARCH_PAYLOAD_S3_BUCKET is set (the bucket large payloads go to),
  so workers on several machines need no shared filesystem for research runs.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from temporalio.exceptions import ApplicationError

PREFIX = "sha256:"


class BlobNotFound(ApplicationError, LookupError):
    """A blob that is not in the store. Raised in an activity it fails the
    activity at once (no retry brings a deleted file back): the run then
    writes a partial report and fails with this message."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type="BlobNotFound", non_retryable=True)

    def __str__(self) -> str:
        return self.message


def digest_of(ref: str) -> str:
    """The hex digest of a blob reference; ValueError if it is not one."""
    digest = ref[len(PREFIX) :] if ref.startswith(PREFIX) else ""
    if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise ValueError(f"not a blob reference: {ref!r}")
    return digest


def reference(data: bytes) -> str:
    return PREFIX + hashlib.sha256(data).hexdigest()


class BlobStore(Protocol):
    where: str  # for logs and error messages

    async def put_bytes(self, data: bytes) -> str: ...

    async def get_bytes(self, ref: str) -> bytes: ...

    async def put(self, text: str) -> str: ...

    async def get(self, ref: str) -> str: ...


class _TextOnBytes:
    """Text blobs are their UTF-8 bytes."""

    async def put(self, text: str) -> str:
        return await self.put_bytes(text.encode("utf-8"))  # type: ignore[attr-defined]

    async def get(self, ref: str) -> str:
        return (await self.get_bytes(ref)).decode("utf-8")  # type: ignore[attr-defined]


class FileBlobStore(_TextOnBytes):
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.where = str(self.root)

    def _path(self, ref: str) -> Path:
        digest = digest_of(ref)
        return self.root / digest[:2] / digest

    async def put_bytes(self, data: bytes) -> str:
        ref = reference(data)
        path = self._path(ref)
        if not refresh(path):  # the same content, kept again: `gc` sees it as new
            write_atomically(path, data)
        return ref

    async def get_bytes(self, ref: str) -> bytes:
        path = self._path(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobNotFound(
                f"blob {ref} is missing from {self.root} (deleted, or DEEPRESEARCH_DATA_DIR differs between workers)"
            ) from None
        refresh(path)
        return data


class ObjectClient(Protocol):
    """The async S3 calls the store needs (``infra.s3.SharedS3Client``)."""

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None: ...

    async def get_object(self, *, bucket: str, key: str) -> bytes: ...


class S3BlobStore(_TextOnBytes):
    def __init__(self, client: ObjectClient, bucket: str, prefix: str = "blobs/") -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.where = f"s3://{bucket}/{prefix}"

    def _key(self, ref: str) -> str:
        digest = digest_of(ref)
        return f"{self.prefix}{digest[:2]}/{digest}"

    async def put_bytes(self, data: bytes) -> str:
        ref = reference(data)
        # Always written: most blobs are new (each turn's conversation is), and
        # writing the same content again is harmless.
        await self.client.put_object(bucket=self.bucket, key=self._key(ref), data=data)
        return ref

    async def get_bytes(self, ref: str) -> bytes:
        key = self._key(ref)
        data = await get_if_present(self.client, self.bucket, key)
        if data is None:
            raise BlobNotFound(
                f"blob {ref} is missing from s3://{self.bucket}/{key}; do all workers "
                "use the same DEEPRESEARCH_PAYLOAD_S3_BUCKET?"
            )
        return data


def refresh(path: Path) -> bool:
    """Mark a stored file as used now (its modified time), so `deepresearch
    gc`, which deletes by that time, keeps it while a run uses it; False
    when there is no such file. A store this process may only read is left
    as it is."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    except PermissionError:
        return path.exists()
    return True


def write_atomically(path: Path, data: bytes) -> None:
    """Write then rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


async def get_if_present(client: ObjectClient, bucket: str, key: str) -> bytes | None:
    """The object's bytes; None if it does not exist. Other errors (store
    unreachable, throttling) propagate, so the activity is retried."""
    try:
        return await client.get_object(bucket=bucket, key=key)
    except Exception as err:
        if _is_missing(err):
            return None
        raise


def _is_missing(err: Exception) -> bool:
    """Whether an S3 client error says the object does not exist."""
    response = getattr(err, "response", None)
    code = str((response or {}).get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""
    return code in ("NoSuchKey", "404", "NotFound")


def blob_store(data_dir: Path, env: Mapping[str, str] | None = None) -> BlobStore:
    """The store workers use: in the payload bucket when
    DEEPRESEARCH_PAYLOAD_S3_BUCKET is set (workers on several machines then
    share it), else under ``<data dir>/blobs``. The CLI reads the same."""
    from infra.s3 import S3Config, s3_client

    s3 = S3Config.from_env(env)
    return S3BlobStore(s3_client(s3), s3.bucket) if s3 else FileBlobStore(data_dir / "blobs")
