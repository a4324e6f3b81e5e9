"""Where Temporal is, and how to reach it: the address, namespace and task
queue, and TLS / API key from the standard Temporal client variables
(``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``,
``TEMPORAL_TLS*``), so the same worker image runs against a self-hosted
cluster or Temporal Cloud.

Light on purpose: it needs neither the SDK's client nor the data converter,
so the CLI's quick commands (client/quick.py) use it as they are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS

from infra.errors import ConfigError, ConnectionFailed, cli_name
from infra.settings import data_dir

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "deep-research"


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
        """TLS, API key and gRPC metadata for ``Client.connect`` and for the
        quick way's ``ConnectConfig``, which take the same names (as the SDK's
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


def connection_failed(conn: Connection, err: BaseException) -> ConnectionFailed:
    """The one-line error for a Temporal that cannot be reached."""
    return ConnectionFailed(
        f"cannot reach Temporal at {conn.address} (namespace {conn.namespace}): "
        f"{connect_problem(err)}; set TEMPORAL_ADDRESS or --address, or start one with `{cli_name()} server`"
    )


def connect_problem(err: BaseException) -> str:
    """What went wrong connecting, in a few words (the SDK's message is a
    long chain of Rust errors)."""
    text = " ".join(str(err).split())
    for needle, said in (
        ("Connection refused", "connection refused"),
        ("dns error", "the host name does not resolve"),
        ("timed out", "the connection timed out"),
        ("Namespace", "the namespace does not exist"),
        ("certificate", "a TLS certificate problem"),
        ("Unauthenticated", "the server refused the credentials"),
    ):
        if needle.lower() in text.lower():
            return said
    words = text.split(" ")
    short = ""
    for word in words:  # whole words only
        if len(short) + len(word) > 160:
            return short + " …"
        short = f"{short} {word}".strip()
    return short
