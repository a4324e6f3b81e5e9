"""The S3 (or MinIO) client shared by large-payload storage, the blob store and
the shared local-document indexes, when ``DEEPRESEARCH_PAYLOAD_S3_BUCKET`` is
set. Credentials come from the standard ``AWS_*`` variables."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from temporalio.contrib.aws.s3driver import S3StorageDriverClient

from infra.errors import ConfigError, PayloadStorageError

# Set to a bucket name to keep large payloads in S3 (or MinIO) instead of the data dir.
PAYLOAD_BUCKET_ENV = "DEEPRESEARCH_PAYLOAD_S3_BUCKET"


@dataclass(frozen=True)
class S3Config:
    """Where large payloads go when DEEPRESEARCH_PAYLOAD_S3_BUCKET is set.
    Unset credentials and region fall back to boto's usual chain (config
    files, instance roles)."""

    bucket: str
    endpoint_url: str | None = None  # MinIO, or another S3-compatible store
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> S3Config | None:
        env = os.environ if env is None else env
        bucket = (env.get(PAYLOAD_BUCKET_ENV) or "").strip()
        if not bucket:
            return None
        return cls(
            bucket=bucket,
            endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            access_key_id=env.get("AWS_ACCESS_KEY_ID") or None,
            secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=env.get("AWS_SESSION_TOKEN") or None,
        )

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}" + (f" at {self.endpoint_url}" if self.endpoint_url else "")


class SharedS3Client(S3StorageDriverClient):
    """The aioboto3 S3 client behind the S3 driver.

    The aioboto3 client is an async context manager bound to an event loop, and
    the converter is built synchronously (the replayer needs it too). So the
    client is opened on first use in each event loop and then kept open for
    that loop's lifetime — which is the process for the worker and the CLI.
    It is held by a suspended async generator: ``asyncio.run`` (through
    ``loop.shutdown_asyncgens``) closes it cleanly when the loop ends;
    ``aclose()`` closes it earlier. One instance per S3 configuration is shared
    by every converter in the process. The bucket is checked once on opening,
    so a missing bucket gives one clear error.
    """

    def __init__(self, config: S3Config) -> None:
        self.config = config
        self._opened: dict[asyncio.AbstractEventLoop, asyncio.Task[tuple[Any, Any, Any]]] = {}

    def describe(self) -> Mapping[str, str]:
        info = {"endpoint": self.config.endpoint_url or "aws"}
        if self.config.region:
            info["region"] = self.config.region
        return info

    async def _adapter(self) -> S3StorageDriverClient:
        loop = asyncio.get_running_loop()
        for old in [other for other in self._opened if other.is_closed()]:
            del self._opened[old]
        task = self._opened.get(loop)
        if task is None:
            task = self._opened[loop] = loop.create_task(self._open())
        try:
            return (await asyncio.shield(task))[2]
        except BaseException:
            if task.done() and self._opened.get(loop) is task:
                del self._opened[loop]  # failed: the next call tries again
            raise

    async def ensure_open(self) -> None:
        await self._adapter()

    async def aclose(self) -> None:
        """Close the client opened in the running loop (if any)."""
        task = self._opened.pop(asyncio.get_running_loop(), None)
        if task is not None and task.done() and not task.cancelled() and not task.exception():
            holder, _, _ = task.result()
            await holder.aclose()

    async def _open(self) -> tuple[Any, Any, Any]:
        holder = self._hold()
        client = await anext(holder)
        try:
            await self._check_bucket(client)
        except BaseException:
            await holder.aclose()
            raise
        from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client

        return holder, client, new_aioboto3_client(client)

    async def _hold(self) -> AsyncIterator[Any]:
        import aioboto3
        from botocore.config import Config

        c = self.config
        session = aioboto3.Session(
            aws_access_key_id=c.access_key_id,
            aws_secret_access_key=c.secret_access_key,
            aws_session_token=c.session_token,
            region_name=c.region,
        )
        # Path-style addressing for MinIO and other endpoints without
        # virtual-host buckets; Temporal retries, so botocore retries little.
        config = Config(
            connect_timeout=10,
            read_timeout=60,
            retries={"mode": "standard", "max_attempts": 3},
            s3={"addressing_style": "path"} if c.endpoint_url else None,
        )
        async with session.client("s3", endpoint_url=c.endpoint_url, config=config) as client:
            yield client

    async def _check_bucket(self, client: Any) -> None:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        where = self.config.where
        try:
            await client.head_bucket(Bucket=self.config.bucket)
        except ClientError as err:
            code = str(err.response.get("Error", {}).get("Code"))
            if code in ("404", "NoSuchBucket"):
                raise PayloadStorageError(
                    f"the payload bucket {where} does not exist: create it (with docker compose "
                    f"the minio-setup service does) or set {PAYLOAD_BUCKET_ENV} to an existing bucket"
                ) from None
            if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                raise PayloadStorageError(
                    f"access to the payload bucket {where} was denied ({code}): check "
                    "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (needs s3:GetObject, s3:PutObject, "
                    "s3:ListBucket)"
                ) from None
            raise PayloadStorageError(f"the payload bucket {where} failed a check: {err}") from None
        except NoCredentialsError:
            raise PayloadStorageError(
                f"no credentials for the payload bucket {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            ) from None
        except BotoCoreError as err:
            raise PayloadStorageError(
                f"cannot reach the payload bucket {where}: {err}; check AWS_ENDPOINT_URL"
            ) from None

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await (await self._adapter()).put_object(bucket=bucket, key=key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return await (await self._adapter()).object_exists(bucket=bucket, key=key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        return await (await self._adapter()).get_object(bucket=bucket, key=key)


_S3_CLIENTS: dict[S3Config, SharedS3Client] = {}


def s3_client(config: S3Config) -> SharedS3Client:
    """The process-wide client for this configuration."""
    if importlib.util.find_spec("aioboto3") is None:
        raise ConfigError(
            f"{PAYLOAD_BUCKET_ENV} is set but the S3 driver's dependencies are missing: "
            "pip install 'deepresearch-temporal[s3]' (or temporalio[aioboto3])"
        )
    client = _S3_CLIENTS.get(config)
    if client is None:
        client = _S3_CLIENTS[config] = SharedS3Client(config)
    return client
