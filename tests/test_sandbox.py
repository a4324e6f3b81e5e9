"""The local Python sandbox and its run_python / close_sandbox activities."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from temporalio.testing import ActivityEnvironment

from activities.sandbox import LocalSandbox, SandboxActivities
from workflows.models import CodeRequest


@pytest.fixture
async def sandbox():
    box = LocalSandbox()
    yield box
    await box.close_all()


async def test_state_persists_within_a_session(sandbox):
    assert (await sandbox.run("s", "x = 20")).error is None
    result = await sandbox.run("s", "x += 1\nprint(x * 2)", ["x = 20"])
    assert result.stdout == "42\n"
    assert result.error is None


async def test_sessions_do_not_share_state(sandbox):
    await sandbox.run("a", "secret = 1")
    result = await sandbox.run("b", "print('secret' in globals())")
    assert result.stdout == "False\n"


async def test_computes_and_echoes_last_expression(sandbox):
    code = "total = sum(i * i for i in range(1, 1001))\nprint(total)\ntotal + 1"
    result = await sandbox.run("s", code)
    assert result.stdout == "333833500\n333833501\n"


async def test_exception_is_reported_with_traceback(sandbox):
    result = await sandbox.run("s", "def f(d):\n    return d['missing']\nf({})")
    assert "Traceback" in result.error and "KeyError: 'missing'" in result.error
    assert "return d['missing']" in result.error  # the user's source line
    assert "<string>" not in result.error  # driver frames are trimmed
    # The session survives; a failed cell does not count as run.
    assert (await sandbox.run("s", "print(f)")).stdout.startswith("<function f")


async def test_wall_time_limit_kills_the_session():
    box = LocalSandbox(timeout=1)
    try:
        await box.run("s", "x = 1")
        started = time.monotonic()
        result = await box.run("s", "while True:\n    pass", ["x = 1"])
        assert time.monotonic() - started < 5
        assert "TimeoutError" in result.error and "1 s" in result.error
        # The process is gone; the next call rebuilds it from ``previous``.
        assert (await box.run("s", "print(x)", ["x = 1"])).stdout == "1\n"
    finally:
        await box.close_all()


async def test_memory_limit_raises_memory_error(sandbox):
    result = await sandbox.run("s", "big = bytearray(4 * 1024**3)")
    assert "MemoryError" in result.error
    assert (await sandbox.run("s", "print('alive')")).stdout == "alive\n"


async def test_child_environment_is_clean(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-test")
    code = "import os\nprint(sorted(os.environ))\nprint(os.environ.get('OPENAI_API_KEY'))"
    result = await sandbox.run("s", code)
    assert "sk-secret-test" not in result.stdout
    assert "OPENAI_API_KEY" not in result.stdout
    assert "PATH" in result.stdout


async def test_cwd_is_a_private_temp_dir_removed_on_close(sandbox):
    code = "import os\nopen('data.csv', 'w').write('a,b')\nprint(os.getcwd())\nprint(os.environ['HOME'])"
    result = await sandbox.run("s", code)
    cwd, home = result.stdout.split()
    assert cwd == home and cwd != os.getcwd()
    assert os.path.exists(os.path.join(cwd, "data.csv"))
    other = (await sandbox.run("t", "import os; print(os.getcwd())")).stdout.strip()
    assert other != cwd
    await sandbox.close("s")
    assert not os.path.exists(cwd)


async def test_replay_restores_variables_silently(sandbox):
    cells = ["print('once')\nx = 40", "y = x + 2"]
    await sandbox.run("s", cells[0])
    await sandbox.run("s", cells[1], cells[:1])
    await sandbox.close("s")  # as if another worker picked up the step
    result = await sandbox.run("s", "print(x, y)", cells)
    assert result.stdout == "40 42\n"  # no "once": replayed output is dropped


async def test_cell_count_mismatch_restarts_and_replays(sandbox):
    await sandbox.run("s", "n = 1")
    await sandbox.run("s", "n += 1", ["n = 1"])  # the workflow never recorded this one
    result = await sandbox.run("s", "n += 1\nprint(n)", ["n = 1"])
    assert result.stdout == "2\n"


async def test_output_is_truncated(sandbox):
    code = "print('x' * 50_000)\nimport sys\nsys.stderr.write('#' * 30_000)"
    result = await sandbox.run("s", code)
    assert result.stdout == "x" * 20_000 + "\n... [output truncated]"
    assert result.stderr == "#" * 20_000 + "\n... [output truncated]"


async def test_idle_sessions_are_reaped():
    box = LocalSandbox(idle_timeout=0.2)
    try:
        cwd = (await box.run("s", "import os; print(os.getcwd())")).stdout.strip()
        await asyncio.sleep(0.8)
        assert not os.path.exists(cwd)
        assert (await box.run("s", "print('new')")).stdout == "new\n"
    finally:
        await box.close_all()


async def test_run_python_activity(sandbox):
    acts = SandboxActivities(sandbox)
    code = "import math\nprint(math.factorial(20))"
    ok = await acts.run_python(CodeRequest(session="step-1", code=code))
    assert ok.content == "2432902008176640000" and not ok.error

    failed = await acts.run_python(CodeRequest(session="step-1", code="print('before')\n1 / 0"))
    assert failed.error
    assert failed.content.startswith("before\n[error]\nTraceback")
    assert "ZeroDivisionError" in failed.content

    empty = await acts.run_python(CodeRequest(session="step-1", code="z = 1", previous=[]))
    assert "no output" in empty.content and not empty.error

    await acts.close_sandbox("step-1")
    await acts.close_sandbox("never-opened")


async def test_run_python_heartbeats_inside_an_activity(sandbox):
    acts = SandboxActivities(sandbox)
    acts.heartbeat_every = 0.1
    env = ActivityEnvironment()
    beats = []
    env.on_heartbeat = lambda *details: beats.append(details)
    request = CodeRequest(session="s", code="import time; time.sleep(0.5); print('done')")
    result = await env.run(acts.run_python, request)
    assert result.content == "done"
    assert len(beats) >= 3


async def test_cpu_limit_ends_the_process():
    box = LocalSandbox(cpu_seconds=1)
    try:
        result = await box.run("s", "while True:\n    pass")
        assert "SIGXCPU" in result.error and "CPU time limit" in result.error
    finally:
        await box.close_all()
