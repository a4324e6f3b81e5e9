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

from activities.arithmetic import Derivations
from activities.figures import figures, joined_thousands, plain
from activities.llm import _material, shown_text
from activities.number_words import chinese, english
from activities.support import support_of
from activities.units import CONVERSIONS, named_conversions, named_unit

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


# --- arithmetic a statement shows (activities/expressions.py) ---------------------------------

ANNUAL = (
    "[Fact Book](http://x/f): Total headcount on 1 December 2019 was 18,420 students and on 1 December 2024 it "
    "was 22,340 students.\n\n"
    "[Bulletin](http://x/b): | Operator | Q1 | Q2 |\n|---|---|---|\n| Westerfold Rail | 88.9% | 90.6% |\n\n"
    "[Bulletin](http://x/b): Trains planned (thousands): | Q1 | Q2 |\n|---|---|\n| 55.9 | 57.8 |"
)


def test_arithmetic_the_statement_shows_is_checked_and_derived():
    for shown in (
        "CAGR = (22,340 / 18,420)^(1/5) − 1 ≈ 0.0393, about 3.93 % a year.",
        # an exponent as superscript, from a figure the report computes elsewhere
        "(22,340 / 18,420)^(1/5) = 1.03934. Check: 18,420 × 1.03934⁵ ≈ 22,340.",
        "Weighted: (88.9×55.9 + 90.6×57.8) ÷ 113.7 ≈ **89.76 %**.",
        "TCAC : (22 340 ÷ 18 420)^(1/5) − 1 ≈ 0,0393.",  # French: spaced thousands, a decimal comma
    ):
        _, statements = support_of(shown, ANNUAL)
        assert all(s.support == "derived" for s in statements), shown
    for wrong in (
        "CAGR = (22,340 / 18,420)^(1/5) − 1 ≈ 0.0493.",
        "Weighted: (88.9×55.9 + 90.6×57.8) ÷ 113.7 ≈ 91.76 %.",
    ):
        assert support_of(wrong, ANNUAL)[1][0].support == "unsupported", wrong


def test_a_figure_written_glued_to_a_times_sign_is_a_figure():
    assert [f.text for f in figures(plain("(88.9×55.9 + 90.6÷57.8)"))] == ["88.9", "55.9", "90.6", "57.8"]


def test_a_document_part_and_a_date_are_no_figures():
    assert [f.text for f in figures(plain("Fact Book 2023, Table 2.1; UE 2021, Tab. 4.1 and § 2"))] == ["2023", "2021"]
    assert [f.values[0] for f in figures(plain("stable on 2021-03-03; surveys of 2018–23"))] == [2021, 3, 3, 2018, 2023]


def test_a_count_beside_a_figure_is_no_arithmetic():
    """SmolLM2-like chance: 11.7 as "11.7 / 1", 8.4 as "4.4 + 4" beside "four times"."""
    shown = "[Specs](http://x/s): The RP-9 weighs 4.4 kg and the Tern-4 3.1 kg; the RP-9 is four times less accurate."
    assert kinds("The Tern-4 weighs 3.1 kg, about 8.4 pounds, four times less than 11.7 pounds.", shown)[0][0] == (
        "unsupported"
    )


# --- names -----------------------------------------------------------------------------------

GERMAN = (
    "[Umwelterklärung 2024](http://x/u): Die fossilen CO2-Emissionen des Werks Riedbach betrugen 2023 "
    "1.102.300 t. Die Werte stimmen mit den von der Deutschen Emissionshandelsstelle geprüften Berichten überein, "
    "und die Bilanzgrenze ist gegenüber der Umwelterklärung 2021 unverändert geblieben."
)


ENGLISH_FINDINGS = (
    "- The Riedbach plant's fossil CO2 emissions were 1,102,300 t in 2023, according to the plant's 2024 "
    "statement, which the research step read in German. [Umwelterklärung 2024](http://x/u)"
)


def test_a_translated_name_of_common_words_is_no_invention_over_material_in_another_language():
    """English findings over a German page: the report's "Environmental
    Statement" translates "Umwelterklärung"; "Kelderbark" is no word of any
    language, and still invented."""
    shown = f"{ENGLISH_FINDINGS}\n\n{GERMAN}"
    report = "The 2024 Environmental Statement gives fossil CO₂ emissions of 1,102,300 t for Riedbach in 2023."
    assert kinds(report, shown) == [("stated", False)]
    invented = "The 2024 Environmental Statement of the Kelderbark plant gives 1,102,300 t for 2023."
    assert kinds(invented, shown)[0] == ("unsupported", True)


def test_a_name_of_common_words_the_material_never_uses_is_invented_in_its_own_language():
    shown = "[Oysters](http://x/o): The Selm Estuary Oyster Cooperative harvested 420 tonnes of oysters in 2023."
    assert kinds("The cooperative harvested 420 tonnes in 2023, says the Royal Society for Oysters.", shown)[0] == (
        "unsupported",
        True,
    )


def test_abbreviations_and_periods_are_no_names():
    from activities.statement_text import names

    assert names("Our KPIs and PPMs rose in Feb-24 and Mar-2022, says a Chinese-language post by Jonas Pell") == [
        "jonas",
        "pell",
    ]


def test_a_tables_computed_column_comes_from_the_figures_stated_around_it():
    """The change between two seasons, in a table of its own under a
    heading that shares no word with the pages: from the report's own
    stated figures nearby (a wide pool, so each figure of fewer than four
    digits starts from one the row derives first)."""
    shown = "[Memoria](http://x/m): Aceituna entregada: 16.880 t en 2020/2021 y 12.430 t en 2021/2022."
    report = (
        "La cooperativa recibió 16.880 t en 2020/2021 y 12.430 t en 2021/2022.\n\n"
        "| Paso | Variación |\n|---|---|\n| 2020/2021 → 2021/2022 | −4.450 t (−26,4 %) |\n"
    )
    assert [s.support for s in support_of(report, shown)[1]] == ["stated", "derived"]
    chance = (
        "The survey found 1,240 puffin pairs; burrow occupancy was 71 %.\n\n- Sand eel landings fell by 1,169 tonnes."
    )
    puffins = "[Survey](http://x/s): The survey found 1,240 puffin pairs in 2023; burrow occupancy was 71 %."
    assert support_of(chance, puffins)[1][-1].support == "unsupported"  # 1,240 − 71 % is no arithmetic


def test_a_tables_rows_may_compute_from_its_total_and_average_rows():
    """A strong model's Spanish table: each season against the mean that
    the table's last rows compute from its first column (a chain that
    resolves over the report's passes); an index column ("2019 = 100")."""
    shown = (
        "[Memoria](http://x/m): Campaña 2020/2021: 16.880 t; 2021/2022: 12.430 t; 2022/2023: 7.960 t; "
        "2023/2024: 9.615 t."
    )
    report = (
        "| Campaña | Aceituna (t) | Diferencia con la media |\n|---|---|---|\n"
        "| 2020/2021 | 16.880 | +5.158,75 |\n| 2021/2022 | 12.430 | +708,75 |\n"
        "| 2022/2023 | 7.960 | −3.761,25 |\n| 2023/2024 | 9.615 | −2.106,25 |\n"
        "| **Total** | **46.885** | |\n| **Media** | **11.721,25** | |\n"
    )
    assert [s.support for s in support_of(report, shown)[1]] == ["derived"] * 4 + ["derived", "derived"]
    index = "[Fact Book](http://x/f): Headcount: 18,420 in 2019 and 18,960 in 2020."
    rows = (
        "| Year | Headcount | Index (2019 = 100) |\n|---|---|---|\n| 2019 | 18,420 | 100 |\n| 2020 | 18,960 | 102.9 |\n"
    )
    assert [s.support for s in support_of(rows, index)[1]][-1] == "derived"


def test_a_percentage_is_held_only_by_a_percentage():
    shown = "[Minutes](http://x/m): The board met on 13 November 2017 and scored the bids 60 per cent on quality."
    assert kinds("About 13 per cent of vehicles are heavy goods vehicles.", shown)[0][0] == "unsupported"
    assert kinds("The bids were scored 60 % on quality, the board said in November 2017.", shown) == [("stated", False)]


def test_a_persons_name_is_never_taken_for_a_translation():
    """Over French pages, "Emergency Observatory" may translate
    "Observatoire des urgences"; "Dr. Pierre Martin" names a person the
    pages never name, made of common words though it is."""
    shown = (
        "- The adult emergency department's median wait was 158 minutes in 2024. [Rapport](http://x/r)\n\n"
        "[Rapport d'activité](http://x/r): Le délai médian de prise en charge aux urgences adultes était de 2 h 38 "
        "en 2024, contre 3 h 12 en 2022, selon le rapport de l'hôpital et de l'observatoire des urgences."
    )
    assert kinds("The improvement was led by Dr. Pierre Martin, head of the department since 2019.", shown)[0] == (
        "unsupported",
        True,
    )


def test_in_german_a_persons_name_after_a_title_is_still_checked():
    shown = "[Geschäftsbericht](http://x/g): Die Wasserversorgung Hohenfarn verlor 2023 insgesamt 1.960.500 m³ Wasser."
    report = "Geschäftsführer Dr. Klaus Weber sagte, die Wasserversorgung Hohenfarn verlor 2023 1.960.500 m³ Wasser."
    assert kinds(report, shown)[0] == ("unsupported", True)
    assert kinds("Die Wasserversorgung Hohenfarn verlor 2023 insgesamt 1.960.500 m³ Wasser.", shown)[0][0] == "stated"


def test_a_figure_of_many_digits_may_come_from_a_figure_stated_far_above():
    """A what-if table far below the budget it divides: "≈ £2,327.35" is
    £486.3m / 208,950 (six significant digits: chance is rare)."""
    shown = (
        "[Budget](http://x/b): The council adopted a gross revenue expenditure budget of £486.3m.\n\n"
        "[Population](http://x/p): Mid-2022 estimate 208,950; mid-2023 estimate 211,840."
    )
    filler = "\n".join(
        f"- Item {n}: the council met on {n + 1} May 2024 about {100 + n} road repairs." for n in range(10)
    )
    report = (
        "The council adopted a gross budget of £486.3m.\n\n" + filler + "\n\n"
        "| Denominator | Population | Per resident |\n|---|---|---|\n| Mid-2022 estimate | 208,950 | ≈ £2,327.35 |\n"
    )
    assert support_of(report, shown)[1][-1].support == "derived"


def test_a_texts_language_is_told_by_its_function_words():
    from activities.material import language_of, passages_of, translated

    assert language_of("The plant's emissions fell by a seventh between 2020 and 2023.") == "en"
    assert (
        language_of("Die Emissionen des Werks sind von 2020 bis 2023 gesunken, und die Werte wurden geprüft.") == "de"
    )
    assert language_of("La producción media de la cooperativa fue de 11.721 t en las cuatro campañas.") == "es"
    assert language_of("公司现有员工一百二十余人，在临澜设有服务中心。") == "cjk"
    assert language_of("| 2020 | 1.284,6 |") is None
    german = passages_of(GERMAN)
    assert translated("The plant's emissions fell in 2023, the statement of the plant says.", german)
    assert not translated("Die Emissionen des Werks sind gesunken, sagt die Erklärung.", german)


def test_a_growth_factor_of_a_stated_percentage_is_known():
    """ "About 5 % above 2022" makes 2022 = 1.3 million / 1.05: the factor is
    the percentage's, not a figure found nowhere."""
    shown = "[Press release](http://x/p): Sales passed 1.3 million copies in 2023, about 5 % more than in 2022."
    assert kinds("2022 ≈ 1,300,000 ÷ 1.05 ≈ 1,238,100 copies.", shown) == [("derived", False)]
    assert kinds("2022 ≈ 1,300,000 ÷ 1.07 ≈ 1,214,953 copies.", shown)[0][0] == "unsupported"  # 7 % is on no page


def test_the_units_a_statement_names_are_read_as_each_unit_word_reads_them():
    """The conversions a statement names, found by one pattern each, are the
    ones its unit words name one by one (``named_unit``: at a word's start,
    "mile" in "miles" but no "day" in "today"), over every report line of
    the held-out suites and cases at the edges."""
    heldout = Path(__file__).resolve().parent / "fixtures" / "heldout"
    lines = [line for path in sorted(heldout.rglob("*.md")) for line in path.read_text(encoding="utf-8").splitlines()]
    lines += ["times today", "3 mi. away", "12 (in) wide", "每月 3 天", "somes second hand", "a semaine", "mes"]
    assert len(lines) > 1000
    for line in lines:
        units = f" {line.lower()} "
        one_by_one = [n for n, (_, _, words) in enumerate(CONVERSIONS) if any(named_unit(w, units) for w in words)]
        assert named_conversions(units) == one_by_one, line
    assert named_conversions(" 40 minutes a day ") and not named_conversions(" times today ")


def test_one_digit_figures_of_a_page_derive_no_percentage_and_a_had_names_no_hectare():
    """Both ways. SmolLM2's kittiwake-decline report (at ``ea0abea``) was
    "derived": its "75 %" as (2 − 8) / 8 of a page's "Page 2" and an "8",
    its "4,962 pairs" as 2,008 hectares in acres, read from "they had". A
    statement that states its one-digit figures still computes from them,
    and a hectare written " ha" still converts."""
    (fall,) = figures("75 %")
    pool = [(2.0, False), (8.0, False)]
    assert Derivations(pool).find(fall, anchors={2.0, 8.0}) is None
    assert Derivations(pool, own={2.0, 8.0}).find(fall, anchors={2.0, 8.0}) is not None  # "from 8 to 2, -75 %"
    (pairs,) = figures("4,962")
    hectares = [(2008.0, False)]
    assert Derivations(hectares, units="they had found 4,962 pairs").find(pairs, anchors={2008.0}) is None
    assert Derivations(hectares, units="2,008 ha, or 4,962 acres").find(pairs, anchors={2008.0}) is not None
    assert not named_unit(" ha", " they had ") and named_unit(" ha", " 12 ha. ") and named_unit(" lbs", " 3 lbs ")
