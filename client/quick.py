"""The quick way to a run, for the commands people type most (`start`,
`status`, `review`, `answer`, `list`): the request goes straight to
Temporal's gRPC service (``temporalio.service``), its arguments written and
its answer read as plain JSON.

The SDK's full client, the project's data converter (pydantic, external
payload storage) and the models take more than half of such a command's
time, and a small answer in plain JSON needs none of them. Whatever is not
plain raises ``NotQuick`` and the command takes the full client instead:
tracing is on (the spans come from the full client's interceptor), an
answer or argument belongs in external storage, an update is still waiting
for a worker, a query failed in the worker. Errors from Temporal (no such
run, no worker) are the same ``RPCError`` the full client raises, and a start
whose id is taken the same ``WorkflowAlreadyStartedError``.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.enums.v1 import (
    UpdateWorkflowExecutionLifecycleStage,
    WorkflowExecutionStatus,
    WorkflowIdReusePolicy,
)
from temporalio.api.errordetails.v1 import WorkflowExecutionAlreadyStartedFailure
from temporalio.api.update.v1 import Input, Meta, Request, WaitPolicy
from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    ListWorkflowExecutionsRequest,
    QueryWorkflowRequest,
    StartWorkflowExecutionRequest,
    UpdateWorkflowExecutionRequest,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import ConnectConfig, RPCError, RPCStatusCode, ServiceClient

from client.errors import UpdateRejected
from infra.connection import Connection, connection_failed
from infra.settings import PAYLOAD_THRESHOLD
from infra.tracing import tracing_enabled

# What the project's converter writes for a payload kept in history.
PLAIN_JSON = {"encoding": b"json/plain"}
COMPLETED = UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED
UPDATE_WAIT = timedelta(seconds=25)


class NotQuick(Exception):
    """Not for the quick way: take the full client."""


async def service(conn: Connection) -> ServiceClient:
    if tracing_enabled(os.environ):
        raise NotQuick("tracing is on")
    config = ConnectConfig(target_host=conn.address, **conn.connect_options())
    try:
        return await ServiceClient.connect(config)
    except Exception as err:  # the SDK raises RuntimeError with a long chain
        raise connection_failed(conn, err) from None


async def query(conn: Connection, workflow_id: str, name: str, timeout: timedelta) -> Any:
    """The answer to query ``name`` (no arguments), as decoded JSON."""
    request = QueryWorkflowRequest(namespace=conn.namespace, execution=WorkflowExecution(workflow_id=workflow_id))
    request.query.query_type = name
    client = await service(conn)
    try:
        response = await client.workflow_service.query_workflow(request, retry=True, timeout=timeout)
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:  # the query failed in the worker
            raise NotQuick(err.message) from None
        raise
    if response.HasField("query_rejected"):
        raise NotQuick("query rejected")
    return plain(response.query_result.payloads)


async def start(
    client: ServiceClient,
    conn: Connection,
    workflow_type: str,
    workflow_id: str,
    arg: object,
    *,
    memo: Mapping[str, object],
    summary: str,
    details: str,
    keywords: Mapping[str, str | list[str]],
) -> None:
    """Start workflow ``workflow_type`` with one argument (plain JSON), as the
    full client's ``start_workflow`` does with the project's converter: the
    memo, the Temporal UI's summary and details, Keyword search attributes
    (a list: KeywordList),
    a run with the same id refused while it runs (``WorkflowAlreadyStartedError``)."""
    request = StartWorkflowExecutionRequest(
        namespace=conn.namespace,
        workflow_id=workflow_id,
        identity=client.config.identity,
        request_id=str(uuid.uuid4()),  # a retried request starts one run
        workflow_id_reuse_policy=WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
    )
    request.workflow_type.name = workflow_type
    request.task_queue.name = conn.task_queue
    request.input.payloads.append(payload(arg))
    for key, value in memo.items():
        request.memo.fields[key].CopyFrom(payload(value))
    for key, value in keywords.items():
        request.search_attributes.indexed_fields[key].CopyFrom(payload(value))
        kind = b"KeywordList" if isinstance(value, list) else b"Keyword"
        request.search_attributes.indexed_fields[key].metadata["type"] = kind
    request.user_metadata.summary.CopyFrom(payload(summary))
    request.user_metadata.details.CopyFrom(payload(details))
    try:
        await client.workflow_service.start_workflow_execution(request, retry=True)
    except RPCError as err:
        taken = WorkflowExecutionAlreadyStartedFailure()
        if err.status == RPCStatusCode.ALREADY_EXISTS and err.grpc_status.details:
            if err.grpc_status.details[0].Unpack(taken):
                raise WorkflowAlreadyStartedError(workflow_id, workflow_type, run_id=taken.run_id) from None
        raise


async def update(conn: Connection, workflow_id: str, name: str, args: Sequence[object], update_id: str) -> Any:
    """The result of update ``name``, sent with ``update_id`` (the full client,
    if it takes over, sends the same id, and Temporal runs the update once).
    A workflow's rejection raises ``UpdateRejected`` with its reason."""
    payloads = [payload(arg) for arg in args]
    client = await service(conn)
    request = UpdateWorkflowExecutionRequest(
        namespace=conn.namespace,
        workflow_execution=WorkflowExecution(workflow_id=workflow_id),
        request=Request(meta=Meta(update_id=update_id, identity=client.config.identity), input=Input(name=name)),
        wait_policy=WaitPolicy(lifecycle_stage=COMPLETED),
    )
    request.request.input.args.payloads.extend(payloads)
    try:  # Temporal answers "not finished" after about 20 s without a worker
        response = await client.workflow_service.update_workflow_execution(request, retry=True, timeout=UPDATE_WAIT)
    except RPCError as err:
        if err.status == RPCStatusCode.DEADLINE_EXCEEDED:
            raise NotQuick("the update has not finished") from None
        raise
    if not response.HasField("outcome"):
        raise NotQuick("the update has not finished")
    if response.outcome.HasField("failure"):
        failure = response.outcome.failure
        if failure.HasField("encoded_attributes") or not failure.message:
            raise NotQuick("the failure needs the converter")
        raise UpdateRejected(failure.message)
    return plain(response.outcome.success.payloads)


@dataclass(frozen=True)
class Listed:
    """A workflow as ``list`` shows it: what the full client's
    ``list_workflows`` and ``describe`` give, in plain values."""

    id: str
    workflow_type: str
    status: str  # running, completed, failed, canceled, terminated, continued_as_new, timed_out
    start_time: datetime
    memo: dict[str, Any]
    search_attributes: dict[str, Any]
    task_attempts: int = 0  # of its pending workflow task (running workflows only)


async def list_workflows(conn: Connection, query: str, limit: int) -> list[Listed]:
    """The first ``limit`` workflows matching the visibility ``query``, each
    running one with the attempts of its pending workflow task."""
    client = await service(conn)
    request = ListWorkflowExecutionsRequest(namespace=conn.namespace, query=query, page_size=limit)
    infos = list((await client.workflow_service.list_workflow_executions(request, retry=True)).executions)[:limit]

    async def attempts(info: WorkflowExecutionInfo) -> int:
        if info.status != WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING:
            return 0
        described = await client.workflow_service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(namespace=conn.namespace, execution=info.execution), retry=True
        )
        return described.pending_workflow_task.attempt

    found = await asyncio.gather(*(attempts(info) for info in infos), return_exceptions=True)
    return [
        Listed(
            id=info.execution.workflow_id,
            workflow_type=info.type.name,
            status=WorkflowExecutionStatus.Name(info.status).removeprefix("WORKFLOW_EXECUTION_STATUS_").lower(),
            start_time=info.start_time.ToDatetime(tzinfo=UTC),
            memo=readable(info.memo.fields),
            search_attributes=readable(info.search_attributes.indexed_fields),
            task_attempts=n if isinstance(n, int) else 0,  # gone meanwhile: not stuck
        )
        for info, n in zip(infos, found, strict=True)
    ]


UNREADABLE = "(unreadable)"  # a memo value or search attribute that is not valid JSON


def readable(fields: Mapping[str, Payload]) -> dict[str, Any]:
    """Memo values or search attributes, decoded; one that is not valid JSON
    (written by another client) reads as ``UNREADABLE``, so one bad row never
    hides the others."""
    values: dict[str, Any] = {}
    for key, given in fields.items():
        try:
            values[key] = value_of(given)
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            values[key] = UNREADABLE
    return values


def value_of(given: Payload) -> Any:
    """A memo value or search attribute (plain JSON, a search attribute with its type)."""
    if given.metadata.get("encoding") != PLAIN_JSON["encoding"]:
        raise NotQuick("a memo or search attribute that is not plain JSON")
    return json.loads(given.data)


def payload(value: object) -> Payload:
    """``value`` as plain JSON, as the project's converter writes it; one too
    large for history belongs in external storage, which takes the full client."""
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    if len(data) > PAYLOAD_THRESHOLD:
        raise NotQuick("an argument too large for history")
    return Payload(metadata=PLAIN_JSON, data=data)


def plain(payloads: Sequence[Payload]) -> Any:
    """One payload of plain JSON, decoded."""
    if len(payloads) != 1 or dict(payloads[0].metadata) != PLAIN_JSON:
        raise NotQuick("not one payload of plain JSON")
    return json.loads(payloads[0].data)


class Fields:
    """Decoded JSON read the way the model it was dumped from is read
    (``status.steps[0].title``), so the display takes it in the model's place.
    A field the JSON lacks (a worker older than this CLI) raises
    AttributeError, where the model would have filled in a default."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        try:
            return _fields(self._data[name])
        except KeyError:
            raise AttributeError(name) from None


def _fields(value: Any) -> Any:
    if isinstance(value, dict):
        return Fields(value)
    if isinstance(value, list):
        return [_fields(item) for item in value]
    return value
