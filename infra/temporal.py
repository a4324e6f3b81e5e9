"""Connecting to Temporal with the project's data converter (pydantic JSON
plus external payload storage) and, when OTEL_* asks for it, tracing. Where
Temporal is and the credentials come from infra/connection.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio.client import Client

from infra.connection import Connection, connection_failed
from infra.converter import data_converter
from infra.payload_storage import check_payload_storage
from infra.tracing import tracing_interceptors


async def connect(conn: Connection) -> Client:
    """A client with the project's converter, TLS / API key from the standard
    Temporal variables, and the tracing interceptor when OTEL_* asks for it
    (a worker built on this client inherits the interceptor)."""
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
        raise connection_failed(conn, err) from None
    await check_payload_storage()
    return client
