"""The local Python sandbox and its run_python / close_sandbox activities."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time
import uuid
from contextlib import suppress

import pytest
from temporalio.testing import ActivityEnvironment

from activities.sandbox.activities import SandboxActivities
from activities.sandbox.local import LocalSandbox, SandboxRefused
from workflows.tool_models import CodeRequest


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


async def test_a_traceback_quotes_the_failing_line_after_a_form_feed_in_a_string(sandbox):
    """Python ends source lines at CR and LF only; a form feed or U+2028 in
    a string literal once shifted the quoted lines of a traceback."""
    result = await sandbox.run("s", "page = 'one\x0ctwo\u2028three'\ncount = 1\nraise KeyError('boom')")
    assert "raise KeyError('boom')" in result.error and "count = 1" not in result.error


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
    assert (await sandbox.run("s", "print(open('data.csv').read())", [code])).stdout == "a,b\n"
    if (await sandbox.isolation()).private_tmp:  # a tmpfs only the session sees
        assert not os.path.exists(os.path.join(cwd, "data.csv"))
    else:
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


# --- isolation -------------------------------------------------------------
#
# Each test checks the isolation where this machine allows it, and otherwise
# that the sandbox said so (one warning) and still works without it.

CONNECT = """
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    print("connected")
except OSError as e:
    print("failed:", type(e).__name__)
"""


@pytest.fixture
async def listener():
    """A TCP server on the worker's loopback that records every connection."""
    seen = []

    async def accept(reader, writer):
        seen.append(writer.get_extra_info("peername"))
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    server.seen = seen
    server.port = server.sockets[0].getsockname()[1]
    async with server:
        yield server


def warnings_of(caplog):
    return [
        r.getMessage() for r in caplog.records if r.name == "activities.sandbox.local" and r.levelno == logging.WARNING
    ]


async def test_code_cannot_open_network_connections(sandbox, listener, caplog):
    isolation = await sandbox.isolation()
    result = await sandbox.run("s", CONNECT.format(port=listener.port))
    await asyncio.sleep(0.1)
    if isolation.network:
        assert result.stdout.startswith("failed:"), result
        assert listener.seen == []
        # Its own loopback works: code may still talk to itself.
        code = (
            "import socket\nserver = socket.create_server(('127.0.0.1', 0))\n"
            "socket.create_connection(server.getsockname(), timeout=2).close()\nprint('loopback ok')"
        )
        assert (await sandbox.run("s", code)).stdout == "loopback ok\n"
        # No name resolution either.
        code = "import socket\ntry:\n    socket.getaddrinfo('example.com', 443)\nexcept OSError:\n    print('no dns')"
        assert (await sandbox.run("s", code)).stdout == "no dns\n"
    else:  # no namespace here: the sandbox warned once and runs without one
        assert any("no network namespace" in w for w in warnings_of(caplog))
        assert result.stdout == "connected\n"
        assert len(listener.seen) == 1


async def test_without_namespaces_it_refuses_to_run_code(listener, caplog):
    box = LocalSandbox(unshare="/nonexistent/unshare")
    try:
        with pytest.raises(SandboxRefused, match="DEEPRESEARCH_SANDBOX=local-unisolated"):
            await box.run("a", CONNECT.format(port=listener.port))
        assert (await box.isolation()).refusal
        await asyncio.sleep(0.1)
        assert listener.seen == []
    finally:
        await box.close_all()


async def test_unisolated_runs_only_when_the_operator_says_so(listener, caplog):
    box = LocalSandbox(unshare="/nonexistent/unshare", allow_unisolated=True)
    try:
        result = await box.run("a", CONNECT.format(port=listener.port))
        assert result.stdout == "connected\n", result
        isolation = await box.isolation()
        assert not isolation.network and isolation.command == () and not isolation.refusal
        warnings = warnings_of(caplog)
        assert len(warnings) == 1 and "without isolation (local-unisolated)" in warnings[0]
    finally:
        await box.close_all()


async def test_network_flag_lets_code_connect(listener, caplog):
    box = LocalSandbox(network=True)
    try:
        assert (await box.run("s", CONNECT.format(port=listener.port))).stdout == "connected\n"
        assert not (await box.isolation()).network
        assert not any("network" in w for w in warnings_of(caplog))
    finally:
        await box.close_all()


async def test_code_writes_only_inside_its_own_directory(sandbox, caplog):
    isolation = await sandbox.isolation()
    outside = tempfile.mkdtemp(prefix="outside-")
    os.chmod(outside, 0o777)  # world-writable: only the isolation can stop the write
    stray = os.path.join(tempfile.gettempdir(), f"stray-{uuid.uuid4().hex}")
    shm = f"/dev/shm/stray-{uuid.uuid4().hex}"
    # Outside every scratch directory: only the unprivileged account stops this one.
    system = f"/etc/stray-{uuid.uuid4().hex}" if isolation.user else stray
    code = f"""
import os
open('inside.txt', 'w').write('ok')
print(os.getcwd())
for path in ({outside + "/x.txt"!r}, {stray!r}, {shm!r}, {system!r}):
    try:
        open(path, 'w').write('escaped')
        print('wrote', path)
    except OSError as e:
        print('refused', path, type(e).__name__)
try:
    print('environ', len(open('/proc/{os.getpid()}/environ', 'rb').read()))
except OSError as e:
    print('environ refused', type(e).__name__)
"""
    try:
        neighbour = (await sandbox.run("t", "import os; print(os.getcwd())")).stdout.strip()
        code += f"print('neighbour', os.path.exists({neighbour!r}))"
        result = await sandbox.run("s", code)
        assert result.error is None, result
        cwd, *lines = result.stdout.splitlines()
        assert (await sandbox.run("s", "print(open('inside.txt').read())", [code])).stdout == "ok\n"
        if isolation.user:
            assert any(line.startswith(f"refused {outside}/x.txt ") for line in lines), lines
            assert not os.path.exists(os.path.join(outside, "x.txt"))
            assert f"refused {system} PermissionError" in lines and not os.path.exists(system)
            # The worker's keys stay unreadable: its process is out of sight (PID
            # namespace) or its /proc files are not the session's to read.
            assert "environ refused FileNotFoundError" in lines or "environ refused PermissionError" in lines
        else:
            assert any("run as root" in w or "own user" in w for w in warnings_of(caplog))
            assert f"wrote {outside}/x.txt" in lines
        if isolation.private_tmp:
            assert f"refused {stray} OSError" in lines  # read-only /tmp
            assert not os.path.exists(stray)
            assert f"wrote {shm}" in lines and not os.path.exists(shm)  # a private /dev/shm
            assert "neighbour False" in lines  # other sessions' files are out of sight
        else:
            assert any("isolation is incomplete" in w for w in warnings_of(caplog))
        await sandbox.close("s")
        assert not os.path.exists(cwd)
    finally:
        shutil.rmtree(outside, ignore_errors=True)
        for path in (stray, shm, system):
            if os.path.exists(path):
                os.unlink(path)


async def test_sessions_run_as_uids_of_their_own_and_cannot_touch_each_other(sandbox):
    isolation = await sandbox.isolation()
    if isolation.user != "session uid":
        pytest.skip("the worker is not root: sessions run in user namespaces")
    sleeper = "import subprocess, os\np = subprocess.Popen(['sleep', '60'])\nprint(os.getuid(), p.pid)"
    first = (await sandbox.run("a", sleeper)).stdout.split()
    second = (await sandbox.run("b", "import os; print(os.getuid())")).stdout.split()
    assert first[0] != second[0]  # two uids
    kill = f"import os, signal\ntry:\n    os.kill({first[1]}, signal.SIGKILL)\n    print('killed')\nexcept OSError as e:\n    print(type(e).__name__)"
    assert (await sandbox.run("b", kill, ["import os; print(os.getuid())"])).stdout.strip() in (
        "ProcessLookupError",
        "PermissionError",
    )


async def test_a_fork_bomb_meets_the_session_s_process_limit():
    box = LocalSandbox(processes=16)
    try:
        code = (
            "import subprocess\nstarted = 0\nprocs = []\nfor _ in range(100):\n    try:\n"
            "        procs.append(subprocess.Popen(['sleep', '30']))\n        started += 1\n"
            "    except OSError:\n        break\nprint(started)"
        )
        result = await box.run("bomb", code)
        assert result.error is None and int(result.stdout) < 16, result
    finally:
        await box.close_all()


async def test_nothing_started_by_a_cell_outlives_its_session(sandbox):
    marker = f"survivor-{uuid.uuid4().hex}"
    code = (
        "import os, subprocess\n"
        f"subprocess.Popen(['sh', '-c', 'exec -a {marker} sleep 300'], start_new_session=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n    os.execvp('sleep', ['" + marker + "', '300'])\n"
        "print('started')"
    )
    assert (await sandbox.run("s", code)).stdout == "started\n"
    await sandbox.close("s")
    await asyncio.sleep(0.5)
    alive = [
        p for p in os.listdir("/proc") if p.isdigit() and marker.encode() in open(f"/proc/{p}/cmdline", "rb").read()
    ]
    assert alive == []


# --- limits for the session as a whole (issue 15, item 18) ---------------------------

HOLD = "import sys, time\nb = b'x' * ({mb} << 20)\nprint('holding', flush=True)\ntime.sleep(60)"
CHILDREN = """
import subprocess, sys
children = []
for _ in range(3):
    child = subprocess.Popen([sys.executable, '-c', {hold!r}], stdout=subprocess.PIPE)
    child.stdout.readline()  # 'holding', or nothing when it was killed
    children.append(child)
held = 0
for child in children:
    try:
        child.wait(0.5)
    except subprocess.TimeoutExpired:
        held += 1
print('held', held, 'killed', sum(c.returncode == -9 for c in children))
"""


async def test_children_together_meet_the_session_s_memory_limit():
    """Three children of 120 MB each fit the per-process limit (200 MB), not
    the session's: before, they held 360 MB against a 200 MB limit."""
    box = LocalSandbox(memory_mb=200)
    try:
        if (await box.isolation()).cgroup is None:
            pytest.skip("no writable memory cgroup here: the limit is per process (the sandbox warned)")
        result = await box.run("s", CHILDREN.format(hold=HOLD.format(mb=120)))
        assert result.error is None, result
        held, killed = int(result.stdout.split()[1]), int(result.stdout.split()[3])
        assert held <= 1 and held + killed == 3, result.stdout  # the out-of-memory killer ended the others
        assert (await box.run("s", "print('alive')", [])).stdout == "alive\n"
    finally:
        await box.close_all()


FILL = """
import os
written = 0
try:
    for n in range(8):
        with open(f'part{n}.bin', 'wb') as f:
            for _ in range(8):
                f.write(b'x' * (1 << 20))
                written += 1
                f.flush()
                os.fsync(f.fileno())
except OSError as e:
    print('refused', type(e).__name__, e.errno)
print('written', written)
"""


async def test_writing_more_than_the_disk_quota_fails():
    """Eight files of 8 MB (each within the 64 MB file limit) against a
    16 MB quota: the session's directory is a tmpfs of that size."""
    box = LocalSandbox(disk_mb=16)
    try:
        if not (await box.isolation()).private_tmp:
            pytest.skip("no private mounts here: the quota is checked after each cell (tested below)")
        result = await box.run("s", FILL)
        assert result.error is None, result
        lines = result.stdout.splitlines()
        assert lines[0] == "refused OSError 28", lines  # ENOSPC
        assert int(lines[1].split()[1]) <= 16
        # The session lives on, and can free its space.
        code = "import glob, os\nfor p in glob.glob('part*'): os.remove(p)\nprint('freed')"
        assert (await box.run("s", code, [FILL])).stdout == "freed\n"
    finally:
        await box.close_all()


async def test_without_private_mounts_a_session_over_its_quota_is_stopped():
    box = LocalSandbox(disk_mb=16, unshare="/nonexistent/unshare", allow_unisolated=True)
    try:
        cwd = (await box.run("s", "import os; print(os.getcwd())")).stdout.strip()
        result = await box.run("s", FILL, ["import os; print(os.getcwd())"])
        assert "wrote more than 16 MB to its directory and was stopped" in result.error, result
        assert not os.path.exists(cwd)  # its files are gone with it
        assert (await box.run("s", "print('new')", [])).stdout == "new\n"  # a new session starts
    finally:
        await box.close_all()


# --- a daemon that holds the session's pipes (issue 15, item 17) ---------------------

DAEMON = """
import ctypes, os, time
read, write = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # a daemon: the fork keeps every fd, the reply pipe included
        ctypes.CDLL(None).prctl(15, {name!r}.encode(), 0, 0, 0)  # PR_SET_NAME
        os.write(write, b'!')
        time.sleep(300)
    os._exit(0)
os.wait()
os.read(read, 1)
print(os.getcwd())
"""


@pytest.mark.parametrize("isolated", [True, False], ids=["isolated", "local-unisolated"])
async def test_a_daemon_holding_the_reply_pipe_does_not_block_close_or_the_timeout(isolated):
    options = {} if isolated else {"unshare": "/nonexistent/unshare", "allow_unisolated": True}
    box = LocalSandbox(timeout=2, **options)
    name = f"daemon-{uuid.uuid4().hex[:8]}"  # its process name, as the kernel keeps it (15 characters at most)
    daemon = DAEMON.format(name=name)
    try:
        isolation = await box.isolation()
        cwd = (await box.run("s", daemon)).stdout.strip()
        assert _named(name)  # the daemon runs
        async with asyncio.timeout(10):  # before: waited for the daemon, i.e. for ever
            await box.close("s")
        assert not os.path.exists(cwd)
        cwd = (await box.run("t", daemon)).stdout.strip()
        async with asyncio.timeout(10):
            result = await box.run("t", "import time\ntime.sleep(60)", [daemon])
        assert result.error.startswith("TimeoutError") and not os.path.exists(cwd)
        if isolation.pid or isolation.cgroup:  # the daemons are gone with their sessions
            await asyncio.sleep(0.5)
            assert _named(name) == []
    finally:
        async with asyncio.timeout(10):
            await box.close_all()


def _named(name: str) -> list[str]:
    """The live processes called ``name`` (a killed one may linger as a zombie until reaped)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with suppress(OSError):
            stat = open(f"/proc/{pid}/stat").read()
            if stat[stat.index("(") + 1 : stat.rindex(")")] == name and stat[stat.rindex(")") + 2] != "Z":
                found.append(pid)
    return found


async def test_two_workers_on_one_machine_never_share_a_session_uid():
    """Two sandboxes (two workers of one machine, as root): closing a session
    kills every process of its uid, so a uid must be one session's only.
    Before, both gave out uid 61000 and each killed the other's sessions."""
    first, second = LocalSandbox(), LocalSandbox()
    try:
        if (await first.isolation()).user != "session uid":
            pytest.skip("the worker is not root: sessions run in user namespaces")
        cell = "import os, random\nx = random.random()\nprint(os.getuid(), x)"
        mine = (await first.run("s", cell)).stdout.split()
        theirs = (await second.run("s", cell)).stdout.split()
        assert mine[0] != theirs[0]
        await first.close("s")
        after = await second.run("s", "print(os.getuid(), x)", [cell])
        assert after.stdout.split() == theirs, after  # the same process: alive, not killed and rebuilt
    finally:
        await first.close_all()
        await second.close_all()
