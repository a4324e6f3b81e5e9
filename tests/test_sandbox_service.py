"""The sandbox service (the compose stack's `sandbox`), run here as the
stack runs it: its own process, no keys in its environment, workers talking
to it over HTTP with a token (``DEEPRESEARCH_SANDBOX=remote``)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from activities.sandbox import make_sandbox
from activities.sandbox.remote import RemoteSandbox
from infra.settings import Settings

TOKEN = "sandbox-token-for-tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def service():
    port = free_port()
    env = {"PATH": os.environ["PATH"], "DEEPRESEARCH_SANDBOX_TOKEN": TOKEN, "LANG": "C.UTF-8"}  # no keys at all
    proc = subprocess.Popen(
        [sys.executable, "-m", "activities.sandbox.service", "--port", str(port)],
        env=env | {"PYTHONPATH": os.getcwd()},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stdout.read().decode()) from None
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture
async def remote(service):
    box = RemoteSandbox(service, token=TOKEN)
    yield box
    await box.close_all()


async def test_the_worker_picks_the_service_from_its_settings(service):
    settings = Settings.from_env(
        {"OPENAI_API_KEY": "k", "DEEPRESEARCH_SANDBOX": "remote", "DEEPRESEARCH_SANDBOX_URL": service}
    )
    settings.check()
    box = make_sandbox(settings)
    assert isinstance(box, RemoteSandbox) and box.url == service
    await box.close_all()


async def test_sessions_keep_state_and_are_rebuilt_from_their_cells(remote):
    assert (await remote.run("s", "x = 6")).error is None
    assert (await remote.run("s", "print(x * 7)", ["x = 6"])).stdout == "42\n"
    await remote.close("s")
    assert (await remote.run("s", "print(x * 7)", ["x = 6"])).stdout == "42\n"  # replayed


async def test_code_in_the_service_reaches_no_port_no_process_and_no_more_processes(remote):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        code = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('connected')\nexcept OSError as e:\n    print(type(e).__name__)"
        assert (await remote.run("n", code)).stdout.strip() != "connected"
    assert (
        await remote.run("p", "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:3])")
    ).stdout.startswith("[1, 2")
    bomb = "import subprocess\nn = 0\nkeep = []\nfor _ in range(200):\n    try:\n        keep.append(subprocess.Popen(['sleep', '30']))\n        n += 1\n    except OSError:\n        break\nprint(n)"
    assert int((await remote.run("b", bomb)).stdout) < 64
    marker = f"survivor-{uuid.uuid4().hex}"
    await remote.run(
        "e", f"import subprocess\nsubprocess.Popen(['sh', '-c', 'exec -a {marker} sleep 300'], start_new_session=True)"
    )
    await remote.close("e")
    await asyncio.sleep(0.5)
    assert not [
        p for p in os.listdir("/proc") if p.isdigit() and marker.encode() in open(f"/proc/{p}/cmdline", "rb").read()
    ]


async def test_a_wrong_token_is_refused(service):
    box = RemoteSandbox(service, token="wrong")
    from activities.sandbox.base import SandboxError

    with pytest.raises(SandboxError, match="HTTP 401"):
        await box.run("s", "print(1)")
    await box.close_all()
