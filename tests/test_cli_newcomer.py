"""What a newcomer trips over (issue 20), tested without a Temporal server:
file names made from run ids, one clear line for text that is not UTF-8."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from client.cli import build_parser
from client.ids import file_stem
from client.options import report_path
from client.side_outputs import default_path
from infra.connection import Connection

DEEPRESEARCH = Path(sys.executable).parent / "deepresearch"

HOSTILE_IDS = ["/tmp/x/index", "../../etc/cron.d/x", "..", ".", ".hidden", "a\\b", "a\nb", "x" * 1000, "a:b", ""]


@pytest.mark.parametrize("workflow_id", [*HOSTILE_IDS, "研究-电池", "research-1", "研究" * 50, "🔋" * 70])
def test_files_named_after_a_run_stay_inside_the_reports_folder(workflow_id, tmp_path):
    reports = tmp_path / "data" / "reports"
    args = build_parser().parse_args(["attach", "some-id", "--format", "html"])
    path, _ = report_path(args, reports, workflow_id)
    side = default_path(Connection(data_dir=tmp_path / "data"), workflow_id, ".mp3")
    for made in (path, side):
        assert made.parent == reports, made
        assert made.resolve().parent == reports.resolve(), made
        assert not made.name.startswith(".") and "\n" not in made.name
        assert len(made.name.encode()) <= 255
        made.parent.mkdir(parents=True, exist_ok=True)
        made.write_text("report")  # the file system takes the name


def test_plain_ids_keep_their_name_and_others_keep_their_script():
    assert file_stem("research-1a2b") == "research-1a2b"
    assert file_stem("研究-电池") == "研究-电池"
    assert file_stem("研究/电池").startswith("研究_电池-")


def test_ids_that_differ_get_different_files():
    ids = ["a/b", "a_b", "a\\b", "a:b", "..", "__", "x" * 200, "x" * 201]
    assert len({file_stem(i) for i in ids}) == len(ids)


def test_a_run_saves_its_report_under_a_safe_name(tmp_path):
    args = build_parser().parse_args(["run", "q"])
    path, _ = report_path(args, Path("reports"), "/tmp/x/index")
    assert path.parent == Path("reports") and path.name.startswith("_tmp_x_index-") and path.suffix == ".md"


def test_human_readable_status_shows_the_clarifications():
    from rich.console import Console

    from client.display import render_status
    from workflows.models import Clarification, RunStatus

    status = RunStatus(
        phase="planning",
        question="batteries",
        clarifications=[Clarification(question="Which chemistry?", answer="sodium-ion, please")],
    )
    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(render_status(status, "research-1"))
    shown = console.export_text()
    assert "Which chemistry?" in shown and "sodium-ion, please" in shown


@pytest.mark.parametrize(
    "argv",
    [
        [b"review", b"research-1", b"--edit", b"add \xff\xfe costs"],
        [b"review", b"research-1", b"--feedback", b"[EDIT_PLAN] caf\xe9"],
        [b"answer", b"research-1", b"caf\xe9 au lait"],
    ],
)
def test_text_that_is_not_utf8_gets_one_line(argv, tmp_path):
    env = os.environ | {"TEMPORAL_ADDRESS": "127.0.0.1:9", "DEEPRESEARCH_DATA_DIR": str(tmp_path)}
    done = subprocess.run([str(DEEPRESEARCH).encode(), *argv], env=env, capture_output=True, timeout=60)
    err = done.stderr.decode()
    assert done.returncode != 0 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "is not UTF-8 text" in err, err


def _logging_python(path: Path, log: Path, real: str) -> Path:
    """A stand-in interpreter that notes each start in ``log`` and runs ``real``."""
    path.write_text(f'#!/bin/sh\necho {path.name} >> "{log}"\nexec "{real}" "$@"\n')
    path.chmod(0o755)
    return path


def test_dr_checks_the_python_version_once_per_interpreter(tmp_path):
    """`./dr` starts no Python for its version check on every command (through
    a pyenv shim that costs ~0.1 s): once, and again when .venv's interpreter
    changes."""
    root = Path(__file__).resolve().parent.parent
    home, log = tmp_path / "project", tmp_path / "started.log"
    (home / ".venv" / "bin").mkdir(parents=True)
    (home / "dr").write_bytes((root / "dr").read_bytes())
    (home / "dr").chmod(0o755)
    (home / "pyproject.toml").write_text("")
    (home / ".venv" / ".installed").touch()  # installed: only the version check may start Python
    (home / ".venv" / "bin" / "deepresearch").write_text('#!/bin/sh\necho "ran $*"\n')
    (home / ".venv" / "bin" / "deepresearch").chmod(0o755)
    first = _logging_python(tmp_path / "python-a", log, sys.executable)
    second = _logging_python(tmp_path / "python-b", log, sys.executable)
    (home / ".venv" / "bin" / "python").symlink_to(first)
    shim = _logging_python(tmp_path / "shim", log, sys.executable)
    env = os.environ | {"PYTHON": str(shim)}

    def dr() -> list[str]:
        done = subprocess.run([str(home / "dr"), "status", "x"], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout == "ran status x\n", done.stderr
        return log.read_text().splitlines() if log.exists() else []

    assert dr() == ["python-a"]  # checked once, with .venv's interpreter
    assert len(dr()) == 1 and len(dr()) == 1  # not again
    (home / ".venv" / "bin" / "python").unlink()
    (home / ".venv" / "bin" / "python").symlink_to(second)  # a new interpreter behind .venv
    assert dr() == ["python-a", "python-b"] and len(dr()) == 2  # checked again, once


@pytest.mark.parametrize("workflow_id", [*HOSTILE_IDS, "研究-电池", 'say "hi"', "research-1"])
def test_the_desk_names_a_download_after_any_run_id(workflow_id):
    from starlette.responses import Response

    from client.ids import attachment

    header = attachment(workflow_id, "md")
    response = Response("x", headers={"Content-Disposition": header})  # latin-1 only: raises otherwise
    sent = dict(response.raw_headers)[b"content-disposition"].decode("latin-1")
    plain = sent.split('filename="', 1)[1].split('"', 1)[0]
    assert "/" not in plain and "\\" not in plain and not plain.startswith(".") and "\n" not in sent
    assert attachment("research-1", "md") == "attachment; filename=\"research-1.md\"; filename*=UTF-8''research-1.md"
