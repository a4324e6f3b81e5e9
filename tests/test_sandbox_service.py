"""The sandbox service (the compose stack's `sandbox`), run here as the
stack runs it: its own process, no keys in its environment, workers talking
to it over HTTP with a token (``DEEPRESEARCH_SANDBOX=remote``)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from contextlib import contextmanager

import httpx
import pytest

from activities.sandbox import make_sandbox
from activities.sandbox.base import SandboxError
from activities.sandbox.remote import RemoteSandbox
from client.devserver import free_port  # outside the ports the dev server picks for itself
from infra.settings import Settings

TOKEN = "sandbox-token-for-tests"


def service_env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "PYTHONPATH": os.getcwd()} | extra  # no keys at all


@contextmanager
def service_process(env: dict[str, str], *args: str):
    """The service in its own process on a free loopback port; yields (URL, process)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "activities.sandbox.service", "--port", str(port), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(proc.stdout.read().decode()) from None
                time.sleep(0.1)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def service():
    with service_process(service_env(DEEPRESEARCH_SANDBOX_TOKEN=TOKEN)) as (url, _proc):
        yield url


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
    with pytest.raises(SandboxError, match="HTTP 401"):
        await box.run("s", "print(1)")
    await box.close_all()


async def test_malformed_json_is_a_clear_400(service):
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        for path in ("/run", "/close"):
            for body in (b"{not json", b"\xff\xfe", b""):
                reply = await http.post(service + path, content=body, headers=auth)
                assert reply.status_code == 400, (path, body)
                assert reply.json()["error"].startswith("the request body is not JSON")
            reply = await http.post(service + path, json=["a", "list"], headers=auth)
            assert reply.status_code == 400 and reply.json()["error"] == "send a JSON object"


def refusal(*args: str) -> list[str]:
    """What the service says when it will not start without a token (exit 2)."""
    done = subprocess.run(
        [sys.executable, "-m", "activities.sandbox.service", "--port", str(free_port()), *args],
        env=service_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    return done.stderr.strip().splitlines()


def test_without_a_token_it_refuses_to_serve_beyond_loopback():
    assert refusal("--host", "0.0.0.0") == [
        "sandbox service: refusing to serve 0.0.0.0 without a token: anyone who reaches it could run code; "
        "set DEEPRESEARCH_SANDBOX_TOKEN (on the workers too), or bind to 127.0.0.1"
    ]


def test_without_a_token_it_refuses_unless_told_and_then_says_so():
    assert refusal() == [
        "sandbox service: refusing to serve without a token: any local user could run code here; set "
        "DEEPRESEARCH_SANDBOX_TOKEN (on the workers too), or give --no-token to allow that on loopback"
    ]
    with service_process(service_env(), "--no-token") as (_url, proc):
        proc.terminate()
        said = proc.stdout.read().decode()
    assert "no DEEPRESEARCH_SANDBOX_TOKEN: serving loopback only, where any local user can run code here" in said


async def test_without_a_token_no_web_page_can_run_code_here():
    """A page the user visits can POST cross-site without a preflight when the
    body is ``text/plain`` or a form, and can rebind its own name to
    127.0.0.1: neither reaches the sandbox of a service with no token."""
    body = json.dumps({"session": "page", "code": "print('ran')"}).encode()
    with service_process(service_env(), "--no-token") as (url, _proc):
        port = url.rsplit(":", 1)[1]
        async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
            for headers in (
                {"Content-Type": "text/plain"},
                {"Content-Type": "application/x-www-form-urlencoded"},
                {"Content-Type": "application/json", "Host": f"rebind.attacker.example:{port}"},
            ):
                reply = await http.post(url + "/run", content=body, headers=headers)
                assert reply.status_code in (415, 421), (headers, reply.status_code, reply.text)
                assert "error" in reply.json() and "ran" not in reply.text
            # The worker's own client (JSON to a loopback name) is served.
            box = RemoteSandbox(url)
            try:
                assert (await box.run("worker", "print(6 * 7)")).stdout == "42\n"
            finally:
                await box.close_all()


async def test_sessions_are_capped_and_the_next_one_gets_one_clear_line():
    env = service_env(DEEPRESEARCH_SANDBOX_TOKEN=TOKEN, DEEPRESEARCH_SANDBOX_MAX_SESSIONS="2")
    with service_process(env) as (url, _proc):
        box = RemoteSandbox(url, token=TOKEN)
        try:
            # Four new sessions at once: two get in, two are told the service is busy.
            results = await asyncio.gather(*(box.run(f"s{i}", "print(1)") for i in range(4)), return_exceptions=True)
            busy = [r for r in results if isinstance(r, SandboxError)]
            assert len(busy) == 2 and sum(r.stdout == "1\n" for r in results if not isinstance(r, Exception)) == 2
            message = str(busy[0])
            assert message == (
                "the sandbox service is busy: 2 sessions are open, its limit "
                "(DEEPRESEARCH_SANDBOX_MAX_SESSIONS=2); try again when one ends"
            )
            # An open session goes on; once one is closed, a new one gets in.
            admitted = sorted(box.sessions)
            assert (await box.run(admitted[0], "print(2)")).stdout == "2\n"
            with pytest.raises(SandboxError, match="busy"):
                await box.run("late", "print(3)")
            await box.close(admitted[0])
            assert (await box.run("late", "print(3)")).stdout == "3\n"
        finally:
            await box.close_all()
