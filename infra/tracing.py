"""OpenTelemetry tracing through the SDK's ``contrib.opentelemetry`` interceptor.

Off by default. On when the standard OpenTelemetry variables ask for it:

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
  set: spans go to that OTLP collector (``http/protobuf``; set
  ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc`` with the gRPC exporter installed);
- ``OTEL_TRACES_EXPORTER`` = ``otlp``, ``console`` (stdout) or ``none``
  (comma-separated for several); ``OTEL_SDK_DISABLED=true`` turns tracing off.

``OTEL_SERVICE_NAME`` names the service (default ``deepresearch``); headers,
timeouts and certificates come from the usual ``OTEL_EXPORTER_OTLP_*``
variables, read by the exporter. Needs the ``tracing`` extra:
``pip install 'deepresearch-temporal[tracing]'``.

``infra.temporal.connect`` puts the interceptor on every client; a worker
built on such a client inherits it, so the CLI traces ``StartWorkflow`` and
the worker traces ``RunWorkflow:DeepResearch`` and one ``RunActivity:<name>``
span per activity (chat, web_search, crawl, run_python…), all in one trace.
Workflow spans are created only under a client span (runs started by a
client with tracing on), as the SDK's interceptor does by default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from infra.errors import ConfigError

TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
EXPORTER_ENV = "OTEL_TRACES_EXPORTER"
DEFAULT_SERVICE_NAME = "deepresearch"
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318/v1/traces"
INSTALL_HINT = "pip install 'deepresearch-temporal[tracing]'"

_lock = threading.Lock()
_global_tracer: Any = None  # the tracer this process configured, once
_own_provider: Any = None  # the TracerProvider we installed, for flush_tracing()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def exporter_names(env: Mapping[str, str] | None = None) -> list[str]:
    """The span exporters the environment asks for; [] when tracing is off."""
    env = os.environ if env is None else env
    if _truthy(env.get("OTEL_SDK_DISABLED")):
        return []
    names = [n.strip().lower() for n in (env.get(EXPORTER_ENV) or "").split(",") if n.strip()]
    if names:
        return [n for n in names if n != "none"]
    if (env.get(ENDPOINT_ENV) or "").strip() or (env.get(TRACES_ENDPOINT_ENV) or "").strip():
        return ["otlp"]
    return []


def tracing_enabled(env: Mapping[str, str] | None = None) -> bool:
    return bool(exporter_names(env))


def tracing_interceptors(env: Mapping[str, str] | None = None, *, exporter: Any = None) -> list[Any]:
    """``[TracingInterceptor]`` when tracing is on, else ``[]``.

    With ``exporter`` (a ``SpanExporter``, e.g. the SDK's in-memory one in
    tests) the spans go there through a private provider, whatever the
    environment says; otherwise the process-wide provider is configured once
    from the environment and installed as the global tracer provider (an SDK
    provider that is already installed, e.g. by ``opentelemetry-instrument``,
    is used as it is)."""
    env = os.environ if env is None else env
    if exporter is None and not tracing_enabled(env):
        return []
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from temporalio.contrib.opentelemetry import TracingInterceptor
    except ImportError:
        raise ConfigError(f"tracing is on (OTEL_* is set) but OpenTelemetry is not installed: {INSTALL_HINT}") from None
    if exporter is not None:
        provider = TracerProvider(resource=_resource(env))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        return [TracingInterceptor(provider.get_tracer(__name__))]
    return [TracingInterceptor(_configure_global(env))]


def _resource(env: Mapping[str, str]) -> Any:
    from opentelemetry.sdk.resources import Resource

    return Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME})


def _configure_global(env: Mapping[str, str]) -> Any:
    global _global_tracer, _own_provider
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    with _lock:
        if _global_tracer is not None:
            return _global_tracer
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            provider = current  # configured by the host application
        else:
            exporters = [_make_exporter(name, env) for name in exporter_names(env)]
            provider = TracerProvider(resource=_resource(env))
            for exporter in exporters:
                provider.add_span_processor(BatchSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            _own_provider = provider
        _global_tracer = provider.get_tracer(__name__)
        return _global_tracer


def _make_exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ConfigError(f"{EXPORTER_ENV}={name!r} is not supported: use otlp, console or none")
    protocol = (
        (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf")
        .strip()
        .lower()
    )
    traces_endpoint = (env.get(TRACES_ENDPOINT_ENV) or "").strip()
    endpoint = (env.get(ENDPOINT_ENV) or "").strip()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter: "
                "pip install opentelemetry-exporter-otlp-proto-grpc (or use http/protobuf)"
            ) from None
        return OTLPSpanExporter(endpoint=traces_endpoint or endpoint or None)
    if protocol not in ("http/protobuf", "http"):
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported: use http/protobuf or grpc")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise ConfigError(f"tracing to OTLP needs the OTLP exporter: {INSTALL_HINT}") from None
    if not traces_endpoint:
        traces_endpoint = f"{endpoint.rstrip('/')}/v1/traces" if endpoint else DEFAULT_HTTP_ENDPOINT
    return OTLPSpanExporter(endpoint=traces_endpoint)


def flush_tracing(timeout_millis: int = 5000) -> None:
    """Export the spans still buffered. The provider flushes at normal
    interpreter exit by itself; call this before ``os._exit``."""
    provider = _own_provider
    if provider is not None:
        provider.force_flush(timeout_millis)
