"""What the data dir keeps, and for how long: private (0700), cells kept by
reference rather than resent, and `deepresearch gc` for old blobs."""

from __future__ import annotations

import asyncio
import json
import stat
import sys
from pathlib import Path

from client.commands.gc import touch
from infra.settings import private_dir
from testkit.llm_server import Reply, tool_messages
from testkit.runs import start

CLI = Path(sys.executable).parent / "deepresearch"


async def cli(env: dict, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(CLI), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


def test_20_the_data_dir_is_private(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)
    assert stat.S_IMODE(private_dir(folder).stat().st_mode) == 0o700
    assert stat.S_IMODE(private_dir(tmp_path / "new" / "data").stat().st_mode) == 0o700


async def test_19_a_long_code_session_sends_its_cells_by_reference(temporal_client, task_queue, worker, llm, script):
    """Ten cells of 3 KB: each run_python call carries references to the
    earlier cells, not their code, so history grows with new code only."""
    cells = [f"x{i} = {i}\n" + "# " + "padding " * 375 + f"\nprint('cell {i} ok')" for i in range(10)]

    def coder(request):
        done = len(tool_messages(request))
        if done < len(cells):
            return Reply(tool_calls=[("run_python", {"code": cells[done]})])
        return "Computed:\n" + "\n".join(m["content"] for m in tool_messages(request))

    script.coder = coder
    handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
    result = await asyncio.wait_for(handle.result(), 120)
    assert result.status == "completed" and "cell 9 ok" in result.final_report
    inputs = [
        e.activity_task_scheduled_event_attributes.input.payloads[0]
        for e in (await handle.fetch_history()).events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "run_python"
    ]
    requests = [json.loads(p.data) for p in inputs]
    assert len(requests) == 10
    assert requests[-1]["previous"] == [] and len(requests[-1]["previous_refs"]) == 9
    assert all(len(p.data) < 4_500 for p in inputs)  # one cell's code, never all of them


async def test_gc_deletes_only_what_no_kept_run_can_need(worker_env, temporal_client, task_queue, worker, script):
    data = Path(worker_env["DEEPRESEARCH_DATA_DIR"])
    handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
    await handle.result()
    blobs = [p for p in (data / "blobs").rglob("*") if p.is_file()]
    assert blobs
    old = data / "blobs" / "00" / ("0" * 64)
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_text("a page nobody needs any more")
    touch(old, days_ago=400)
    # The dev server keeps this session's runs, all started minutes ago:
    # only the file from before them goes, whatever --older-than says.
    code, out, err = await cli(worker_env, "gc", "--older-than", "0", "--dry-run")
    assert code == 0 and "would delete 1 stored file(s)" in out and old.exists()
    code, out, err = await cli(worker_env, "gc", "--older-than", "0")
    assert code == 0 and "deleted 1 stored file(s)" in out, out + err
    assert not old.exists() and all(p.exists() for p in blobs)
