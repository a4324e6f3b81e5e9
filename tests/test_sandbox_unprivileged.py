"""Model-written code never runs next to a key, also where the worker is not
root (the container image): the local sandbox run as another user, as such
a worker would run it, against the worker's secret, a loopback port of the
host, a fork bomb and a detached process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534
PACKAGES = ("activities", "infra", "workflows", "testkit")  # what testkit/sandbox_as_user.py imports


def interpreter_for_nobody() -> str:
    """A Python 3.11+ whose files another user may read (a venv's interpreter
    may live under root's home): the one a non-root worker would run."""
    check = "import sys, os; sys.exit(0 if sys.version_info >= (3, 11) and os.access(os.path.realpath(sys.executable), os.R_OK) else 1)"
    for python in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        done = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, "-c", check],
            capture_output=True,
        )
        if done.returncode == 0:
            return python
    pytest.skip("no Python 3.11 interpreter that another user may run")


@pytest.fixture
def as_nobody():
    """Runs ``python ARGS`` as user nobody, on a copy of the code it needs
    (the checkout may sit in a folder only root may enter, as one made by
    ``mktemp -d``)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root (to drop to another user) and setpriv")
    python = interpreter_for_nobody()
    code = Path(tempfile.mkdtemp(prefix="sandbox-as-nobody-"))
    code.chmod(0o755)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, code / package, ignore=shutil.ignore_patterns("__pycache__"))

    def run(*argv: str) -> dict:
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(code), "HOME": "/tmp", "LANG": "C.UTF-8"}
        done = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, *argv],
            cwd=code,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    yield run
    shutil.rmtree(code)


def test_an_unprivileged_worker_s_sandbox_keeps_code_away_from_keys_ports_and_processes(as_nobody):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        report = as_nobody("-m", "testkit.sandbox_as_user", str(listener.getsockname()[1]))
    assert report["uid"] == NOBODY
    isolation = report["isolation"]
    assert isolation["refusal"] is None and isolation["network"] and isolation["pid"], report
    assert report["environ"] in ("FileNotFoundError", "PermissionError")  # the worker's key stays unreadable
    assert report["connect"] in ("ConnectionRefusedError", "OSError", "TimeoutError")  # no host loopback
    assert int(report["fork"]) <= 16  # the session's process limit
    assert report["escape"] == "started" and report["left_behind"] == 0  # nothing outlives the session
