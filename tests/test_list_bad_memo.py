"""`list` with a run whose memo is not valid JSON (written by another
client): the row shows what can be read, and no other row is hidden, on the
quick way and through the full client alike. And output into a pipe whose
reader has gone ends quietly."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

from temporalio.api.common.v1 import Payload, WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from client import quick
from client.commands.list_runs import QUERY, full
from infra.connection import Connection
from testkit.runs import polled

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


async def listed_soon(client, *workflow_ids: str) -> None:
    """Wait until the runs show in a listing: the visibility store learns of
    a new run a moment after it starts (CI once listed one run but not the
    other, started a millisecond later)."""

    async def listing() -> set[str]:
        return {run.id async for run in client.list_workflows(QUERY, limit=100)}

    seen = await polled(listing, lambda seen: seen.issuperset(workflow_ids), seconds=30)
    assert seen.issuperset(workflow_ids), f"{set(workflow_ids) - seen} never showed in a listing"


async def test_a_memo_that_is_not_json_hides_no_row(temporal_client, worker_env):
    tag = uuid.uuid4().hex[:8]
    good, bad = f"good-memo-{tag}", f"bad-memo-{tag}"
    await start_raw(temporal_client, good, b'"a readable question"')
    await start_raw(temporal_client, bad, b"{this is not json")
    try:
        await listed_soon(temporal_client, good, bad)
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


async def test_another_runs_escape_sequences_are_shown_not_obeyed(temporal_client, worker_env):
    """Another client's run may hold terminal controls in its id and memo (a
    screen clear, a cursor move, a clipboard write): `list` shows them as
    symbols; none reaches the terminal, even with colours forced on."""
    tag = uuid.uuid4().hex[:8]
    hostile = f"evil-{tag}\x1b[2J\x1b[1A"
    await start_raw(temporal_client, hostile, b'"clear \\u001b[2J and \\u001b]52;c;ZXZpbA==\\u0007 copy"')
    try:
        await listed_soon(temporal_client, hostile)
        env = worker_env | {"COLUMNS": "200", "FORCE_COLOR": "1", "TTY_COMPATIBLE": "1"}
        code, out, err = await cli(env, "list", "--limit", "100")
        assert code == 0 and not err, err
        assert f"evil-{tag}\u241b[2J\u241b[1A" in out and "clear \u241b[2J and \u241b]52;c;ZXZpbA==\u2407 copy" in out
        row = next(line for line in out.splitlines() if f"evil-{tag}" in line)
        assert "\x1b[2J" not in row and "\x1b[1A" not in row and "\x1b]" not in row
    finally:
        await temporal_client.get_workflow_handle(hostile).terminate("test over")


async def test_status_into_a_pipe_whose_reader_has_gone_ends_quietly(temporal_client, task_queue, worker, worker_env):
    """``deepresearch status ID --json | head -c 300``: the reader goes away
    after a few bytes; no traceback (``list`` goes through rich, which already
    ended quietly; ``status --json`` printed a BrokenPipeError traceback)."""
    from testkit.runs import start

    handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
    await handle.result()
    reader, writer = os.pipe()
    os.close(reader)  # gone before the first line is written
    proc = await asyncio.create_subprocess_exec(
        str(CLI), "status", handle.id, "--json", env=worker_env, stdout=writer, stderr=asyncio.subprocess.PIPE
    )
    os.close(writer)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert not err.decode().strip(), err.decode()[-2000:]
    assert proc.returncode != 0
