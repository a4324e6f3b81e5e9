"""Put reports behind the reporter of real runs of any suite, and say what
the run's guards made of each, as an outside check does.

    .venv/bin/python -m testkit.guard_probe --suite DIR REPORTS_DIR [...] [--json FILE] [--only TASK,...]

``--suite``: a folder with ``tasks.jsonl`` and ``corpus/`` (the eval's
format; default the built-in suite). Each ``REPORTS_DIR`` holds report
files and an ``index.jsonl``, one line per report: ``{"task", "file",
"variant", "label": "faithful" | "invented", "locale"?}``. Each report runs
as the reporter of its own run of its task (the real workflow on a dev
server of its own, in-process workers, the suite's corpus web on loopback,
the demo model for every other role: ``testkit/fixture_runs.py``). A
faithful report must ship as written (called once, no warning, nothing
taken out); an invented one must not (``testkit/fixture_verdicts.py``).
Prints one line per report and the totals; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
from pathlib import Path

from client.devserver import DevServer
from client.evaluation.web import CorpusWeb
from infra.connection import Connection
from infra.temporal import connect
from testkit.fixture_model import BUILTIN, Fixture, FixtureModel, Fixtures, normal, tasks
from testkit.fixture_runs import Case, fixture_workers, run_cases
from testkit.fixture_verdicts import Outcome, verdict

AT_ONCE_VARIANTS = 6  # workers at once in this process
WEAK_LABELS = ("invented", "echo", "placeholder")


def load(folders: list[Path], suite: Path) -> Fixtures:
    """The reports of each folder's ``index.jsonl``, as fixtures of the
    reporter; a report's variant is its folder's name and its own
    (``A.full``), so each runs on a worker of its own variant."""
    suite_tasks = tasks(suite)
    found = Fixtures(questions={normal(t["question"]): task_id for task_id, t in suite_tasks.items()})
    for folder in folders:
        for line in (folder / "index.jsonl").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            entry = json.loads(line)
            cjk = re.search(r"[\u4e00-\u9fff]", suite_tasks[entry["task"]]["question"])
            found.items.append(
                Fixture(
                    task=entry["task"],
                    role="reporter",
                    replies=((folder / entry["file"]).read_text(encoding="utf-8"),),
                    variant=f"{folder.name}.{entry.get('variant', 'report')}".replace("-", "_"),
                    locale=entry.get("locale") or ("zh-CN" if cjk else "en-US"),
                    label=entry.get("label", "faithful"),
                    file=f"{folder.name}/{entry['file']}",
                )
            )
    return found


async def probe(suite: Path, folders: list[Path], only: set[str]) -> list[Outcome]:
    fixtures = load(folders, suite)
    fixtures.items = [f for f in fixtures.items if not only or f.task in only]
    out: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="guard-probe-") as scratch:
        folder = Path(scratch)
        with (
            DevServer(db_file=folder / "temporal.db", log_file=folder / "server.log") as server,
            CorpusWeb(suite / "corpus") as web,
            FixtureModel(fixtures, web_url=web.base_url) as model,
        ):
            client = await connect(Connection(address=server.address, data_dir=folder))
            variants = sorted({f.variant for f in fixtures.items})
            for start in range(0, len(variants), AT_ONCE_VARIANTS):
                batch = variants[start : start + AT_ONCE_VARIANTS]
                mine = [f for f in fixtures.items if f.variant in batch]
                cases = [Case(f.task, f.variant, None if f.locale == "en-US" else f.locale) for f in mine]
                async with fixture_workers(client, model, web, folder, batch) as queues:
                    done = await run_cases(client, queues, cases, suite)
                for f, ran in zip(mine, done, strict=True):
                    key = f.key(f.variant)
                    weak = f.label in WEAK_LABELS
                    out.append(verdict(f, ran, model.asked[key], model.served[key], web.base_url, weak=weak))
                    print(f"{out[-1].verdict:>10}  {f.label:>8}  {f.file}  {out[-1].why[:300]}", flush=True)
    return out


def flagged(o: Outcome) -> list[str]:
    """The statements of ``o``'s report its run found invented (a figure or
    a name no source holds): in a faithful report, each a false accusation."""
    return [s.text for s in (o.ran.result.statements if o.ran else []) if s.invented]


def contradicted(o: Outcome) -> list[str]:
    """The statements of ``o``'s report its run found contradicted (a near
    miss of a figure its source gives): marked in any report."""
    return [s.text for s in (o.ran.result.statements if o.ran else []) if s.contradicts]


def totals(outcomes: list[Outcome]) -> dict:
    faithful = [o for o in outcomes if o.fixture.label not in WEAK_LABELS]
    invented = [o for o in outcomes if o.fixture.label in WEAK_LABELS]
    return {
        "faithful": {
            "as_written": sum(o.verdict == "as written" for o in faithful),
            "of": len(faithful),
            "not_as_written": {o.fixture.file: o.verdict for o in faithful if o.verdict != "as written"},
            "with_a_statement_flagged": sum(bool(flagged(o)) for o in faithful),  # shipped, but one listed
            "statements_flagged": sum(len(flagged(o)) for o in faithful),
            "with_a_statement_contradicted": sum(bool(contradicted(o)) for o in faithful),  # marked: must be 0
        },
        "invented": {
            "caught": sum(o.verdict == "caught" for o in invented),
            "of": len(invented),
            "shipped": sorted(o.fixture.file for o in invented if o.verdict != "caught"),
            "with_a_statement_flagged": sum(bool(flagged(o)) for o in invented),
            "with_a_statement_contradicted": sum(bool(contradicted(o)) for o in invented),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", type=Path, nargs="+", help="folders with report files and index.jsonl")
    parser.add_argument("--suite", type=Path, default=BUILTIN, help="a folder with tasks.jsonl and corpus/")
    parser.add_argument("--only", default="", help="task ids, comma-separated")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    outcomes = asyncio.run(probe(args.suite, args.reports, {t for t in args.only.split(",") if t}))
    summary = totals(outcomes)
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    if args.json:
        rows = [
            {
                "file": o.fixture.file,
                "label": o.fixture.label,
                "verdict": o.verdict,
                "why": o.why,
                "flagged": flagged(o),
                "contradicted": contradicted(o),
            }
            for o in outcomes
        ]
        args.json.write_text(json.dumps({"totals": summary, "reports": rows}, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
