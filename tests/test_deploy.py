"""Cluster deployment: the compose file, the worker image, and external payload
storage in S3.

There is no Docker engine here, so docker-compose.yml and the Dockerfile are
checked by parsing them against what the code reads. S3 is real: a moto server
on loopback stands in for MinIO / AWS S3, and a research run on the dev server
passes its large result from worker to client through the bucket.
"""

from __future__ import annotations

import ast
import asyncio
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from activities.local_docs.activities import LocalDocsActivities
from client.devserver import (
    QUEUE_READ_RATE,
    DevServer,
    free_port,
    port_open,
)
from infra.blobs import BlobNotFound, FileBlobStore, S3BlobStore, blob_store
from infra.connection import Connection
from infra.converter import S3_DRIVER_NAME, data_converter
from infra.errors import ConnectionFailed, PayloadStorageError
from infra.payload_storage import check_payload_storage
from infra.s3 import PAYLOAD_BUCKET_ENV, S3Config
from infra.search_attributes import SEARCH_ATTRIBUTES
from infra.settings import ROLES, Settings
from infra.temporal import connect
from infra.tracing import tracing_enabled
from worker import build_worker, shared_indexes, worker_options
from workflows.tool_models import IndexRequest, LocalSearchRequest

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
WORKER = SERVICES["worker"]
# Worker-side code: everything that runs in the worker process.
WORKER_CODE = [
    ROOT / "worker.py",
    *sorted((ROOT / "infra").glob("*.py")),
    *sorted((ROOT / "activities").rglob("*.py")),
]
ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?([-?])([^}]*))?\}")
# What the host must set, or compose refuses to start (``${NAME:?message}``).
REQUIRED_ON_HOST = {"DEEPRESEARCH_SANDBOX_TOKEN": "a-token-from-the-host"}


class Unset(Exception):
    """A ``${NAME:?message}`` the host does not set: compose stops with the message."""


def interpolate(value: object, host: dict[str, str]) -> str:
    """What compose makes of a value, given the host's environment."""

    def one(m: re.Match) -> str:
        if host.get(m[1]):
            return host[m[1]]
        if m[2] == "?":
            raise Unset(f"{m[1]}: {m[3]}")
        return m[3] or ""

    return INTERPOLATION.sub(one, str(value)).replace("$$", "$")


def service_env(name: str, host: dict[str, str] | None = None) -> dict[str, str]:
    env = SERVICES[name].get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: interpolate(value, REQUIRED_ON_HOST | (host or {})) for key, value in env.items()}


def names_read_by_code() -> tuple[set[str], set[str]]:
    """Environment variable names in worker-side code: string constants shaped
    like one, and prefixes of f-strings such as f"DEEPRESEARCH_MODEL_{role}"."""
    names: set[str] = set()
    prefixes: set[str] = set()
    for path in WORKER_CODE:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if ENV_NAME.fullmatch(node.value):
                    names.add(node.value)
            elif isinstance(node, ast.JoinedStr) and node.values:
                head = node.values[0]
                if isinstance(head, ast.Constant) and re.fullmatch(r"[A-Z][A-Z0-9_]*_", str(head.value)):
                    prefixes.add(head.value)
    return names, prefixes


def read_by_code(name: str, names: set[str], prefixes: set[str]) -> bool:
    if name in names:
        return True
    roles = {role.upper() for role in ROLES}
    return any(name.startswith(p) and name[len(p) :] in roles for p in prefixes)


# --- docker-compose.yml --------------------------------------------------------


def test_compose_has_the_cluster_services():
    assert set(SERVICES) == {
        "postgresql",
        "temporal-schema",
        "temporal",
        "temporal-admin-tools",
        "temporal-ui",
        "minio",
        "minio-setup",
        "worker",
        "sandbox",
        "desk",
        "oauth2-proxy",
    }
    assert SERVICES["postgresql"]["image"] == "postgres:16"
    assert SERVICES["temporal"]["image"].startswith("temporalio/server:")
    assert SERVICES["temporal-ui"]["image"].startswith("temporalio/ui:")
    assert SERVICES["minio"]["image"].startswith("minio/minio:")
    assert SERVICES["minio-setup"]["image"].startswith("minio/mc:")
    for one_shot in ("temporal-schema", "temporal-admin-tools"):
        assert SERVICES[one_shot]["image"].startswith("temporalio/admin-tools:")
    # The worker scales: no fixed container name, built from this repository.
    assert WORKER["deploy"]["replicas"] == 2
    assert "container_name" not in WORKER
    assert WORKER["build"]["context"] == "."
    assert (ROOT / WORKER["build"]["dockerfile"]).is_file()


def published(service: str) -> dict[int, str]:
    """container port -> host binding, e.g. {7233: "127.0.0.1:7233"}."""
    ports = {}
    for spec in SERVICES[service].get("ports", []):
        host, _, container = str(spec).rpartition(":")
        ports[int(container)] = host
    return ports


def test_ports():
    assert published("temporal") == {7233: "127.0.0.1:7233"}
    assert published("temporal-ui") == {8080: "127.0.0.1:8080"}
    assert published("minio") == {9000: "127.0.0.1:9000", 9001: "127.0.0.1:9001"}
    assert published("oauth2-proxy") == {4180: "127.0.0.1:4180"}
    for service in ("postgresql", "worker", "temporal-schema", "temporal-admin-tools", "minio-setup", "desk"):
        assert not published(service), f"{service} publishes no port"


def test_volumes_are_declared_and_bind_mounts_exist():
    declared = set(COMPOSE["volumes"])
    used = set()
    for name, service in SERVICES.items():
        for spec in service.get("volumes", []):
            source, target = spec.split(":")[:2]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in declared, f"{name} uses undeclared volume {source}"
                used.add(source)
            assert target.startswith("/")
    assert used == declared
    assert "postgresql-data:/var/lib/postgresql/data" in SERVICES["postgresql"]["volumes"]
    assert "minio-data:/data" in SERVICES["minio"]["volumes"]
    # Every worker replica shares the data dir (needed without a bucket; with one, a cache).
    assert WORKER["volumes"] == ["research-data:/data"]
    assert service_env("worker")["DEEPRESEARCH_DATA_DIR"] == "/data"


def test_depends_on_waits_for_health_and_one_shots():
    def deps(service: str) -> dict[str, str]:
        value = SERVICES[service].get("depends_on") or {}
        return {k: v["condition"] for k, v in value.items()}

    assert deps("temporal-schema") == {"postgresql": "service_healthy"}
    assert deps("temporal") == {"temporal-schema": "service_completed_successfully"}
    assert deps("temporal-admin-tools") == {"temporal": "service_healthy"}
    assert deps("temporal-ui") == {"temporal": "service_healthy"}
    assert deps("minio-setup") == {"minio": "service_healthy"}
    assert deps("worker") == {
        "temporal-admin-tools": "service_completed_successfully",
        "minio-setup": "service_completed_successfully",
    }
    for name in SERVICES:
        for dep, condition in deps(name).items():
            assert dep in SERVICES
            if condition == "service_healthy":
                assert SERVICES[dep].get("healthcheck", {}).get("test"), f"{dep} needs a healthcheck"


def test_temporal_server_on_postgres_with_dynamic_config():
    env = service_env("temporal")
    assert env["DB"] == "postgres12" and env["POSTGRES_SEEDS"] == "postgresql"
    assert env["BIND_ON_IP"] == "0.0.0.0"
    # DYNAMIC_CONFIG_FILE_PATH is relative to /etc/temporal, mounted from deploy/.
    container_path = "/etc/temporal/" + env["DYNAMIC_CONFIG_FILE_PATH"]
    mounts = dict(spec.split(":")[1::-1] for spec in SERVICES["temporal"]["volumes"])
    folder = next(t for t in mounts if container_path.startswith(t + "/"))
    host_file = ROOT / mounts[folder] / container_path[len(folder) + 1 :]
    assert host_file.is_file() and host_file.parent.parent.name == "deploy"
    config = yaml.safe_load(host_file.read_text())
    assert all(isinstance(v, list) and "value" in v[0] for v in config.values())
    # The schema job talks to the same database as the server.
    schema_env = service_env("temporal-schema")
    for key in ("DB", "POSTGRES_SEEDS", "POSTGRES_USER", "POSTGRES_PWD"):
        assert schema_env[key] == env[key]
    assert env["POSTGRES_PWD"] == service_env("postgresql")["POSTGRES_PASSWORD"]
    script = (ROOT / "deploy" / "setup-postgres.sh").read_text()
    assert "temporal-sql-tool" in script and "update-schema" in script
    assert SERVICES["temporal-schema"]["entrypoint"][-1] == "/deploy/setup-postgres.sh"


def test_search_attributes_registered_match_the_dev_server():
    env = service_env("temporal-admin-tools")
    registered = dict(pair.split("=") for pair in env["SEARCH_ATTRIBUTES"].split())
    assert registered == SEARCH_ATTRIBUTES
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert env["TEMPORAL_NAMESPACE"] == service_env("worker")["TEMPORAL_NAMESPACE"]
    script = (ROOT / "deploy" / "setup-temporal.sh").read_text()
    assert "temporal operator cluster health" in script  # waits for the server first
    assert "temporal operator search-attribute create" in script
    assert "${SEARCH_ATTRIBUTES}" in script
    assert SERVICES["temporal-admin-tools"]["entrypoint"][-1] == "/deploy/setup-temporal.sh"


def test_the_desk_is_reached_only_through_the_signing_in_proxy():
    """docs/deploy.md, "A team on one deployment": oauth2-proxy signs people in and
    names them in a header; the desk takes that header from the proxy's fixed
    address only, publishes no port, and reads its users file."""
    from client.desk.users import Who, parse_users, trusted_proxies

    desk, proxy = service_env("desk"), service_env("oauth2-proxy")
    assert SERVICES["desk"]["command"][:2] == ["deepresearch", "ui"] and "--host" in SERVICES["desk"]["command"]
    assert SERVICES["desk"]["image"] == WORKER["image"] and SERVICES["desk"]["profiles"] == ["desk"]
    assert SERVICES["oauth2-proxy"]["image"].startswith("quay.io/oauth2-proxy/oauth2-proxy:")
    assert proxy["OAUTH2_PROXY_UPSTREAMS"] == f"http://desk:{SERVICES['desk']['command'][-1]}/"
    assert proxy["OAUTH2_PROXY_PASS_USER_HEADERS"] == proxy["OAUTH2_PROXY_SKIP_AUTH_STRIP_HEADERS"] == "true"
    assert desk["DEEPRESEARCH_UI_USER_HEADER"] == "X-Forwarded-Email"  # one of those oauth2-proxy passes
    proxy_address = SERVICES["oauth2-proxy"]["networks"]["desk"]["ipv4_address"]
    (trusted,) = trusted_proxies(desk["DEEPRESEARCH_UI_TRUSTED_PROXIES"])
    assert trusted.num_addresses == 1 and str(trusted.network_address) == proxy_address
    assert SERVICES["desk"]["networks"]["desk"]["ipv4_address"] != proxy_address
    subnet = COMPOSE["networks"]["desk"]["ipam"]["config"][0]["subnet"]
    assert ipaddress.ip_address(proxy_address) in ipaddress.ip_network(subnet)
    # The users file it mounts parses; the desk's settings make a Who (its one-line checks pass).
    mounted = dict(reversed(spec.split(":")[:2]) for spec in SERVICES["desk"]["volumes"])
    users = Path(desk["DEEPRESEARCH_UI_USERS"])
    assert parse_users((ROOT / mounted[str(users.parent)] / users.name).read_text()) == {}
    who = Who.from_env(desk | {"DEEPRESEARCH_UI_USERS": ""}, "desk", None)
    assert who.header == "X-Forwarded-Email" and not who.open
    # The worker keeps the per-user limits; the desk needs the owners' search attributes registered.
    assert {"DEEPRESEARCH_USER_MAX_RUNS", "DEEPRESEARCH_USER_DAILY_TOKENS"} <= set(WORKER["environment"])
    assert {"ResearchOwner", "ResearchShared"} <= set(SEARCH_ATTRIBUTES)


def test_dev_server_and_compose_server_read_task_queues_often():
    """The default of 20 reads a second per history shard adds up to 50 ms to
    each step of a run (bench/README.md, benchmark 2); both servers raise it."""
    command = DevServer(db_file=ROOT / "unused.db").command()
    flags = [command[i + 1] for i, arg in enumerate(command) if arg == "--dynamic-config-value"]
    assert {f"{key}={value}" for key, value in QUEUE_READ_RATE.items()} <= set(flags)
    key = "history.transferProcessorMaxPollRPS"
    compose_config = yaml.safe_load((ROOT / "deploy" / "dynamicconfig" / "development-sql.yaml").read_text())
    assert compose_config[key][0]["value"] == QUEUE_READ_RATE[key] > 20


def test_setup_scripts_are_valid_shell():
    sh = shutil.which("sh")
    if sh is None:
        pytest.skip("no sh")
    for script in ("setup-postgres.sh", "setup-temporal.sh"):
        subprocess.run([sh, "-n", str(ROOT / "deploy" / script)], check=True)


def test_ui_and_minio_setup():
    assert service_env("temporal-ui")["TEMPORAL_ADDRESS"] == "temporal:7233"
    minio = service_env("minio")
    setup = service_env("minio-setup")
    assert (setup["MINIO_ROOT_USER"], setup["MINIO_ROOT_PASSWORD"]) == (
        minio["MINIO_ROOT_USER"],
        minio["MINIO_ROOT_PASSWORD"],
    )
    command = " ".join(SERVICES["minio-setup"]["command"])
    assert "http://minio:9000" in command and "mc mb --ignore-existing" in command
    # The bucket the setup job creates is the one the workers use.
    assert setup["BUCKET"] == service_env("worker")[PAYLOAD_BUCKET_ENV]
    host = {PAYLOAD_BUCKET_ENV: "my-bucket"}
    assert service_env("minio-setup", host)["BUCKET"] == service_env("worker", host)[PAYLOAD_BUCKET_ENV] == "my-bucket"


def test_worker_environment_is_what_the_code_reads():
    names, prefixes = names_read_by_code()
    # The scan sees the variables we know the worker reads.
    for known in (
        "OPENAI_API_KEY",
        "TAVILY_API_KEY",
        "DEEPRESEARCH_DATA_DIR",
        "TEMPORAL_ADDRESS",
        PAYLOAD_BUCKET_ENV,
        "AWS_ENDPOINT_URL",
        "DEEPRESEARCH_ACTIVITIES_PER_SECOND",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ):
        assert read_by_code(known, names, prefixes), known
    assert read_by_code("DEEPRESEARCH_MODEL_PLANNER", names, prefixes)
    assert not read_by_code("DEEPRESEARCH_MODEL_WIZARD", names, prefixes)

    raw = WORKER["environment"]
    unknown = [name for name in raw if not read_by_code(name, names, prefixes)]
    assert not unknown, f"the worker service sets variables no code reads: {unknown}"
    # Pass-throughs from the host keep the variable's own name (no typos).
    for name, value in raw.items():
        for referenced, _kind, _default in INTERPOLATION.findall(str(value)):
            assert referenced == name or (name, referenced) in {
                ("AWS_ACCESS_KEY_ID", "MINIO_ROOT_USER"),
                ("AWS_SECRET_ACCESS_KEY", "MINIO_ROOT_PASSWORD"),
            }, f"{name} takes ${referenced}"
    # The main settings are passed through from the host.
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "DEEPRESEARCH_MODEL",
        "TAVILY_API_KEY",
        "DEEPRESEARCH_SEARCH_ENGINE",
        "E2B_API_KEY",
        "DEEPRESEARCH_SANDBOX",
        "DEEPRESEARCH_MAX_CONCURRENT_ACTIVITIES",
        "DEEPRESEARCH_ACTIVITIES_PER_SECOND",
    ):
        assert str(raw[name]).startswith(f"${{{name}:-"), name


def test_worker_environment_gives_a_working_configuration():
    """What the worker container gets, read by the worker's own code."""
    host = {"OPENAI_API_KEY": "sk-from-host"}
    env = service_env("worker", host)
    settings = Settings.from_env(env)
    settings.check()
    assert settings.openai_api_key == "sk-from-host"
    assert settings.data_dir == Path("/data")
    assert settings.search_engine == "duckduckgo"  # keyless without TAVILY_API_KEY
    assert Settings.from_env(service_env("worker", host | {"TAVILY_API_KEY": "tvly"})).search_engine == "tavily"

    conn = Connection.from_env(env)
    assert (conn.address, conn.namespace, conn.task_queue) == ("temporal:7233", "default", "deep-research")
    assert conn.connect_options() == {}  # plain gRPC inside the compose network

    s3 = S3Config.from_env(env)
    minio = service_env("minio")
    assert s3 is not None and s3.bucket == "deepresearch-payloads"
    assert s3.endpoint_url == "http://minio:9000"
    assert (s3.access_key_id, s3.secret_access_key) == (minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"])

    assert worker_options(env) == {"graceful_shutdown_seconds": 30.0}
    grace = int(str(WORKER["stop_grace_period"]).rstrip("s"))
    assert grace > 30, "docker must wait longer than the worker's own grace period"
    assert not tracing_enabled(env)  # off unless the host asks for it
    assert tracing_enabled(service_env("worker", host | {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318"}))
    limits = worker_options(
        service_env(
            "worker",
            host
            | {
                "DEEPRESEARCH_MAX_CONCURRENT_ACTIVITIES": "8",
                "DEEPRESEARCH_ACTIVITIES_PER_SECOND": "2.5",
            },
        )
    )
    assert limits["max_concurrent_activities"] == 8 and limits["max_activities_per_second"] == 2.5


# --- Dockerfile ---------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_dockerfile_builds_the_worker():
    steps = dockerfile_instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    cmd = [arg for op, arg in steps if op == "CMD"]
    assert [json.loads(c) for c in cmd] == [["python", "worker.py"]]
    users = [arg for op, arg in steps if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    runs = " ".join(arg for op, arg in steps if op == "RUN")
    assert "extras['s3']" in runs and "pip install --no-deps ." in runs
    copied = " ".join(arg for op, arg in steps if op == "COPY")
    for needed in ("pyproject.toml", "README.md", "worker.py", "activities", "client", "infra", "prompts", "workflows"):
        assert needed in copied, needed
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".env" in ignored and ".venv" in ignored and ".git" in ignored


def test_model_written_code_runs_in_a_sandbox_service_without_keys_or_a_way_out():
    sandbox = SERVICES["sandbox"]
    environment = sandbox.get("environment") or {}
    secretive = [
        k for k in environment if any(w in k for w in ("KEY", "SECRET", "PASSWORD", "AWS_", "OPENAI", "TAVILY"))
    ]
    assert secretive == [], secretive  # only the token that workers present to it
    assert set(environment) == {"DEEPRESEARCH_SANDBOX_TOKEN", "DEEPRESEARCH_SANDBOX_MAX_SESSIONS"}
    assert interpolate(environment["DEEPRESEARCH_SANDBOX_MAX_SESSIONS"], {}) == "4"  # the service's own default
    assert sandbox["networks"] == ["sandbox"] and COMPOSE["networks"]["sandbox"]["internal"] is True
    assert not sandbox.get("ports") and not sandbox.get("volumes")  # nothing published, no shared data
    assert sandbox["command"][:3] == ["python", "-m", "activities.sandbox.service"]
    # The workers use it, and reach it on the internal network.
    env = service_env("worker")
    assert env["DEEPRESEARCH_SANDBOX"] == "remote" and env["DEEPRESEARCH_SANDBOX_URL"] == "http://sandbox:8090"
    assert env["DEEPRESEARCH_SANDBOX_TOKEN"] == interpolate(environment["DEEPRESEARCH_SANDBOX_TOKEN"], REQUIRED_ON_HOST)
    assert "sandbox" in WORKER["networks"] and "default" in WORKER["networks"]


def test_compose_ships_no_sandbox_token_of_its_own():
    """A default token would be public (it is in this file): compose must stop
    with a clear message until the host sets one."""
    for name in ("sandbox", "worker"):
        raw = SERVICES[name]["environment"]["DEEPRESEARCH_SANDBOX_TOKEN"]
        with pytest.raises(Unset, match="set DEEPRESEARCH_SANDBOX_TOKEN in .env"):
            interpolate(raw, {})
        assert interpolate(raw, {"DEEPRESEARCH_SANDBOX_TOKEN": "mine"}) == "mine"
    assert "DEEPRESEARCH_SANDBOX_TOKEN=" in (ROOT / "docs" / "deploy.md").read_text()  # in the .env it shows


def test_pyproject_extras():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "temporalio[aioboto3]" in extras["s3"]  # the SDK's S3 driver and its client
    assert any(d.startswith("opentelemetry-sdk") for d in extras["tracing"])
    assert any(d.startswith("opentelemetry-exporter-otlp") for d in extras["tracing"])


# --- docs ---------------------------------------------------------------------


def test_deploy_doc_matches_the_compose_file():
    doc = (ROOT / "docs" / "deploy.md").read_text()
    assert "docker compose up" in doc
    for needed in (
        "http://localhost:8080",
        "localhost:7233",
        "--scale worker=",
        PAYLOAD_BUCKET_ENV,
        "DEEPRESEARCH_MAX_CONCURRENT_ACTIVITIES",
        "DEEPRESEARCH_ACTIVITIES_PER_SECOND",
        "max_task_queue_activities_per_second",
        "max_concurrent_activities",
        "TEMPORAL_API_KEY",
        "TEMPORAL_TLS_CLIENT_CERT_PATH",
        "TEMPORAL_TLS_CLIENT_KEY_PATH",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "research-data",
    ):
        assert needed in doc, needed


def test_readme_cluster_section_uses_compose():
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"^## Scaling.*?(?=^## |\Z)", readme, re.M | re.S)
    if section is None:
        pytest.skip("README has no Scaling section yet (written from docs/deploy.md)")
    assert "docker compose up" in section.group(0)


async def connect_when_ready(conn: Connection):
    """connect(), waiting out a dev server whose port is open but whose
    frontend is still starting ("Frontend is not healthy yet")."""
    for _ in range(150):
        try:
            return await connect(conn)
        except ConnectionFailed as err:
            if "not healthy" not in str(err):
                raise
            await asyncio.sleep(0.1)
    return await connect(conn)


# --- Temporal Cloud / TLS settings ---------------------------------------------


def test_temporal_cloud_settings_from_standard_variables(tmp_path):
    assert Connection.from_env({}).connect_options() == {}
    cloud = Connection.from_env(
        {
            "TEMPORAL_ADDRESS": "eu-west-1.aws.api.temporal.io:7233",
            "TEMPORAL_NAMESPACE": "research.a1b2c",
            "TEMPORAL_API_KEY": "key-123",
        }
    )
    assert cloud.connect_options() == {"api_key": "key-123", "tls": True}
    assert "key-123" not in repr(cloud)

    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_bytes(b"CERT")
    key.write_bytes(b"KEY")
    mtls = Connection.from_env({"TEMPORAL_TLS_CLIENT_CERT_PATH": str(cert), "TEMPORAL_TLS_CLIENT_KEY_PATH": str(key)})
    tls = mtls.connect_options()["tls"]
    assert (tls.client_cert, tls.client_private_key) == (b"CERT", b"KEY")
    assert Connection.from_env({"TEMPORAL_API_KEY": "k", "TEMPORAL_TLS": "false"}).connect_options()["tls"] is False

    missing = Connection.from_env({"TEMPORAL_TLS_CLIENT_CERT_PATH": str(tmp_path / "nope.pem")})
    with pytest.raises(ConnectionFailed, match="TEMPORAL_TLS_CLIENT_CERT_PATH"):
        missing.connect_options()


async def test_connect_passes_api_key_and_tls_to_the_client(dev_server, data_dir):
    """connect() hands the API key and TLS choice to the SDK client (the dev
    server ignores the key; TEMPORAL_TLS=false keeps plain gRPC for it)."""
    conn = Connection.from_env(
        {
            "TEMPORAL_API_KEY": "key-123",
            "TEMPORAL_TLS": "false",
            "TEMPORAL_ADDRESS": dev_server.address,
            "DEEPRESEARCH_DATA_DIR": str(data_dir),
        }
    )
    client = await connect_when_ready(conn)
    assert client.service_client.config.api_key == "key-123"
    assert client.service_client.config.tls is False


# --- external payload storage in S3 (moto server on loopback) -----------------


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """A moto S3 server on loopback, as MinIO would be in compose."""
    pytest.importorskip("moto.server", reason="moto[s3] and flask (the test extra) are not installed")
    port = free_port()
    script = Path(sys.executable).with_name("moto_server")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "moto.server"]
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as out:
        process = subprocess.Popen([*command, "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not port_open("127.0.0.1", port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def s3_env(endpoint: str, bucket: str) -> dict[str, str]:
    return {
        PAYLOAD_BUCKET_ENV: bucket,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }


def make_bucket(endpoint: str) -> str:
    import boto3

    bucket = f"payloads-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    s3.create_bucket(Bucket=bucket)
    return bucket


def bucket_keys(endpoint: str, bucket: str) -> list[str]:
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    return [item["Key"] for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_driver_selection_and_names(tmp_path, s3_server):
    file_only = data_converter(tmp_path, {})
    assert [d.name() for d in file_only.external_storage.drivers] == ["deepresearch-file"]
    env = s3_env(s3_server, "any-bucket")
    with_s3 = data_converter(tmp_path, env)
    # S3 stores; the file driver stays to read claims written before.
    assert [d.name() for d in with_s3.external_storage.drivers] == [S3_DRIVER_NAME, "deepresearch-file"]
    assert S3_DRIVER_NAME == "deepresearch-s3"
    # One shared S3 client per configuration, whichever converter asks.
    assert (
        data_converter(tmp_path / "other", env).external_storage.drivers[0]._client
        is with_s3.external_storage.drivers[0]._client
    )


async def test_large_payload_round_trips_through_s3_between_machines(tmp_path, s3_server):
    bucket = make_bucket(s3_server)
    env = s3_env(s3_server, bucket)
    # Two "machines": different data dirs, so only the bucket is shared.
    writer = data_converter(tmp_path / "a", env)
    reader = data_converter(tmp_path / "b", env)
    big = "crawled page " * 20_000  # ~260 KB, above the 128 KiB threshold
    [payload] = await writer.encode([big])
    assert payload.ByteSize() < 2_000  # only a claim stays in history
    keys = bucket_keys(s3_server, bucket)
    assert len(keys) == 1 and keys[0].startswith("v0/")
    assert await reader.decode([payload], [str]) == [big]
    assert not (tmp_path / "a" / "payloads").exists() and not (tmp_path / "b" / "payloads").exists()
    [small] = await writer.encode(["short"])
    assert await reader.decode([small], [str]) == ["short"] and len(bucket_keys(s3_server, bucket)) == 1


async def test_blobs_go_to_the_payload_bucket_when_it_is_set(tmp_path, s3_server):
    assert isinstance(blob_store(tmp_path, {}), FileBlobStore)
    bucket = make_bucket(s3_server)
    env = s3_env(s3_server, bucket)
    writer, reader = blob_store(tmp_path / "a", env), blob_store(tmp_path / "b", env)
    assert isinstance(writer, S3BlobStore) and writer.where == f"s3://{bucket}/blobs/"
    page = "# A crawled page\n" + "tide table row\n" * 5_000
    ref = await writer.put(page)
    assert ref == await FileBlobStore(tmp_path / "local").put(page)  # same reference either way
    assert await reader.get(ref) == page
    assert bucket_keys(s3_server, bucket) == [f"blobs/{ref[7:9]}/{ref[7:]}"]
    assert await writer.put(page) == ref and len(bucket_keys(s3_server, bucket)) == 1
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    missing = "sha256:" + "0" * 64
    with pytest.raises(BlobNotFound, match=f"s3://{bucket}/blobs/00/0+; do all workers") as err:
        await reader.get(missing)
    assert "\n" not in str(err.value)


async def test_local_documents_indexed_on_one_machine_are_searched_on_another(tmp_path, s3_server):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "turbines.md").write_text("# Turbine log\n\nUnit 7 produced 4.2 megawatts at peak in March.\n")
    bucket = make_bucket(s3_server)
    env = s3_env(s3_server, bucket)
    indexer = LocalDocsActivities(tmp_path / "machine-a", shared_indexes(env))
    searcher = LocalDocsActivities(tmp_path / "machine-b", shared_indexes(env))
    alone = LocalDocsActivities(tmp_path / "machine-c")  # no shared store: as before
    query = LocalSearchRequest(run_key="run-1", query="turbine peak megawatts")

    assert "1 file" in await indexer.index_resources(IndexRequest(run_key="run-1", paths=[str(docs)]))
    assert bucket_keys(s3_server, bucket) == ["indexes/run-1.sqlite"]
    found = await searcher.local_search(query)
    assert not found.error and "4.2 megawatts" in found.content
    assert [s.url for s in found.sources] == [(docs / "turbines.md").resolve().as_uri() + "#turbine-log"]
    assert (await alone.local_search(query)).error
    # Another run's key finds nothing shared: the usual error, not a crash.
    missing = await searcher.local_search(LocalSearchRequest(run_key="run-2", query="turbine"))
    assert missing.error and "no local documents were indexed" in missing.content


async def test_claims_written_by_the_file_driver_stay_readable_with_s3_on(tmp_path, s3_server):
    env = s3_env(s3_server, make_bucket(s3_server))
    big = "x" * 300_000
    [old_claim] = await data_converter(tmp_path, {}).encode([big])
    assert await data_converter(tmp_path, env).decode([old_claim], [str]) == [big]


async def test_missing_bucket_is_one_clear_error(tmp_path, s3_server, monkeypatch):
    env = s3_env(s3_server, "no-such-bucket")
    with pytest.raises(PayloadStorageError, match="s3://no-such-bucket .*does not exist") as err:
        await check_payload_storage(env)
    assert "\n" not in str(err.value) and "minio-setup" in str(err.value)
    # From the process environment too, as connect() and the worker read it.
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConnectionFailed, match="does not exist"):
        await check_payload_storage()


async def test_connect_refuses_a_missing_bucket(dev_server, tmp_path, s3_server, monkeypatch):
    for key, value in s3_env(s3_server, "not-created").items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConnectionFailed, match="s3://not-created .*does not exist"):
        await connect_when_ready(Connection(address=dev_server.address, data_dir=tmp_path))


def test_s3_without_the_extra_says_what_to_install(tmp_path, monkeypatch):
    import infra.s3 as s3

    real = s3.importlib.util.find_spec
    monkeypatch.setattr(s3.importlib.util, "find_spec", lambda name, *a: None if name == "aioboto3" else real(name, *a))
    monkeypatch.setattr(s3, "_S3_CLIENTS", {})
    with pytest.raises(s3.ConfigError, match=r"deepresearch-temporal\[s3\]"):
        data_converter(tmp_path, {PAYLOAD_BUCKET_ENV: "b"})


async def test_run_passes_large_payloads_from_worker_to_client_through_s3(
    dev_server, tmp_path, s3_server, monkeypatch, worker_env, task_queue, script
):
    """A worker and a client on separate data dirs (separate machines) share
    a run whose report is above the threshold: it travels through the bucket."""
    from testkit.research_script import FACT
    from testkit.runs import start

    bucket = make_bucket(s3_server)
    for key, value in s3_env(s3_server, bucket).items():
        monkeypatch.setenv(key, value)
    worker_dir, client_dir = tmp_path / "worker-machine", tmp_path / "client-machine"
    settings = Settings.from_env(worker_env | {"DEEPRESEARCH_DATA_DIR": str(worker_dir)})
    worker_client = await connect_when_ready(Connection(address=dev_server.address, data_dir=worker_dir))
    client = await connect_when_ready(Connection(address=dev_server.address, data_dir=client_dir))
    # ~300 KB of rows that differ (a reply that repeats itself is cut as a loop), in a code block: a
    # listing, not statements (as prose its made-up figures would be invention, and the report refused)
    script.report_extra = (
        "\n\nAppendix:\n```\n" + "".join(f"long table row {i} | {i * 7} | {i * 13} |\n" for i in range(8_000)) + "```\n"
    )
    worker, held = build_worker(worker_client, settings, task_queue, max_cached_workflows=0)
    try:
        async with worker:
            handle = await start(client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
            result = await handle.result()
    finally:
        await held.close_all()
    assert result.status == "completed"
    assert "long table row" in result.final_report and len(result.final_report) > 200_000
    keys = bucket_keys(s3_server, bucket)
    assert any(f"/wi/{handle.id}/" in key for key in keys), keys
    history = await handle.fetch_history()
    completed = history.events[-1].workflow_execution_completed_event_attributes
    assert completed.result.payloads[0].ByteSize() < 2_000  # a claim, not the report
    assert not (worker_dir / "payloads").exists() and not (client_dir / "payloads").exists()
    assert os.environ[PAYLOAD_BUCKET_ENV] == bucket
    # Crawled pages and conversations went to the bucket too, and came back:
    # the report holds the fact only the crawled page's body has.
    assert FACT in result.final_report
    assert any(key.startswith("blobs/") for key in keys) and not (worker_dir / "blobs").exists()


# --- the container's process: python worker.py -------------------------------


def test_worker_stops_gracefully_on_sigterm(dev_server, worker_env, task_queue):
    """Docker stops a container with SIGTERM to PID 1 (`python worker.py`),
    which ignores it unless handled: the worker must shut down and exit 0."""
    import signal

    env = worker_env | {"DEEPRESEARCH_SHUTDOWN_GRACE_SECONDS": "5", "DEEPRESEARCH_MAX_CONCURRENT_ACTIVITIES": "4"}
    process = subprocess.Popen(
        [sys.executable, "worker.py"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        first = process.stdout.readline()
        assert first.startswith(f"worker on {dev_server.address} (namespace default), task queue {task_queue}"), first
        assert "large payloads: " in first and "tracing: off" in first
        assert f"blobs: {worker_env['DEEPRESEARCH_DATA_DIR']}/blobs;" in first
        time.sleep(2)  # connected and polling
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()


def test_worker_rejects_bad_limits_with_one_line(worker_env):
    env = worker_env | {"DEEPRESEARCH_ACTIVITIES_PER_SECOND": "fast"}
    out = subprocess.run([sys.executable, "worker.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip() == "error: DEEPRESEARCH_ACTIVITIES_PER_SECOND must be a positive number, got 'fast'"
