"""Connecting to Temporal with the project's data converter.

The same converter (pydantic JSON + external payload storage under the data
dir) is used by the CLI, the worker, the tests and the replayer.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, ExternalStorage

from activities.settings import data_dir
from client.payload_storage import FileStorageDriver
from workflows.models import PHASE_ATTRIBUTE, ResearchInput, ResearchResult

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "deep-research"
WORKFLOW_TYPE = "DeepResearch"
# Payloads above this size go to external storage (the SDK warns at 512 KiB).
PAYLOAD_THRESHOLD = 128 * 1024


class ConnectionFailed(RuntimeError):
    """One line saying which server could not be reached and what to set."""


@dataclass(frozen=True)
class Connection:
    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = DEFAULT_TASK_QUEUE
    data_dir: Path = Path(".")
    address_given: bool = False  # set explicitly (flag or env), not the default

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
        return cls(
            address=address or env_address or DEFAULT_ADDRESS,
            namespace=namespace or env.get("TEMPORAL_NAMESPACE") or DEFAULT_NAMESPACE,
            task_queue=task_queue or env.get("DEEPRESEARCH_TASK_QUEUE") or DEFAULT_TASK_QUEUE,
            data_dir=data_dir(env),
            address_given=bool(address or env_address),
        )


def data_converter(root: Path) -> DataConverter:
    storage = ExternalStorage(
        drivers=[FileStorageDriver(root / "payloads")],
        payload_size_threshold=PAYLOAD_THRESHOLD,
    )
    return dataclasses.replace(pydantic_data_converter, external_storage=storage)


async def connect(conn: Connection) -> Client:
    try:
        return await Client.connect(
            conn.address,
            namespace=conn.namespace,
            data_converter=data_converter(conn.data_dir),
        )
    except Exception as err:  # the SDK raises RuntimeError with a long chain
        raise ConnectionFailed(
            f"cannot reach Temporal at {conn.address} (namespace {conn.namespace}): "
            f"{str(err).splitlines()[0][:200]}; set TEMPORAL_ADDRESS or --address, "
            "or run `deepresearch server`"
        ) from None


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
