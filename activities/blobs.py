"""Content-addressed blob store for long texts (crawled pages, big outputs,
agent conversations). Workflow history carries only the short reference.

Blobs are written once under ``<data dir>/blobs/<aa>/<sha256>``; the same
content always gets the same reference, so a retried activity is idempotent.
Several workers on one machine share the directory; several machines need a
shared filesystem (see README, "Scaling").
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

PREFIX = "sha256:"


class BlobNotFound(LookupError):
    pass


class BlobStore:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, ref: str) -> Path:
        if not ref.startswith(PREFIX) or len(ref) != len(PREFIX) + 64:
            raise ValueError(f"not a blob reference: {ref!r}")
        digest = ref[len(PREFIX) :]
        if not all(c in "0123456789abcdef" for c in digest):
            raise ValueError(f"not a blob reference: {ref!r}")
        return self.root / digest[:2] / digest

    def put(self, text: str) -> str:
        data = text.encode("utf-8")
        ref = PREFIX + hashlib.sha256(data).hexdigest()
        path = self._path(ref)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            # Write then rename, so a reader never sees half a blob.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        return ref

    def get(self, ref: str) -> str:
        try:
            return self._path(ref).read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise BlobNotFound(
                f"blob {ref} is missing from {self.root}; is DEEPRESEARCH_DATA_DIR "
                "the same for every worker?"
            ) from None
