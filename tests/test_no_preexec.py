"""No process is started with a ``preexec_fn``: Python run between fork and
exec in the multi-threaded worker can wait for ever on a lock another thread
held at the fork, and the worker then waits for the child for ever (a CI run
froze so: the sandbox joined its cgroups in a preexec_fn). Cgroups are joined
by a shell before exec (``confinement.joining_cgroups``), memory limits are
set by each child on itself (``infra.child_limits``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ["activities", "client", "infra", "workflows", "testkit", "worker.py"]


def test_no_process_is_started_with_a_preexec_fn():
    found = []
    for top in CODE:
        path = ROOT / top
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text(), str(file))):
                if isinstance(node, ast.Call) and any(k.arg == "preexec_fn" for k in node.keywords):
                    found.append(f"{file.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_the_session_joins_its_cgroups_in_a_shell_before_exec(tmp_path):
    import subprocess

    from activities.sandbox.confinement import joining_cgroups

    groups = [tmp_path / "a", tmp_path / "b", tmp_path / "missing"]
    for group in groups[:2]:
        group.mkdir()
    done = subprocess.run(
        [*joining_cgroups([str(g) for g in groups]), "/bin/sh", "-c", "echo $$"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr  # a group it cannot join is skipped quietly
    pid = done.stdout.strip()
    assert [(g / "cgroup.procs").read_text().strip() for g in groups[:2]] == [pid, pid]  # the command's own pid
    assert joining_cgroups([]) == []
