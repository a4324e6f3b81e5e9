"""The command line loads only what a command needs (no timings here: bench/
benchmark 5 measures them; tests/test_layers.py keeps the import graph).

Each check runs in a fresh interpreter, so what other tests imported does not
count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "client"

# Never needed to talk to a run: the worker's side, and the heavier parts of rich.
WORKER_SIDE = (
    "worker",
    "activities",
    "openai",
    "trafilatura",
    "pypdf",
    "mcp",
    "e2b",
    "e2b_code_interpreter",
    "tavily",
    "ddgs",
    "temporalio.worker",
)
# (temporalio.contrib.workflow_streams comes with workflows.models, which holds
# its state type; it adds little to the Temporal client.)
NOT_FOR_QUICK_COMMANDS = WORKER_SIDE + (
    "markdown_it",
    "rich.live",
    "rich.markdown",
    "client.devserver",
    "client.interactive",
    "client.desk",
)


def modules_after(argv: list[str], *, run: bool) -> set[str]:
    """The modules loaded after parsing ``argv`` (and, with ``run``, running
    the command against an address where nothing listens)."""
    # Ends with os._exit after flushing, as the CLI does (infra.process.exit_now):
    # an interpreter that opened a temporalio client can abort at exit.
    code = f"""
import json, os, sys
from client.cli import build_parser, dispatch
args = build_parser().parse_args({argv!r})
if {run!r}:
    dispatch(args)
print(json.dumps(sorted(sys.modules)), flush=True)
sys.stderr.flush()
os._exit(0)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules or any(m.startswith(n + ".") for m in modules))


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "X"],
        ["review", "X", "--accept"],
        ["list"],
        ["start", "q"],
        ["result", "X", "-o", "r.html"],
        ["run", "q"],
    ],
)
def test_parsing_loads_neither_temporal_nor_rich_nor_the_models(argv):
    assert loaded(modules_after(argv, run=False), ("temporalio", "rich", "pydantic", "workflows", *WORKER_SIDE)) == []


NOWHERE = ["--address", "127.0.0.1:1"]


@pytest.mark.parametrize(
    "argv",
    [
        ["result", "X", *NOWHERE],
    ],
)
def test_quick_commands_load_only_the_temporal_client_and_what_they_print_with(argv):
    modules = modules_after(argv, run=True)
    assert "temporalio.client" in modules  # the command did run up to connecting
    assert loaded(modules, NOT_FOR_QUICK_COMMANDS) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "X", *NOWHERE],
        ["review", "X", "--feedback", "[ACCEPTED]", *NOWHERE],
        ["review", "X", "--accept", *NOWHERE],
        ["answer", "X", "yes", *NOWHERE],
        ["steer", "X", "only EU sources", "--url", "https://a.eu/", *NOWHERE],
    ],
)
def test_status_review_and_answer_go_the_quick_way_without_the_full_client_or_the_models(argv):
    # (tests/test_cli_e2e.py checks the same against a real run)
    modules = modules_after(argv, run=True)
    assert "temporalio.service" in modules  # the command did run up to connecting
    assert loaded(modules, NOT_FOR_QUICK_COMMANDS + ("temporalio.client", "pydantic", "workflows.models")) == []


def test_start_goes_the_quick_way_with_the_models_but_without_the_full_client():
    # The models check the options; the start itself needs no converter (tests/test_cli_e2e.py: a real run).
    modules = modules_after(["start", "q", *NOWHERE], run=True)
    assert "temporalio.service" in modules and "workflows.models" in modules
    assert loaded(modules, NOT_FOR_QUICK_COMMANDS + ("temporalio.client", "rich")) == []


def test_list_goes_the_quick_way_without_the_full_client():
    modules = modules_after(["list", *NOWHERE], run=True)
    assert "temporalio.service" in modules  # the command did run up to connecting
    assert loaded(modules, NOT_FOR_QUICK_COMMANDS + ("temporalio.client",)) == []


def test_review_with_raw_feedback_needs_neither_the_models_nor_rich():
    modules = modules_after(["review", "X", "--feedback", "[ACCEPTED]", *NOWHERE], run=True)
    assert loaded(modules, ("workflows", "rich")) == []
