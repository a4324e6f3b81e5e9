"""How each statement of a report is supported by what its writer was shown
(activities/support.py, activities/figures.py, activities/statement_text.py):
stated, derived (each kind of arithmetic, within the rounding the statement
uses), absent, unsupported; and what is no figure and no statement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from activities.arithmetic import Derivations
from activities.figures import figures, plain
from activities.statement_text import statements_of
from activities.support import same_language, support_of
from workflows.statements import invented_too_much, mostly_invention, mostly_unsupported
from workflows.support_models import SupportCounts

QUESTION = "Who is the mayor of Brackwater, and how many votes did the mayor receive when elected?"
MATERIAL = f"""[user]
# Research question
{QUESTION}

# Findings
## Find the mayor
- Tobias Wren, a former ferry captain with Harrowgate Ferries, was elected mayor of Brackwater on 6 May 2021.

# Evidence: passages of the pages the findings rest on, each after a link to its page

[Brackwater](http://127.0.0.1:8080/towns/brackwater.md): Brackwater is a harbour town at the mouth of the
Selm. Its mayor, Tobias Wren, was elected on 6 May 2021 with 4,312 votes, ahead of Ada Locke with 3,877.

[Harrowgate Ferries](http://127.0.0.1:8080/firms/harrowgate.md): Harrowgate Ferries runs the crossing from
Brackwater to Hallow Point, which takes 40 minutes, four times a day. The ferry carried 182,400 passengers in 2022.

[Olvane Annual Report 2023](http://127.0.0.1:8080/firms/olvane.md): | Year | Revenue (£ million) | Employees |
|------|------|------|
| 2019 | 15.2 | 168 |
| 2020 | 14.1 | 171 |
| 2021 | 18.4 | 183 |
| 2022 | 21.7 | 196 |
| 2023 | 26.0 | 212 |

[Selm Oyster Cooperative](http://127.0.0.1:8080/firms/oysters.md): The cooperative harvested 1,960 tonnes of
oysters in 2019 and 2,675 tonnes in 2023. The Selm is 38 km long.

[Ferry fares](http://127.0.0.1:8080/news/fares.md): In 2017 the guide gave the adult fare as £6.40; the 2023
timetable gives £8.90.
"""


def support(report: str) -> list[tuple[str, bool]]:
    _, statements = support_of(report, MATERIAL, QUESTION)
    return [(s.support, s.invented) for s in statements]


def one(sentence: str):
    _, statements = support_of(sentence, MATERIAL, QUESTION)
    assert len(statements) == 1, statements
    return statements[0]


# --- stated --------------------------------------------------------------------


def test_a_statement_a_passage_holds_is_stated_with_its_page_and_passage():
    s = one("Tobias Wren won the election with 4,312 votes, ahead of Ada Locke with 3,877.")
    assert s.support == "stated" and s.url == "http://127.0.0.1:8080/towns/brackwater.md"
    assert "4,312 votes" in s.passage


@pytest.mark.parametrize(
    "sentence",
    [
        "Wren received 4,312 votes [3].",  # a footnote marker is no figure
        "Wren received 4,312 votes.[^2]",
        "Wren received 4,312 votes ([Brackwater](http://127.0.0.1:8080/towns/brackwater.md)).",  # a link's address
        "Wren received 4,312 votes¹.",
        "Wren received 4,312 votes【1】.",
    ],
)
def test_citation_style_is_no_figure(sentence: str):
    assert one(sentence).support == "stated"


def test_a_name_the_material_holds_is_stated_in_a_close_paraphrase():
    assert one("Before becoming mayor, Tobias Wren captained ferries for Harrowgate Ferries.").support == "stated"


# --- derived: each kind of arithmetic ---------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "arithmetic"),
    [
        ("The harvest rose by 715 tonnes between 2019 and 2023.", "2,675 − 1,960 = 715"),
        ("From 1,960 t to 2,675 t, the harvest grew by about 36.5 %.", "(2,675 − 1,960) / 1,960 = 36.48 %"),
        ("Wren's margin over Ada Locke was 435 votes.", "4,312 − 3,877 = 435"),
        ("Wren and Locke received 8,189 votes between them.", "4,312 + 3,877 = 8,189"),
        ("Wren took 52.7 % of the votes cast for the two candidates.", "4,312 / (4,312 + 3,877) = 52.66 %"),
        ("Wren received 1.11 times as many votes as Ada Locke.", "4,312 / 3,877 = 1.112"),
        ("Olvane's revenue grew at a compound annual rate of 18.9 % from 2021 to 2023.", "^(1/2) − 1 = 18.87 %"),
        ("Olvane's average revenue over 2019–2023 was £19.08 million.", "/ 5 = 19.08"),
        ("The 2023 harvest was 2,675,000 kg of oysters.", "2,675 (× 1,000)"),
        ("The Selm is about 23.6 miles long.", "38 / 1.609"),
        ("The ferry carried about 15,200 passengers a month in 2022.", "182,400 / 12"),
        ("The adult fare rose by £2.50 (+39 %) from 2017 to 2023.", "8.9 − 6.4 = 2.5"),
        ("Olvane's revenue per employee was about £122,600 in 2023.", "26 / 212 = 0.1226 (× 1,000,000)"),
    ],
)
def test_a_figure_that_follows_by_arithmetic_from_stated_figures_is_derived(sentence: str, arithmetic: str):
    s = one(sentence)
    assert s.support == "derived", s
    assert arithmetic in s.arithmetic
    assert s.basis and all(b.url.startswith("http://127.0.0.1:8080/") for b in s.basis)


@pytest.mark.parametrize(
    "sentence",
    [
        "From 1,960 t to 2,675 t, the harvest grew by 36.9 %.",  # 36.48 does not round to 36.9
        "From 1,960 t to 2,675 t, the harvest grew by 37.5 %.",
        "The harvest rose by 815 tonnes between 2019 and 2023.",
    ],
)
def test_a_figure_outside_the_rounding_the_statement_uses_is_not_derived(sentence: str):
    s = one(sentence)
    assert s.support == "unsupported" and s.invented


def test_a_hedge_allows_the_rounding_of_the_last_non_zero_digit():
    assert one("The cooperative harvested about 2,700 tonnes in 2023.").support == "stated"
    assert one("The cooperative harvested 2,700 tonnes in 2023.").support == "unsupported"


def test_a_comparison_tables_derived_row_is_derived_and_its_header_is_no_statement():
    table = (
        "| Year | Revenue (£m) | Employees |\n|---|---|---|\n| 2021 | 18.4 | 183 |\n| 2023 | 26.0 | 212 |\n"
        "| Change | +7.6 (+41.3 %) | +29 |\n"
    )
    assert support(table) == [("stated", False), ("stated", False), ("derived", False)]


# --- absent and unsupported --------------------------------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        "The documents do not give the number of votes cast in 2016.",
        "None of the sources states Hallow Point's population at the 2023 census.",
        "The turnout is not stated in the material.",
        "Los documentos no indican la participación de 2021.",
        "资料中未提及2021年的投票率。",
    ],
)
def test_a_statement_that_the_material_lacks_something_is_absent(sentence: str):
    assert one(sentence).support == "absent"


def test_invented_figures_and_names_are_unsupported_and_invented():
    invented = (
        "The Harrowgate Ferry, the only vessel that travels from Brackwater to Saltcombe, offers a great deal.\n"
        "The Ferry Pier, a beautiful building on the south coast of Brackwater, will double its capacity.\n"
        "In 2020 the Brackwater Council saw a significant increase to 800 vessels, mostly in the sea.\n"
        "The Tresco, designed by a team from a luxury company, is bringing a fresh new look to Brackwater."
    )
    counts, statements = support_of(invented, MATERIAL, QUESTION)
    assert counts.invented == counts.judged == 4 and counts.supported_share() == 0.0
    assert all(s.support == "unsupported" for s in statements)


def test_a_sentence_with_material_names_but_no_passage_holding_it_is_unsupported_not_invented():
    s = one("Ada Locke now runs Harrowgate Ferries from an office on the Selm.")
    assert s.support == "unsupported" and not s.invented


# --- languages -------------------------------------------------------------------


def test_a_report_in_another_language_is_judged_by_its_figures():
    spanish = (
        "Tobias Wren es el alcalde de Brackwater desde el 6 de mayo de 2021.\n"
        "Obtuvo 4.312 votos, frente a los 3.877 de Ada Locke.\n"
        "Su ventaja fue de 435 votos.\n"
        "La cooperativa recogió 9.999 toneladas de ostras en 2023."
    )
    assert not same_language(spanish, MATERIAL)
    assert support(spanish) == [("stated", False), ("stated", False), ("derived", False), ("unsupported", True)]


def test_nouns_capitalised_by_a_language_are_no_names():
    german = (
        "Tobias Wren ist seit dem 6. Mai 2021 Bürgermeister von Brackwater. Er erhielt bei der Wahl 4.312 Stimmen. "
        "Zuvor war er Kapitän bei Harrowgate Ferries. Seine Gegenkandidatin Ada Locke erhielt 3.877 Stimmen, wie die "
        "Stadt mitteilte. Die Fähre braucht für die Überfahrt nach Hallow Point etwa 40 Minuten."
    )
    assert support(german) == [("stated", False)] * 4


def test_a_chinese_report_is_judged_against_chinese_material():
    material = (
        "[user]\n# 发现\n澄波海洋仪器有限公司是一家海洋仪器制造商，成立于1998年，总部位于宁州市的港口区，有320名员工。"
        "该公司在2023年一共售出了1250台Tern-4潮位计，主要销往沿海城市的港务局。"
    )
    held = "澄波海洋仪器有限公司成立于1998年。该公司有320名员工。该公司在2023年售出了1250台Tern-4潮位计。"
    invented = "该公司在2010年把总部迁往了上海。该公司在2023年一共售出了9000台潮位计。该公司目前有5000名员工。"
    assert [s.support for s in support_of(held, material)[1]] == ["stated"] * 3
    assert [s.invented for s in support_of(invented, material)[1]] == [True] * 3


# --- what is no statement and no figure ----------------------------------------------


def test_headings_links_references_and_restating_the_question_are_no_statements():
    report = (
        "# The mayor of Brackwater, 2021\n\n"
        "Who is the mayor of Brackwater? The mayor of Brackwater was elected by the people.\n"
        "- [Brackwater](http://127.0.0.1:8080/towns/brackwater.md)\n\n"
        "Wren received 4,312 votes.\n\n"
        "[^1]: Brackwater town page, 2024, http://127.0.0.1:8080/towns/brackwater.md\n\n"
        "## References\n\n1. Brackwater Council, Election results 2021 (4,312 votes), http://x/y\n"
    )
    assert [s.bare for s in statements_of(report, QUESTION)] == ["Wren received 4,312 votes."]


def test_only_a_short_heading_naming_sources_opens_a_list_of_sources():
    """A heading with the word is not a sources section: SmolLM2's orrins-ford-population findings sat
    under the question as a heading ("… If sources disagree, give each figure …"), and none of their
    statements was judged; a report titled with that question would have stated nothing. (A question in
    Chinese as a title is judged too: "如果来源不同" in a heading of more than ten characters.)"""
    question = "What is the population of Orrin's Ford? If sources disagree, give each figure and say where."
    report = f"# {question}\n\nWren received 9,999 votes.\n\n## Sources and further reading\n\nWren, 4,312 votes.\n"
    assert [s.bare for s in statements_of(report, question)] == ["Wren received 9,999 votes."]
    assert support(report.replace(question, "Where the sources disagree")) == [("unsupported", True)]
    for heading in ("## Sources", "## 5. References and further reading", "## 参考资料", "## Fuentes consultadas"):
        assert statements_of(f"{heading}\n\nWren received 9,999 votes.\n", QUESTION) == [], heading
    assert len(statements_of("# 奥林福德有多少人口？如果来源不同，请分别给出\n\n温伦获得9,999票。\n", QUESTION)) == 1


def test_a_reply_looping_on_one_sentence_states_it_once():
    loop = "The Ferry Pier of Brackwater will double its capacity in 2024.\n" * 200
    assert len(statements_of(loop, QUESTION)) == 1 and support_of(loop, MATERIAL, QUESTION)[0].judged == 1


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("1,960 t", [(1960.0, 1.96)]),
        ("4.312 Stimmen", [(4312.0, 4.312)]),
        ("3,2 km", [(3.2,)]),
        ("£3.2 million", [(3_200_000.0, 3.2)]),
        ("36.5 %", [(36.5,)]),
        ("The Tern-4 and RP-9 gauges, CO2, Q3, the 3rd and 3D", []),
        ("see [3] and [^12] and [1, 2]", []),
        ("1,234,567 and 1.234,5", [(1234567.0,), (1234.5,)]),
        ("2023年售出了2950台", [(2023.0,), (2950.0,)]),
        ("3万台", [(30000.0, 3.0)]),
    ],
)
def test_figures_as_written(text: str, values: list[tuple[float, ...]]):
    assert [f.values for f in figures(plain(text))] == values


def test_a_percentage_comes_only_from_a_share_a_change_or_a_rate():
    pool = [(1960.0, False), (2675.0, False)]
    (change,) = figures("36.5 %")
    (plain_figure,) = figures("36.5")
    assert Derivations(pool).find(change) is not None
    assert Derivations(pool).find(plain_figure) is None


# --- chance is no arithmetic; markup and questions are no statements ---------------


def test_a_character_reference_is_no_figure_and_ends_no_sentence():
    # a weak model copies "&#39;" from escaped findings: not the figure 39, and no "sentence" ends at its ";"
    report = "Harrowgate Ferries&#39; crossing carried 182,400 passengers in 2022."
    assert [s.bare for s in statements_of(report, QUESTION)] == [
        "Harrowgate Ferries' crossing carried 182,400 passengers in 2022."
    ]
    assert support(report) == [("stated", False)]


def test_the_question_restated_is_no_statement_nor_are_the_questions_own_figures():
    question = "What was the average monthly number of passengers on the Brackwater - Hallow Point route in 2023?"
    report = (
        "The research question: what was the number of passengers on the Brackwater-Hallow Point route in 2023?\n"
        "The answer for 2023 is given below.\n"
        "Based on the steps, the average number of passengers is approximately 18.45."
    )
    assert [s.bare for s in statements_of(report, question)] == [
        "Based on the steps, the average number of passengers is approximately 18.45."
    ]


def test_an_abbreviation_ends_no_sentence():
    said = statements_of("The crossing took 40 minutes vs. 55 minutes by road. Wren received 4,312 votes.", QUESTION)
    assert [s.bare for s in said] == [
        "The crossing took 40 minutes vs. 55 minutes by road.",
        "Wren received 4,312 votes.",
    ]


def test_a_year_meets_only_another_year_in_a_difference():
    (ratio,) = figures("2.47")
    (span,) = figures("52")
    pool = [(5000.0, False), (2023.0, False), (1971.0, False)]
    assert Derivations(pool).find(ratio, anchors={5000.0}) is not None  # 5,000 / 2,023: chance
    assert Derivations(pool, years={2023.0, 1971.0}).find(ratio, anchors={5000.0}) is None
    assert Derivations(pool, years={2023.0, 1971.0}).find(span, anchors={2023.0}).how == "2023 − 1971 = 52"


def test_arithmetic_with_a_change_of_scale_needs_three_digits():
    (two_digits,) = figures("2.5")
    (four_digits,) = figures("122,600")  # £ per employee from £26.0 million and 212 employees
    assert Derivations([(5000.0, False), (2.0, False)]).find(two_digits, anchors={5000.0}) is None  # 5,000 / 2, × 0.001
    per_employee = Derivations([(26.0, False), (212.0, False)]).find(four_digits, True, {26.0})  # "about"
    assert per_employee.how == "26 / 212 = 0.1226 (× 1,000,000)"


def test_a_weak_models_invented_figures_are_not_cleared_by_chance_arithmetic():
    # SmolLM2's ferry-average report (tests/fixtures/weak): 2.5 was "derived" as 5,000 / 2,023, then as 5,000 / 2 × 0.001
    report = "Under 5,000 people live there. The route from January to June 2023: 8-hour journey (2.5 hours vs. 1.9)."
    assert support(report)[-1] == ("unsupported", True)


def test_a_one_digit_figure_is_computed_only_from_figures_close_to_it():
    """A one-significant-digit figure is within a tenth of too much by chance: from what the sentence
    before it (or the question, or the statement itself) writes, not from anything the report said before."""
    (five,) = figures("5 million")
    pool = [(7_000_000.0, False), (2_100_000.0, False)]
    both = {7_000_000.0, 2_100_000.0}
    assert Derivations(pool).find(five, anchors=both).how == "7,000,000 − 2,100,000 = 4,900,000"
    assert Derivations(pool).find(five, anchors=both, close={7_000_000.0}) is None
    # and never as the product of two figures, close or not: 18 m of depth × 290,000 homes is no £5 million
    products = [(18.0, False), (290_000.0, False)]
    assert Derivations(products).find(five, anchors={18.0, 290_000.0}) is None


def test_smollm2s_live_turbine_report_computes_no_cost_from_depth_and_homes():
    """The eval's turbine-maker-founded run at 1eb67b0 (tests/fixtures/weak/smollm2-live): "maintenance cost
    £5 million per year", found nowhere, was derived as 18 m of water depth times 290,000 homes, two
    statements before, and the report shipped as research without a mark. Now it is unsupported and
    invented, and the run's note lists it."""
    live = Path(__file__).parent / "fixtures/weak/smollm2-live"
    (message,) = json.loads((live / "turbine-maker-founded-reporter.json").read_text(encoding="utf-8"))["messages"]
    question = message["content"].split("\n")[1]
    counts, statements = support_of(
        (live / "turbine-maker-founded-report.md").read_text(), f"[user]\n{message['content']}", question
    )
    assert [(s.support, s.invented) for s in statements][-1] == ("unsupported", True)
    assert "£5 million" in statements[-1].text and counts.derived == 0 and counts.invented == 1


def test_a_percentage_of_a_difference_names_only_stated_figures_as_its_basis():
    s = one("The adult fare rose by £2.50 (+39 %) from 2017 to 2023.")
    assert s.arithmetic == "8.9 − 6.4 = 2.5; 2.5 / 6.4 = 39.06 %"  # not (171 / 2,017)^(1/5) − 1, as before
    assert [b.figure for b in s.basis] == ["8.9", "6.4"]


def test_smollm2s_live_answer_of_a_restated_question_and_an_invented_average_is_asked_again():
    """The eval's ferry-average run (tests/fixtures/weak/smollm2-live): the question restated (and cut at its
    "&#39;") made two "stated" statements of three, so the invented average shipped."""
    live = Path(__file__).parent / "fixtures/weak/smollm2-live"
    (message,) = json.loads((live / "ferry-average-reporter.json").read_text(encoding="utf-8"))["messages"]
    question = message["content"].split("\n")[1]
    counts, statements = support_of(
        (live / "ferry-average-report.md").read_text(), f"[user]\n{message['content']}", question
    )
    assert [(s.support, s.invented) for s in statements] == [("unsupported", True)]
    assert "18.45" in statements[0].text and invented_too_much(counts) and mostly_unsupported(counts)


def test_smollm2s_live_kittiwake_report_is_caught_twice_over():
    """The eval's kittiwake-decline run at 1eb67b0 (tests/fixtures/weak/smollm2-live): fluent fiction ("1% of
    kittiwakes had died since 1987") shipped with a note. Its "by 3%" was stated by the "3." of a list run
    into the survey PDF's text, so one statement invented of three was under the invented share. Now no list
    number states it (nor any figure that is no percentage: two of three are invented now), and had one, two
    statements unsupported of three with one invented is mostly invention."""
    live = Path(__file__).parent / "fixtures/weak/smollm2-live"
    (message,) = json.loads((live / "kittiwake-decline-reporter.json").read_text(encoding="utf-8"))["messages"]
    question = message["content"].split("\n")[1]
    counts, statements = support_of(
        (live / "kittiwake-decline-report.md").read_text(), f"[user]\n{message['content']}", question
    )
    assert [s.support for s in statements] == ["unsupported"] * 3 and counts.invented == 2
    assert invented_too_much(counts) and mostly_invention(counts)
    as_before = SupportCounts(stated=1, unsupported=2, invented=1)  # with the list number read as a figure
    assert not invented_too_much(as_before) and mostly_invention(as_before)


def test_smollm2s_live_outline_echo_is_judged_in_english_and_states_nothing_its_sources_say():
    """The eval's brackwater-mayor run at 1eb67b0 (tests/fixtures/weak/smollm2-live): the reporter prompt's
    outline paraphrased ("**Key Points** – Each section contains 4 bullet points"). Its three statements
    alone held too few function words beside the commonest words of a names-heavy page (minutes: "wren",
    "tobias", "harbourmaster"), so it was judged in another language, where names suffice ("Each", "You")
    and it shipped as three statements stated. The whole report tells its language."""
    live = Path(__file__).parent / "fixtures/weak/smollm2-live"
    (message,) = json.loads((live / "brackwater-mayor-reporter.json").read_text(encoding="utf-8"))["messages"]
    question = message["content"].split("\n")[1]
    report = (live / "brackwater-mayor-report.md").read_text()
    counts, statements = support_of(report, f"[user]\n{message['content']}", question)
    assert [s.support for s in statements] == ["unsupported"] * 3 and invented_too_much(counts)
    assert same_language(report, message["content"])


SURVEY = """[user]
# Findings
1. The survey counted 412 kittiwake nests at Hallow Point.
2. Shag nests fell to 96.
3. The seabird group recommends a new survey.

[Survey report](https://example.org/survey.pdf): Count kittiwakes every year at the index colonies. 2. Continue drone
counts, which found 6% more nests. 3. Repeat the full survey in 2028. The count fell to
72. In 2018 it was higher.
"""


def test_a_lists_numbers_are_no_figures_of_the_material():
    """A numbered list's marks, on their lines or run into a PDF's text, stated SmolLM2's "by 3%" (its
    kittiwake-decline report); a figure that only opens a wrapped line is still a figure."""
    question = "How many kittiwake nests did the survey count?"
    _, statements = support_of("The seabird group is increasing its population by 3% a year.", SURVEY, question)
    assert [(s.support, s.invented) for s in statements] == [("unsupported", True)]
    _, statements = support_of("Shag nests fell by 2% since the survey.", SURVEY, question)
    assert [(s.support, s.invented) for s in statements] == [("unsupported", True)]
    _, statements = support_of("The survey counted 412 kittiwake nests. The count fell to 72.", SURVEY, question)
    assert [s.support for s in statements] == ["stated", "stated"]
    assert "The survey counted 412" in statements[0].passage and "1. " not in statements[0].passage


def test_a_question_that_carries_a_name_the_material_lacks_is_judged():
    # SmolLM2 on tern4-maker-town: "What is the location of Kelderby, a historical maritime town in Scotland?"
    report = "What is the location of Brackwater, a historical maritime town in Scotland?"
    assert support(report) == [("unsupported", True)]
