"""The project's data converter: pydantic JSON plus external payload storage.

The same converter is used by the CLI, the worker, the tests and the replayer.
Large payloads go to

- a folder under the data dir (driver ``deepresearch-file``), the embedded
  default for one machine, or
- an S3 bucket (driver ``deepresearch-s3``) when
  ``DEEPRESEARCH_PAYLOAD_S3_BUCKET`` is set, for several machines (MinIO or
  AWS S3; credentials from the standard ``AWS_*`` variables).

Driver names are recorded in every claim in history: never rename them. With
S3 on, the file driver stays registered so claims written before can still be
read; new payloads go to S3.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from temporalio.contrib.aws.s3driver import S3StorageDriver
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, ExternalStorage

from infra.payload_storage import FileStorageDriver
from infra.s3 import S3Config, s3_client
from infra.settings import PAYLOAD_THRESHOLD

# Recorded in every claim in history: never rename.
S3_DRIVER_NAME = "deepresearch-s3"


def data_converter(root: Path, env: Mapping[str, str] | None = None) -> DataConverter:
    """Pydantic JSON plus external storage. The same on client, worker and
    replayer: file driver under ``root/payloads``, and the S3 driver in front of
    it when DEEPRESEARCH_PAYLOAD_S3_BUCKET is set (the file driver then only
    reads claims written before S3 was turned on)."""
    file_driver = FileStorageDriver(root / "payloads")
    s3 = S3Config.from_env(env)
    if s3 is None:
        storage = ExternalStorage(drivers=[file_driver], payload_size_threshold=PAYLOAD_THRESHOLD)
    else:
        s3_driver = S3StorageDriver(client=s3_client(s3), bucket=s3.bucket, driver_name=S3_DRIVER_NAME)
        storage = ExternalStorage(
            drivers=[s3_driver, file_driver],
            driver_selector=lambda _context, _payload: s3_driver,
            payload_size_threshold=PAYLOAD_THRESHOLD,
        )
    return dataclasses.replace(pydantic_data_converter, external_storage=storage)
