"""Faithful statements that the support check read as invention, each
pinned (``activities/support.py``, ``activities/number_words.py``,
``activities/arithmetic.py``): a number its source spells out, a
space-grouped count taken for a year, a one-digit conversion, a shorthand
line whose passage holds its figures, a fraction named in another language.
Each was the one false "invented" statement of a faithful report in
``tests/fixtures/strong/probe``; the invented side of each rule is asserted
beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

from activities.figures import figures, joined_thousands, plain
from activities.llm import _material, shown_text
from activities.number_words import chinese, english
from activities.support import support_of

MATERIAL = Path(__file__).resolve().parent / "fixtures" / "material"


def material(task: str) -> str:
    request = json.loads((MATERIAL / task / "reporter.json").read_text(encoding="utf-8"))
    return shown_text(_material(request["messages"]))


def kinds(report: str, shown: str, question: str = "") -> list[tuple[str, bool]]:
    _, statements = support_of(report, shown, question)
    return [(s.support, s.invented) for s in statements]


def test_numbers_spelled_out_are_read():
    assert [(f.values[0], f.percent) for f in english("forty-eight turbines and forty per cent")] == [
        (48.0, False),
        (40.0, True),
    ]
    assert [f.values[0] for f in english("one hundred and twenty staff, two million visitors")] == [120, 2_000_000]
    assert [f.values[0] for f in english("Twenty-one thousand five hundred visitors")] == [21_500]
    assert english("one of the three farms") == []  # counts up to ten are no figures
    assert english("£18.4 million in 2021") == []  # a scale word alone is no number
    assert [f.values[0] for f in chinese("员工一百二十余人，三千五百台，两万人，一万二千")] == [120, 3500, 20000, 12000]
    assert chinese("第一家，二〇二三年") == []


def test_a_number_the_source_spells_out_is_stated():
    zh = "[澄波公司简介](http://x/zh): 公司现有员工一百二十余人，在临澜设有服务中心。"
    assert kinds("The company has more than 120 employees.", zh) == [("stated", False)]
    en = "[Carrick Bank](http://x/c): The wind farm has forty-eight turbines off the coast of Brackwater."
    assert kinds("Carrick Bank has 48 turbines.", en) == [("stated", False)]


def test_a_spelled_number_elsewhere_does_not_clear_an_invented_figure():
    shown = (
        "[Olvane annual report](http://x/a): Revenue was £26.0 million in 2023.\n\n"
        "[Olvane](http://x/o): The Tern-4 is in service in more than thirty countries."
    )
    assert kinds("Olvane's turnover reached £30m in 2023 including service contracts.", shown)[0] == (
        "unsupported",
        True,
    )


def test_a_figure_its_source_spells_out_by_chance_may_still_be_computed():
    shown = (
        "[Oysters](http://x/o): The cooperative harvested 420 tonnes of oysters in 2023.\n\n"
        "[Cooperative](http://x/c): It was founded in 1954 by eleven oyster farmers; today it has 38 member farms."
    )
    report = "The cooperative harvested 420 tonnes in 2023 and has 38 member farms; that is a little over 11 tonnes per farm."
    assert ("derived", False) in kinds(report, shown)


def test_a_count_grouped_by_spaces_is_no_year():
    assert not any(f.year for f in figures(joined_thousands(plain("passé de 2 150 couples à 1 333"))))
    assert [f.year for f in figures(plain("en 2018 et 2023"))] == [True, True]
    shown = (
        "[Vellmark Coastal Bird Survey 2023](http://x/s): The black-legged kittiwake showed the largest decline of "
        "any species: 1,333 breeding pairs were counted in 2023 against 2,150 in 2018, a fall of 38%.\n\n"
        + "\n\n".join(
            f"[Survey page {n}](http://x/p{n}): Survey 2023, published on 30 November 2023." for n in range(8)
        )
    )
    report = (
        "D’après le rapport publié le 30 novembre 2023, l’effectif de la mouette tridactyle est passé de 2 150 "
        "couples nicheurs en 2018 à 1 333 en 2023, soit 817 couples de moins."
    )
    assert kinds(report, shown) == [("derived", False)]


def test_a_one_digit_conversion_of_a_stated_figure_is_derived():
    shown = (
        "[Tern-4](http://x/t): | Specification | Tern-4 |\n|---|---|\n| Accuracy | ±2 mm |\n| Sampling rate | 1 Hz |"
    )
    report = "The Tern-4 is accurate to ±2 mm (≈ ±0.08 in)."
    assert kinds(report, shown) == [("derived", False)]
    assert kinds("The Tern-4 is accurate to ±2 mm (≈ ±0.3 in).", shown)[0] == ("unsupported", True)  # 2 mm is 0.08 in


def test_a_shorthand_line_is_computed_from_the_passage_holding_its_figure():
    """The recorded material of olvane-revenue-growth: "FY22", "YoY" are
    words none of the passages holds, but the one that holds £21.7 million
    holds £18.4 million too."""
    shown = material("olvane-revenue-growth")
    assert kinds("- FY22: £21.7m, +17.9 % YoY.", shown) == [("derived", False)]
    assert kinds("- FY22: £21.7m, +27.9 % YoY.", shown) == [("unsupported", True)]


def test_a_fraction_named_in_another_language_is_a_factor():
    shown = "[Oysters](http://x/o): The cooperative harvested 420 tonnes in 2023; about a quarter is exported."
    report = "Circa un quarto del raccolto viene esportato; per il 2023 si tratta di circa 105 tonnellate."
    assert ("derived", False) in kinds(report, shown)


def test_pairs_are_two_birds_each():
    """Before, "2,480 breeding adults" was "derived" by chance (3,310 / 1,333
    × 1,000); the arithmetic shown is now the one the writer did."""
    shown = "[Puffins](http://x/p): The survey counted 1,240 breeding pairs of puffins at Hallow Point in 2023."
    _, statements = support_of("1,240 pairs means about 2,480 breeding adults.", shown)
    assert statements[0].support == "derived" and statements[0].arithmetic == "1,240 × 2 = 2,480"


def test_the_figures_a_statement_lists_are_summed_and_averaged():
    """A strong model's Spanish table row: its own four figures, their sum
    and their mean (in the material, the figures stand in two tables)."""
    shown = (
        "[Memoria 2022/23](http://x/m): Campaña 2020/2021: 16.880 t; campaña 2021/2022: 12.430 t.\n\n"
        "[Memoria 2023/24](http://x/n): Campaña 2022/2023: 7.960 t; campaña 2023/2024: 9.615 t."
    )
    row = "| **Media** | **(16.880 + 12.430 + 7.960 + 9.615) ÷ 4 = 46.885 ÷ 4 = 11.721,25** |"
    _, statements = support_of(row, shown)
    assert statements[0].support == "derived" and "11,721.25" in statements[0].arithmetic
    _, wrong = support_of(row.replace("11.721,25", "12.721,25"), shown)
    assert wrong[0].support == "unsupported"
