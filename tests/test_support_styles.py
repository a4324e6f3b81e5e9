"""How strong models write numbers and periods, read as they mean them
(``activities/figures.plain``, ``activities/support``): a second set of
faithful reports, written for this suite's recorded reporter material in
the styles an outside check may try (French, German, Italian, Portuguese,
Japanese; executive summaries, fiscal-year labels, thousands grouped by
spaces, unit conversions, hedged and terse answers, "not given" answers).
None may be judged invention enough to be asked for again; the unit tests
below pin each way of writing that one of them was refused for.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from activities.figures import figures, hedged, joined_thousands, plain
from activities.llm import _material, shown_text
from activities.statement_text import capitalises_nouns, sentences, sources_heading
from activities.support import _prose, same_language, support_of
from workflows.statements import invented_too_much, mostly_invention

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "tests" / "fixtures" / "strong" / "probe"
MATERIAL = ROOT / "tests" / "fixtures" / "material"
QUESTIONS = {
    (t := json.loads(line))["id"]: t["question"]
    for line in (ROOT / "client/evaluation/builtin/tasks.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
}
TASKS = sorted((p.name for p in MATERIAL.iterdir()), key=len, reverse=True)


def material(task: str) -> str:
    request = json.loads((MATERIAL / task / "reporter.json").read_text(encoding="utf-8"))
    return shown_text(_material(request["messages"]))


@pytest.mark.parametrize("path", sorted(PROBE.glob("*.md")), ids=lambda p: p.stem)
def test_a_faithful_report_in_any_style_is_not_judged_invention(path: Path):
    task = next(t for t in TASKS if path.stem.startswith(f"{t}-"))
    counts, statements = support_of(path.read_text(encoding="utf-8"), material(task), QUESTIONS.get(task, ""))
    assert counts is not None and counts.stated + counts.derived >= 3, path.stem
    invented = [s.text for s in statements if s.invented]
    assert not invented_too_much(counts) and not mostly_invention(counts), invented


def values(text: str) -> list[float]:
    return [f.values[0] for f in figures(joined_thousands(plain(text)))]


def test_thousands_grouped_by_spaces_are_one_figure():
    assert values("| Mouette tridactyle | 2 150 | 1 333 | −38 % |") == [2150, 1333, 38]
    assert values("31\u202f600 passagers, 1\u00a0402 couples, 2\u2009950 unités") == [31600, 1402, 2950]
    assert values("en 2023 240 couples") == [2023, 240]  # a year is no thousands group
    assert values("1 234 567,5 t") == [1234567.5]  # with its decimals


def test_material_reads_a_row_of_figures_both_ways():
    """A PDF's table row flattened to "168 171 183" is three figures in the
    material (and one, 168171183, too): a report's "168 employees" is stated."""
    shown = "[Report](http://x/r): Employees (year end) 168 171 183 196 212."
    counts, statements = support_of("The company had 171 employees at the end of the year.", shown)
    assert counts is not None and statements[0].support == "stated"


def test_a_fiscal_years_label_is_no_name_and_its_year_is_checked():
    shown = "[Annual report](http://x/a): Revenue was £18.4 million in 2021 and £26.0 million in 2023."
    _, ok = support_of("Revenue rose from £18.4 million in FY2021 to £26.0 million in FY23.", shown)
    assert [(s.support, s.invented) for s in ok] == [("stated", False)]
    _, wrong = support_of("Revenue was £26.0 million in FY2031.", shown)  # a year the material lacks
    assert wrong[0].invented


def test_a_span_of_years_cut_to_two_digits_is_no_figure():
    assert values("Growth was even across 2021–23 and FY2021/22.") == [2021, 2023, 2021, 2022]
    assert values("Surveys of 1998-02 and 2018-23") == [1998, 2002, 2018, 2023]
    assert values("scores of 2019-5") == [2019, 5]  # not a span of years


def test_an_abbreviation_ends_no_sentence():
    assert sentences("Op. margin rose to 16.9 %, a CAGR of c. 19 %. Then it fell.") == [
        "Op. margin rose to 16.9 %, a CAGR of c. 19 %.",
        "Then it fell.",
    ]
    assert sentences("Umsatz: 26,0 Mio. £ im Jahr 2023.") == ["Umsatz: 26,0 Mio. £ im Jahr 2023."]


def test_a_french_report_full_of_elisions_is_not_taken_for_english():
    """The letters elided in "l’Agence", "d’après", "s’est" are words of
    English text too ("s" of "harbour's"); they no longer count, so a French
    report over English sources is read as another language (its words are
    not asked to match), not as English full of unknown names."""
    report = (PROBE / "selm-nitrate-fr-short.md").read_text(encoding="utf-8")
    assert not same_language(_prose(report), material("selm-nitrate"))  # its prose, as support_of reads it
    assert same_language("The harbour's board met. It's the mayor's office.", material("selm-nitrate"))


# --- invented reports, written to slip through (tests/fixtures/weak/probe) ---------------

WEAK = ROOT / "tests" / "fixtures" / "weak" / "probe"


@pytest.mark.parametrize("path", sorted(WEAK.glob("*.md")), ids=lambda p: p.stem)
def test_an_invented_report_in_any_style_is_caught(path: Path):
    """Invented figures written with spaces, in fiscal years or year spans,
    in French, German, Italian or Spanish, after "c." or "approx.", wrong
    conversions, invented table rows, names hidden in Title Case, figures
    behind "not reported": each report is invention enough to be asked for
    again (a third of its factual statements or more invented)."""
    task = next(t for t in TASKS if path.stem.startswith(f"{t}-"))
    counts, statements = support_of(path.read_text(encoding="utf-8"), material(task), QUESTIONS.get(task, ""))
    assert invented_too_much(counts) or mostly_invention(counts), [(s.support, s.text[:80]) for s in statements]


def test_a_hedge_is_a_word_of_its_own():
    assert hedged("about 2,700") and hedged("c. 19 %") and hedged("environ 2 000") and hedged("约860台")
    assert not hedged("the Environment Agency's 20 stations")  # not "environ"
    assert not hedged("turnover of £26.0 million") and not hedged("the founder, 3 Dec. 2018, etc. 5")


def test_english_full_of_names_is_still_english():
    """Capitalised names and Title Case headings made an English report look
    German (nouns capitalised), so its statements of names only were never
    judged: "The RP-9 was designed by Edith Rusk at the Kelderby Institute"."""
    report = (WEAK / "puffins-latest-titlecase.md").read_text(encoding="utf-8")
    assert not capitalises_nouns(report)
    assert capitalises_nouns("Die Firma hat im Jahr 2023 einen Umsatz von 26 Millionen Pfund erzielt. " * 4)


def test_not_reported_shields_no_figure_found_nowhere():
    shown = "[Survey](http://x/s): The survey counted 1,333 pairs of kittiwakes in 2023."
    _, said = support_of("The survey's cost is not reported, though the institute spent £312,000 on it.", shown)
    assert said[0].support == "unsupported" and said[0].invented
    _, honest = support_of("No figure for 2012 is given; the survey's count was 1,333 pairs in 2023.", shown)
    assert honest[0].support == "absent"


def test_a_heading_made_of_a_sources_verb_opens_no_sources_section():
    assert sources_heading("## Sources") and sources_heading("## Key Citations")
    assert not sources_heading("## Sourced context and background")
