"""The code stays linted and formatted (ruff, configured in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ruff(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_lint_passes():
    done = ruff("check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_code_is_formatted():
    done = ruff("format", "--no-cache", "--check", ".")
    assert done.returncode == 0, "run `.venv/bin/ruff format .`:\n" + done.stdout + done.stderr
