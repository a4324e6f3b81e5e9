"""Held-out suites, as an outside check runs them: reports written blind
(by writers who never saw this project's code) behind the reporter of real
runs of suites this project was not built on (``tests/fixtures/heldout``:
two suites of new tasks and pages, German, Spanish, French, Italian and
Japanese among them; ``testkit/guard_probe.py``). Every faithful report,
written from the suite's documents or from what the reporter is shown, in
full, concise, footnoted, shorthand, hedged, table-first and other-language
styles, must ship as written; every small model's fiction must not.

The other invented kinds (a frontier model's hallucination, invention
padded among copied sentences, figures swapped between things, a false
"not given") are measured, not asserted: the word-and-figure check catches
some of them (docs/eval.md, "Held-out suites"). Asserted of them: one
whose run finds a statement its sources contradict (a near miss of a
figure they give) is never shipped as written.

    RECORD_GUARD_RATES=1 .venv/bin/python -m pytest -n 0 tests/test_heldout_probe.py
writes the rates to bench/results/guards-heldout.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from testkit.fixture_verdicts import Outcome
from testkit.guard_probe import WEAK_LABELS, contradicted, probe, totals

pytestmark = [pytest.mark.xdist_group("heldout"), pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parent.parent
HELDOUT = ROOT / "tests" / "fixtures" / "heldout"
RATES = ROOT / "bench" / "results" / "guards-heldout.json"
SETS = {"suite-1": ("A", "B", "C", "D"), "suite-2": ("E", "F"), "suite-3": ("G",)}
SMALL_MODEL = ("fiction", "tiny-model")  # the invented kinds a small model writes: never shipped


def entries() -> list[tuple[str, str, dict]]:
    """(suite, "<folder>/<file>", index entry) of every report."""
    out = []
    for suite, folders in SETS.items():
        for folder in folders:
            index = HELDOUT / suite / "reports" / folder / "index.jsonl"
            for line in index.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    entry = json.loads(line)
                    out.append((suite, f"{folder}/{entry['file']}", entry))
    return out


FAITHFUL = [(s, f) for s, f, e in entries() if e.get("label", "faithful") not in WEAK_LABELS]
INVENTED = [(s, f) for s, f, e in entries() if e.get("label") in WEAK_LABELS]
FICTION = [(s, f) for s, f, e in entries() if e.get("label") in WEAK_LABELS and e.get("variant") in SMALL_MODEL]


@pytest.fixture(scope="module")
async def outcomes() -> dict[tuple[str, str], Outcome]:
    found: dict[tuple[str, str], Outcome] = {}
    rates = {}
    for suite, folders in SETS.items():
        ran = await probe(HELDOUT / suite, [HELDOUT / suite / "reports" / f for f in folders], set())
        found |= {(suite, o.fixture.file): o for o in ran}
        rates[suite] = totals(ran)
    print(json.dumps(rates, indent=1, ensure_ascii=False))
    if os.environ.get("RECORD_GUARD_RATES") == "1":
        RATES.write_text(json.dumps(rates, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return found


@pytest.mark.parametrize(("suite", "report"), FAITHFUL, ids=lambda x: x)
async def test_a_faithful_heldout_report_ships_as_written(outcomes, suite: str, report: str):
    outcome = outcomes[(suite, report)]
    assert outcome.verdict == "as written", (outcome.verdict, outcome.why)


@pytest.mark.parametrize(("suite", "report"), FICTION, ids=lambda x: x)
async def test_a_small_models_heldout_fiction_is_not_shipped_as_written(outcomes, suite: str, report: str):
    outcome = outcomes[(suite, report)]
    assert outcome.verdict == "caught", (outcome.verdict, outcome.why)


async def test_an_invented_heldout_report_its_sources_contradict_is_not_shipped_as_written(outcomes):
    found = {key: o for key, o in outcomes.items() if key in INVENTED and contradicted(o)}
    assert found, "no invented report had a statement found contradicted"
    shipped = {key: (o.verdict, contradicted(o)) for key, o in found.items() if o.verdict != "caught"}
    assert not shipped, shipped
