"""Capture what each role of a fixture run is shown, to write fixtures from.

    .venv/bin/python -m testkit.fixture_capture tests/fixtures/material [TASK ...]
    .venv/bin/python -m testkit.fixture_capture OUT --suite DIR [--fixtures DIR]

Runs each task (default: every task of the suite, the built-in one unless
``--suite`` names a folder with ``tasks.jsonl`` and ``corpus/``, but those
with local resources) as ``tests/test_strong_outputs.py`` runs it: its own
Temporal dev server on free ports, the corpus web, the demo model for every
role but those with a fixture in ``tests/fixtures/strong`` (a strong plan or
strong findings change what the reporter is shown, so the capture runs with
them). For each task it writes ``<out>/<task>/reporter.json``: the
reporter's request as the model received it (system and user messages, the
corpus web's address written ``{web}``), and ``researcher-<n>.json``: each
research step's first request (its evidence passages); plus ``plan.json``,
the plan the run followed. A report is then written from that material only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from client.devserver import DevServer
from client.evaluation.web import CorpusWeb
from infra.connection import Connection
from infra.temporal import connect
from testkit.fixture_model import BUILTIN, FixtureModel, load_fixtures, tasks
from testkit.fixture_runs import Case, fixture_workers, run_cases

ROOT = Path(__file__).resolve().parent.parent
STRONG = ROOT / "tests" / "fixtures" / "strong"
CAPTURE = "capture"  # the reporter variant no fixture has: the demo model writes the report


def default_tasks(suite: Path = BUILTIN) -> list[str]:
    return [task_id for task_id, task in tasks(suite).items() if not task.get("resources")]


def kept(request: dict) -> dict:
    """The request's messages (system and user), no tools."""
    return {"model": request.get("model"), "messages": request.get("messages")}


async def capture(
    out: Path, chosen: list[str], locales: dict[str, str], suite: Path = BUILTIN, strong: Path | None = STRONG
) -> None:
    """Capture ``chosen`` tasks of ``suite``, with the strong plans and
    findings of ``strong`` (None: the demo model for every role)."""
    with tempfile.TemporaryDirectory(prefix="fixture-capture-") as scratch:
        folder = Path(scratch)
        has = strong is not None and (strong / "index.json").is_file()
        fixtures = load_fixtures(strong, suite=suite) if has else load_fixtures(suite=suite)
        with (
            DevServer(db_file=folder / "temporal.db", log_file=folder / "server.log") as server,
            CorpusWeb(suite / "corpus") as web,
            FixtureModel(fixtures, web_url=web.base_url) as model,
        ):
            client = await connect(Connection(address=server.address, data_dir=folder))
            cases = [Case(task, CAPTURE, locales.get(task)) for task in chosen]
            async with fixture_workers(client, model, web, folder, [CAPTURE]) as queues:
                runs = await run_cases(client, queues, cases, suite)
            suite_tasks = tasks(suite)
            for ran in runs:
                question = " ".join(suite_tasks[ran.case.task]["question"].split())
                place = out / (ran.case.task + (f"-{ran.case.locale}" if ran.case.locale else ""))
                place.mkdir(parents=True, exist_ok=True)
                mine = [s for s in model.seen if question in json.dumps(s["request"], ensure_ascii=False)]
                reporter = [s["request"] for s in mine if s["role"] == "reporter"]
                researchers = [s["request"] for s in mine if s["role"] == "researcher" and _first_turn(s["request"])]
                _write(place / "reporter.json", kept(reporter[0]))
                for n, request in enumerate(researchers, 1):
                    _write(place / f"researcher-{n}.json", kept(request))
                plan = ran.result.plan.model_dump_json() if ran.result.plan else "null"
                _write(place / "plan.json", json.loads(plan.replace(web.base_url, "{web}")))
                print(f"{ran.case.name}: {ran.result.status}, {len(researchers)} step(s), run {ran.run_id}")


def _first_turn(request: dict) -> bool:
    return not any(m.get("role") in ("assistant", "tool") for m in request.get("messages") or [])


def _write(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("tasks", nargs="*")
    parser.add_argument("--locale", action="append", default=[], metavar="TASK=LOCALE")
    parser.add_argument("--suite", type=Path, default=BUILTIN, help="a folder with tasks.jsonl and corpus/")
    parser.add_argument("--fixtures", type=Path, default=None, help="strong plans and findings to run with")
    args = parser.parse_args()
    locales = dict(item.split("=", 1) for item in args.locale)
    strong = args.fixtures or (STRONG if args.suite == BUILTIN else None)
    asyncio.run(capture(args.out, args.tasks or default_tasks(args.suite), locales, args.suite, strong))


if __name__ == "__main__":
    main()
