"""Every guard the run puts on a model's output (echoes, placeholder plans,
the report's language, grounding, the share of a report its material holds)
must leave a strong model's good output alone, and must still catch a weak
model's bad output. Issue 37, item 5.

Each fixture of ``tests/fixtures/strong`` (faithful reports, full and
concise, plans and findings, written as a strong hosted model writes them,
from what that run's role is shown: ``tests/fixtures/material``) goes through
the real workflow: the real dev server, real workers, the corpus web, the
stand-in model (``testkit/fixture_model.py``) answering the fixture's role
with it and every other role as the demo model does. No guard may refuse,
re-ask or replace it: the reporter is called once and its report ships as
written, the plan is used as written, the findings are kept.

The same runs hold the weak outputs of ``tests/fixtures/weak`` (SmolLM2's
reports recorded on the same material, labelled by hand) and the recorded
weak outputs other tests keep (an invented report, echoes of a prompt, the
planner prompt's example as a plan): each invented report, echo or
placeholder must not be shipped as written.

    RECORD_GUARD_RATES=1 .venv/bin/python -m pytest -n 0 tests/test_strong_outputs.py
writes both rates to bench/results/guards.json (docs/eval.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from activities.llm import render_prompt
from client.evaluation.web import CorpusWeb
from infra.connection import Connection
from infra.temporal import connect
from testkit.fixture_model import BUILTIN, Fixture, FixtureModel, load_fixtures
from testkit.fixture_runs import Case, Ran, fixture_workers, run_cases
from testkit.fixture_verdicts import Outcome, verdict
from workflows.statements import MARK, NOTE_HEADING

pytestmark = [pytest.mark.xdist_group("strong_outputs"), pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parent.parent
STRONG = ROOT / "tests" / "fixtures" / "strong"
WEAK = ROOT / "tests" / "fixtures" / "weak"
RATES = ROOT / "bench" / "results" / "guards.json"
WEAK_VARIANT = "weak"
ECHO_VARIABLES = {"locale": "en-US", "current_time": "2026-11-27, Friday", "report_style": "academic"}


# SmolLM2-135M's report on brackwater-mayor, as it wrote it on the eval suite
# (kept by the old held-share tests): the material's names, invented statements.
INVENTED = """The Harrowgate Ferry, the only vessel that travels from Brackwater to Saltcombe, offers a great deal to
visitors. The Ferry Pier, a beautiful building on the south coast of Brackwater, will double its capacity.
The Ferries also offer an excellent tour that includes 50 different sights for sightseeing.
In 2020 the Brackwater Council saw a significant increase to 800 vessels, mostly in the sea.
The Tresco, designed by a team from a luxury company, is bringing a fresh new look to Brackwater."""


def recorded_elsewhere() -> list[Fixture]:
    """Weak outputs other tests keep, run here through the whole workflow:
    SmolLM2's invented report (``INVENTED``), Gemma's echo of the
    reporter's prompt and the planner prompt's example as a plan
    (tests/test_echoes.py), an echo of the researcher's prompt."""
    reporter = render_prompt("reporter", ECHO_VARIABLES)
    planner = render_prompt("planner", ECHO_VARIABLES | {"max_step_num": 2})
    example = planner.split("```")[1].replace("$locale", "en-US")
    researcher = render_prompt("researcher", ECHO_VARIABLES)
    return [
        Fixture("brackwater-mayor", "reporter", (INVENTED,), WEAK_VARIANT, label="invented",
                source="INVENTED: SmolLM2-135M's report on brackwater-mayor"),
        Fixture("greyhorn-light", "reporter", (reporter[:1500] + "\n\nI hope this helps.",), WEAK_VARIANT,
                label="echo", source="tests/test_echoes.py: Gemma 3's echo of the reporter prompt"),
        Fixture("carrick-bank", "planner", (example,), WEAK_VARIANT, label="placeholder",
                source="tests/test_echoes.py: the planner prompt's example as the plan"),
        Fixture("olvane-founder", "researcher", (researcher,), WEAK_VARIANT, label="echo",
                source="the researcher prompt echoed, as Gemma 3 echoes the reporter's"),
    ]  # fmt: skip


FIXTURES = load_fixtures(STRONG, WEAK)
FIXTURES.items += recorded_elsewhere()
STRONG_ITEMS = [f for f in FIXTURES.items if f.variant != WEAK_VARIANT]
WEAK_ITEMS = [f for f in FIXTURES.items if f.variant == WEAK_VARIANT]
CAUGHT = ("invented", "echo", "placeholder")  # the labels of weak outputs that must not ship as written
INVENTED_ITEMS = [f for f in WEAK_ITEMS if f.label in CAUGHT]


def cases() -> list[Case]:
    """One run per strong report (its variant's worker), one per weak
    fixture's task; strong plans and findings are used by every run of
    their task."""
    found = {Case(f.task, f.variant, None if f.locale == default_locale(f.task) else f.locale) for f in STRONG_ITEMS
             if f.role == "reporter"}  # fmt: skip
    found |= {Case(f.task, WEAK_VARIANT) for f in WEAK_ITEMS}
    return sorted(found, key=lambda c: c.name)


def default_locale(task: str) -> str:
    return "zh-CN" if task == "chengbo-zh" else "en-US"


@pytest.fixture(scope="module")
async def outcomes(dev_server, tmp_path_factory) -> dict[str, Outcome]:
    folder = tmp_path_factory.mktemp("strong-outputs")
    client = await connect(Connection(address=dev_server.address, data_dir=folder))
    runs = cases()
    with CorpusWeb(BUILTIN / "corpus") as web, FixtureModel(FIXTURES, web_url=web.base_url) as model:
        variants = sorted({c.variant for c in runs})
        async with fixture_workers(client, model, web, folder, variants) as queues:
            done = await run_cases(client, queues, runs)
        found = {fixture_id(f): judge(f, done, model, web.base_url) for f in STRONG_ITEMS + WEAK_ITEMS}
    rates = guard_rates(found)
    for name, outcome in sorted(found.items()):
        print(f"{outcome.verdict:>10}  {name}  (asked {outcome.asked}, served {outcome.served}) {outcome.why[:150]}")
    print(json.dumps(rates, indent=1, ensure_ascii=False))
    if os.environ.get("RECORD_GUARD_RATES") == "1":
        RATES.write_text(json.dumps(rates, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return found


def fixture_id(f: Fixture) -> str:
    kind = f.variant or "_".join(f.step.split()[:6])
    return "-".join(x for x in (f.role, f.task, kind, "" if f.locale == default_locale(f.task) else f.locale) if x)


def judge(f: Fixture, done: list[Ran], model: FixtureModel, web: str) -> Outcome:
    variants = [f.variant] if f.variant else sorted({r.case.variant for r in done if r.case.variant != WEAK_VARIANT})
    mine = [r for r in done if r.case.task == f.task and r.case.variant in variants]
    mine = [r for r in mine if (r.case.locale or default_locale(f.task)) == f.locale]
    if not mine:
        return Outcome(f, None, 0, 0, "not run", "no run of its task")
    # A plan or findings serve several runs: judged in each, the worst counts.
    judged = [verdict(f, r, model.asked[f.key(r.case.variant)], model.served[f.key(r.case.variant)], web,
                      weak=f.variant == WEAK_VARIANT) for r in mine]  # fmt: skip
    return next((o for o in judged if o.verdict not in ("as written", "caught")), judged[0])


def guard_rates(found: dict[str, Outcome]) -> dict:
    """Strong outputs refused, re-asked or changed out of N (by role); weak
    outputs caught out of M (the invented ones: those asserted)."""
    strong = [o for o in found.values() if o.fixture in STRONG_ITEMS]
    weak = [o for o in found.values() if o.fixture in INVENTED_ITEMS]
    by_role = {}
    for role in ("reporter", "planner", "researcher"):
        mine = [o for o in strong if o.fixture.role == role]
        by_role[role] = {"not_as_written": sum(o.verdict != "as written" for o in mine), "of": len(mine)}
    return {
        "strong_outputs": {
            "not_as_written": sum(o.verdict != "as written" for o in strong),
            "of": len(strong),
            "by_role": by_role,
            "not_as_written_ids": sorted(k for k, o in found.items() if o in strong and o.verdict != "as written"),
        },
        "weak_outputs": {
            "caught": sum(o.verdict == "caught" for o in weak),
            "of": len(weak),
            "shipped_ids": sorted(k for k, o in found.items() if o in weak and o.verdict != "caught"),
            "faithful_enough_shipped": sum(
                o.verdict == "shipped" for o in found.values() if o.fixture.label == "faithful enough"
            ),
        },
    }


@pytest.mark.parametrize("fixture", STRONG_ITEMS, ids=fixture_id)
async def test_a_strong_output_goes_through_every_guard_as_written(outcomes: dict[str, Outcome], fixture: Fixture):
    outcome = outcomes[fixture_id(fixture)]
    assert outcome.verdict == "as written", (outcome.verdict, outcome.why)
    if fixture.role == "reporter":  # called once, its report shipped with nothing taken out or put before it
        report = outcome.ran.result.final_report
        assert outcome.asked == 1 and not outcome.ran.result.warnings
        assert report.lstrip().startswith(fixture.replies[0].lstrip().split("\n", 1)[0])


@pytest.mark.parametrize("fixture", INVENTED_ITEMS, ids=fixture_id)
async def test_a_weak_models_invented_output_is_not_shipped_as_written(outcomes: dict[str, Outcome], fixture: Fixture):
    """Asked again; then replaced by the report built from the findings, or
    (when less than half of the better reply is found in no source) kept with
    its unsupported statements marked and a warning: never shipped as written,
    as research (issue 37, item 2)."""
    outcome = outcomes[fixture_id(fixture)]
    assert outcome.verdict == "caught", (outcome.verdict, outcome.why)
    result = outcome.ran.result
    if fixture.role == "reporter" and any("marked in the report" in w for w in result.warnings):
        assert MARK in result.final_report and NOTE_HEADING in result.final_report  # kept: marked, and listed
