"""The embedded Temporal dev server never outlives the command that started
it: `server`, or a `demo` (`run`'s code path) that started one, stopped by
SIGHUP (the terminal closed, `tmux kill-session`) stops it as SIGTERM does;
killed outright (SIGKILL), it takes the server with it (the kernel's
parent-death signal). A server left behind held its port and database, and
the next command used it as a server "not started by this command". Real
processes, real signals, the real `temporal` binary."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from client.devserver import ephemeral_ports, free_port, port_open
from tests.test_demo_command import ROOT, scrubbed_env


def children(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def temporal_child(pid: int) -> int:
    (found,) = [c for c in children(pid) if b"start-dev" in Path(f"/proc/{c}/cmdline").read_bytes()]
    return found


def wait(check, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture(autouse=True)
def hangup_as_in_a_terminal():
    """A command started in a terminal has SIGHUP's default disposition. The
    test runner may not (under ``nohup`` SIGHUP is ignored, and children
    inherit that): the commands here get the default, as in a terminal."""
    before = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGHUP, before)


def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """A command in a session of its own (as in a terminal of its own)."""
    return subprocess.Popen(
        [sys.executable, "-m", "client.cli", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def serving(command: subprocess.Popen[str], port: int, said: str) -> int:
    """Waits until the command says its dev server is up; the server's pid."""
    assert command.stdout is not None
    printed = ""
    while said not in printed and (line := command.stdout.readline()):
        printed += line
    assert said in printed and port_open("127.0.0.1", port), printed[-3000:]
    return temporal_child(command.pid)


def gone(command: subprocess.Popen[str], server: int, port: int) -> None:
    try:
        command.wait(60)
    finally:
        stopped = wait(lambda: not alive(server) and not port_open("127.0.0.1", port), 30)
        if not stopped:
            os.kill(server, signal.SIGKILL)  # leave nothing behind, whatever the result
        assert stopped, f"the dev server (pid {server}) outlived the command and still holds port {port}"


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL])
def test_the_server_command_takes_its_dev_server_with_it(tmp_path, sig):
    port = free_port()
    env = scrubbed_env(tmp_path / "data")
    command = start(env, "server", "--port", str(port), "--ui-port", str(free_port()))
    server = serving(command, port, "Temporal dev server at")
    command.send_signal(sig)
    gone(command, server, port)
    if sig == signal.SIGHUP:  # stopped as by Ctrl-C: cleanly, saying so
        assert command.returncode == 0 and "server stopped" in command.stdout.read()


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL])
def test_a_demo_takes_its_embedded_server_with_it(tmp_path, sig):
    port = free_port()
    env = scrubbed_env(
        tmp_path / "data", DEEPRESEARCH_DEV_SERVER_PORT=str(port), DEEPRESEARCH_DEV_UI_PORT=str(free_port())
    )
    command = start(env, "demo")  # waits for the plan's review at the terminal
    server = serving(command, port, "started the embedded Temporal dev server")
    command.send_signal(sig)
    gone(command, server, port)


def test_under_nohup_a_hangup_is_ignored(tmp_path):
    port = free_port()
    env = scrubbed_env(tmp_path / "data")
    command = subprocess.Popen(
        ["nohup", sys.executable, "-m", "client.cli", "server", "--port", str(port), "--ui-port", str(free_port())],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    server = serving(command, port, "Temporal dev server at")
    command.send_signal(signal.SIGHUP)
    time.sleep(2)  # a window for a wrong handler to act; nothing is timed
    assert command.poll() is None and port_open("127.0.0.1", port), "nohup asked for the server to go on"
    command.send_signal(signal.SIGTERM)
    gone(command, server, port)


def test_ports_we_choose_are_never_ones_the_dev_server_picks_for_itself():
    """The dev server picks its internal services' ports by binding port 0;
    a port chosen the same way for its frontend was once handed to its
    worker service too, and the server crashed right after answering health
    checks (a run then failed with "tcp connect error"). Ours lie outside
    the kernel's ephemeral range, and are free."""
    low, high = ephemeral_ports()
    for _ in range(50):
        port = free_port()
        assert not low <= port <= high
        assert not port_open("127.0.0.1", port)
