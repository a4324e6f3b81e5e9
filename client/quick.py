"""The quick way to a run, for the commands people type most (`status`,
`review`, `answer`): the query or update goes straight to Temporal's gRPC
service (``temporalio.service``) and its answer is read as plain JSON.

The SDK's full client, the project's data converter (pydantic, external
payload storage) and the models take more than half of such a command's
time, and a small answer in plain JSON needs none of them. Whatever is not
plain raises ``NotQuick`` and the command takes the full client instead:
tracing is on (the spans come from the full client's interceptor), an
answer or argument belongs in external storage, an update is still waiting
for a worker, a query failed in the worker. Errors from Temporal (no such run, no worker) are the
same ``RPCError`` the full client raises.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.enums.v1 import UpdateWorkflowExecutionLifecycleStage
from temporalio.api.update.v1 import Input, Meta, Request, WaitPolicy
from temporalio.api.workflowservice.v1 import QueryWorkflowRequest, UpdateWorkflowExecutionRequest
from temporalio.service import ConnectConfig, RPCError, RPCStatusCode, ServiceClient

from client.errors import UpdateRejected
from infra.connection import Connection, connection_failed
from infra.settings import PAYLOAD_THRESHOLD
from infra.tracing import tracing_enabled

# What the project's converter writes for a payload kept in history.
PLAIN_JSON = {"encoding": b"json/plain"}
COMPLETED = UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED


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


async def update(conn: Connection, workflow_id: str, name: str, args: Sequence[object], update_id: str) -> Any:
    """The result of update ``name``, sent with ``update_id`` (the full client,
    if it takes over, sends the same id, and Temporal runs the update once).
    A workflow's rejection raises ``UpdateRejected`` with its reason."""
    payloads = []
    for arg in args:
        data = json.dumps(arg, ensure_ascii=False, separators=(",", ":")).encode()
        if len(data) > PAYLOAD_THRESHOLD:  # for external storage, not history
            raise NotQuick("an argument too large for history")
        payloads.append(Payload(metadata=PLAIN_JSON, data=data))
    client = await service(conn)
    request = UpdateWorkflowExecutionRequest(
        namespace=conn.namespace,
        workflow_execution=WorkflowExecution(workflow_id=workflow_id),
        request=Request(meta=Meta(update_id=update_id, identity=client.config.identity), input=Input(name=name)),
        wait_policy=WaitPolicy(lifecycle_stage=COMPLETED),
    )
    request.request.input.args.payloads.extend(payloads)
    response = await client.workflow_service.update_workflow_execution(request, retry=True)
    if not response.HasField("outcome"):
        raise NotQuick("the update has not finished")
    if response.outcome.HasField("failure"):
        failure = response.outcome.failure
        if failure.HasField("encoded_attributes") or not failure.message:
            raise NotQuick("the failure needs the converter")
        raise UpdateRejected(failure.message)
    return plain(response.outcome.success.payloads)


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
