"""Connecting to Temporal with the project's data converter.

The same converter (pydantic JSON + external payload storage) is used by the
CLI, the worker, the tests and the replayer. Large payloads go to

- a folder under the data dir (driver ``deepresearch-file``), the embedded
  default for one machine, or
- an S3 bucket (driver ``deepresearch-s3``) when
  ``DEEPRESEARCH_PAYLOAD_S3_BUCKET`` is set, for several machines (MinIO or
  AWS S3; credentials from the standard ``AWS_*`` variables).

Driver names are recorded in every claim in history: never rename them. With
S3 on, the file driver stays registered so claims written before can still be
read; new payloads go to S3.

The connection to Temporal itself honours the standard Temporal client
variables (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``,
``TEMPORAL_TLS*``), so the same worker image runs against a self-hosted
cluster or Temporal Cloud.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, ExternalStorage
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS

from activities.settings import ConfigError, data_dir
from client.payload_storage import FileStorageDriver
from workflows.models import PHASE_ATTRIBUTE, ResearchInput, ResearchResult

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "deep-research"
WORKFLOW_TYPE = "DeepResearch"
# Payloads above this size go to external storage (the SDK warns at 512 KiB).
PAYLOAD_THRESHOLD = 128 * 1024
# Set to a bucket name to keep large payloads in S3 (or MinIO) instead of the data dir.
PAYLOAD_BUCKET_ENV = "DEEPRESEARCH_PAYLOAD_S3_BUCKET"
# Recorded in every claim in history: never rename.
S3_DRIVER_NAME = "deepresearch-s3"


class ConnectionFailed(RuntimeError):
    """One line saying which server could not be reached and what to set."""


class PayloadStorageError(ConnectionFailed):
    """The external payload store is missing or unreachable (one line)."""


@dataclass(frozen=True)
class Connection:
    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = DEFAULT_TASK_QUEUE
    data_dir: Path = Path(".")
    address_given: bool = False  # set explicitly (flag or env), not the default
    # Temporal Cloud / TLS, from the standard TEMPORAL_API_KEY and TEMPORAL_TLS*
    # variables (read by the SDK's envconfig). Certificates are read at connect.
    api_key: str | None = field(default=None, repr=False)
    tls: ClientConfigTLS | None = field(default=None, repr=False)
    rpc_metadata: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        address: str | None = None,
        namespace: str | None = None,
        task_queue: str | None = None,
    ) -> Connection:
        env = os.environ if env is None else env
        env_address = env.get("TEMPORAL_ADDRESS")
        profile = temporal_profile(env)
        return cls(
            address=address or env_address or DEFAULT_ADDRESS,
            namespace=namespace or env.get("TEMPORAL_NAMESPACE") or DEFAULT_NAMESPACE,
            task_queue=task_queue or env.get("DEEPRESEARCH_TASK_QUEUE") or DEFAULT_TASK_QUEUE,
            data_dir=data_dir(env),
            address_given=bool(address or env_address),
            api_key=profile.api_key or None,
            tls=profile.tls,
            rpc_metadata=tuple(sorted(profile.grpc_meta.items())),
        )

    def connect_options(self) -> dict[str, Any]:
        """TLS, API key and gRPC metadata for ``Client.connect`` (as the SDK's
        envconfig maps them: an API key turns TLS on unless TEMPORAL_TLS=false;
        TEMPORAL_TLS_CLIENT_CERT_PATH / _KEY_PATH give mutual TLS)."""
        options: dict[str, Any] = {}
        if self.api_key:
            options["api_key"] = self.api_key
            options["tls"] = True
        if self.tls is not None:
            try:
                options["tls"] = self.tls.to_connect_tls_config()
            except OSError as err:
                raise ConnectionFailed(
                    f"cannot read the Temporal TLS files ({err.strerror}: {err.filename}); "
                    "check TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH and "
                    "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
                ) from None
        if self.rpc_metadata:
            options["rpc_metadata"] = dict(self.rpc_metadata)
        return options


def temporal_profile(env: Mapping[str, str]) -> ClientConfigProfile:
    """The standard Temporal client variables (TEMPORAL_API_KEY, TEMPORAL_TLS,
    TEMPORAL_TLS_CLIENT_CERT_PATH, …), parsed by the SDK's envconfig. Config
    files (TEMPORAL_CONFIG_FILE / profiles) are not read."""
    try:
        return ClientConfigProfile.load(disable_file=True, override_env_vars=dict(env))
    except Exception as err:
        raise ConfigError(f"the TEMPORAL_* client settings are invalid: {err}") from None


# --- external payload storage --------------------------------------------------


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
                f"no credentials for the payload bucket {where}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY"
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


def payload_storage(root: Path, env: Mapping[str, str] | None = None) -> str:
    """Where large payloads go, for logs."""
    s3 = S3Config.from_env(env)
    return s3.where if s3 else f"{root / 'payloads'}"


async def check_payload_storage(env: Mapping[str, str] | None = None) -> None:
    """Open the S3 client and check the bucket now (PayloadStorageError if it is
    missing or unreachable); nothing to check for the file driver."""
    s3 = S3Config.from_env(env)
    if s3 is not None:
        await s3_client(s3).ensure_open()


async def connect(conn: Connection) -> Client:
    """A client with the project's converter, TLS / API key from the standard
    Temporal variables, and the tracing interceptor when OTEL_* asks for it
    (a worker built on this client inherits the interceptor)."""
    from client.tracing import tracing_interceptors

    converter = data_converter(conn.data_dir)
    interceptors: Sequence[Any] = tracing_interceptors()
    options = conn.connect_options()
    try:
        client = await Client.connect(
            conn.address,
            namespace=conn.namespace,
            data_converter=converter,
            interceptors=interceptors,
            **options,
        )
    except Exception as err:  # the SDK raises RuntimeError with a long chain
        raise ConnectionFailed(
            f"cannot reach Temporal at {conn.address} (namespace {conn.namespace}): "
            f"{str(err).splitlines()[0][:200]}; set TEMPORAL_ADDRESS or --address, "
            "or run `deepresearch server`"
        ) from None
    await check_payload_storage()
    return client


async def search_attributes_ready(client: Client, namespace: str) -> bool:
    """Whether the server knows our search attributes; registers them when it
    lets us (dev server, self-hosted with operator rights)."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import (
        AddSearchAttributesRequest,
        ListSearchAttributesRequest,
    )

    from client.devserver import SEARCH_ATTRIBUTES

    try:
        known = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        missing = {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in known.custom_attributes}
        if missing:
            kinds = {"Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
                     "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT}  # fmt: skip
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=namespace,
                    search_attributes={k: kinds[v] for k, v in missing.items()},
                )
            )
        return True
    except Exception:  # no rights (e.g. Temporal Cloud without setup): run without them
        return False


async def start_research(
    client: Client, conn: Connection, request: ResearchInput, workflow_id: str
) -> WorkflowHandle[Any, ResearchResult]:
    attributes = (
        TypedSearchAttributes([SearchAttributePair(PHASE_ATTRIBUTE, "coordinating")])
        if await search_attributes_ready(client, conn.namespace)
        else TypedSearchAttributes.empty
    )
    return await client.start_workflow(
        WORKFLOW_TYPE,
        request,
        id=workflow_id,
        task_queue=conn.task_queue,
        result_type=ResearchResult,
        search_attributes=attributes,
    )
