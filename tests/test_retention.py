"""What the data dir keeps, and for how long: private (0700), cells kept by
reference rather than resent, and `deepresearch gc` for old blobs."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from client.commands.gc import touch
from client.devserver import free_port
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


NOBODY = 65534


def readable_by_nobody(path: Path) -> bool:
    return subprocess.run(["cat", str(path)], user=NOBODY, capture_output=True, timeout=10).returncode == 0


@pytest.fixture
def open_folder():
    """A folder anyone may enter (unlike pytest's tmp_path), so only the data
    dir's own mode can keep others out."""
    if os.geteuid() != 0:
        pytest.skip("reading as another user needs root")
    folder = Path(tempfile.mkdtemp(prefix="open-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def test_20_after_a_real_run_the_data_dir_is_private(worker_env, script, open_folder):
    """`run` creates the data dir (embedded server, in-process worker): with
    the usual umask, nobody else can read the database or the reports."""
    data = open_folder / "data"
    env = {k: v for k, v in worker_env.items() if k not in ("TEMPORAL_ADDRESS", "DEEPRESEARCH_TASK_QUEUE")}
    env |= {
        "DEEPRESEARCH_DATA_DIR": str(data),
        "DEEPRESEARCH_DEV_SERVER_PORT": str(free_port()),
        "DEEPRESEARCH_DEV_UI_PORT": str(free_port()),
    }
    done = subprocess.run(
        [str(CLI), "run", "Hello!", "--id", "private-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        umask=0o022,
    )
    assert done.returncode == 0, done.stderr
    database, report = data / "temporal.db", data / "reports" / "private-run.md"
    assert database.exists() and "research assistant" in report.read_text()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    (open_folder / "control.txt").write_text("anyone may read this")
    (open_folder / "control.txt").chmod(0o644)
    assert readable_by_nobody(open_folder / "control.txt")  # the test can tell
    assert not readable_by_nobody(database) and not readable_by_nobody(report)


def test_20_a_worker_creates_the_data_dir_private(worker_env, open_folder):
    data = open_folder / "data"
    worker = subprocess.Popen(
        [str(CLI), "worker"],
        env=worker_env | {"DEEPRESEARCH_DATA_DIR": str(data)},
        umask=0o022,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not data.exists() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)


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
