"""`list` with a run whose memo is not valid JSON (written by another
client): the row shows what can be read, and no other row is hidden, on the
quick way and through the full client alike."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

from temporalio.api.common.v1 import Payload, WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from client import quick
from client.commands.list_runs import QUERY, full
from infra.connection import Connection

CLI = Path(sys.executable).parent / "deepresearch"
PLAIN = {"encoding": b"json/plain"}


async def cli(env: dict, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(CLI), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


async def start_raw(client, workflow_id: str, question: bytes) -> None:
    """A DeepResearch run started by hand, with the memo as given, on a task
    queue no worker polls (it stays running)."""
    request = StartWorkflowExecutionRequest(
        namespace=client.namespace,
        workflow_id=workflow_id,
        workflow_type=WorkflowType(name="DeepResearch"),
        task_queue=TaskQueue(name=f"nobody-{uuid.uuid4().hex[:8]}"),
        input={"payloads": [Payload(metadata=PLAIN, data=b'{"question": "x"}')]},
        request_id=str(uuid.uuid4()),
    )
    request.memo.fields["question"].CopyFrom(Payload(metadata=PLAIN, data=question))
    await client.workflow_service.start_workflow_execution(request)


async def test_a_memo_that_is_not_json_hides_no_row(temporal_client, worker_env):
    tag = uuid.uuid4().hex[:8]
    good, bad = f"good-memo-{tag}", f"bad-memo-{tag}"
    await start_raw(temporal_client, good, b'"a readable question"')
    await start_raw(temporal_client, bad, b"{this is not json")
    try:
        conn = Connection.from_env(worker_env)
        for listed in (await quick.list_workflows(conn, QUERY, 100), await full(conn, QUERY, 100)):
            memos = {run.id: run.memo for run in listed}
            assert memos[good] == {"question": "a readable question"}
            assert memos[bad] == {"question": quick.UNREADABLE}
        code, out, err = await cli(worker_env | {"COLUMNS": "200"}, "list", "--limit", "100")
        assert code == 0 and not err, err
        assert good in out and bad in out and "a readable question" in out and quick.UNREADABLE in out
    finally:
        for workflow_id in (good, bad):
            await temporal_client.get_workflow_handle(workflow_id).terminate("test over")
