"""A figure the material gives for another period, and "not given" for
what a page gives (``activities/attachment.py``), proven both ways: the
misattached and false-absent statements a writer makes are marked, with
the passage that says otherwise; the faithful ways of writing the same
figures are not."""

from __future__ import annotations

from activities.attachment import agree, periods
from activities.support import support_of
from workflows.statements import MARK, OTHERWISE_MARK, contradicted, contradicted_warning, marked, support_note

EMISSIONS = (
    "[Umwelterklärung 2024](http://web/ue-2024.html): Die Emissionen des Werks Riedbach.\n\n"
    "Table from [Umwelterklärung 2024](http://web/ue-2024.html):\n"
    "| Parameter | 2021 | 2022 | 2023 |\n|---|---|---|---|\n"
    "| Fossil CO₂ emissions of the plant | 1,241,900 t | 1,187,450 t | 1,102,300 t |\n\n"
    "Table from [Umwelterklärung 2021](http://web/ue-2021.html):\n"
    "| Year | Fossil CO₂ emissions of the plant |\n|---|---|\n| 2019 | 1,297,800 t |\n| 2020 | 1,284,600 t |\n\n"
    "[Courier](http://web/courier.html): The plant's new gas turbine opened in 2021 and now employs 214 people, "
    "the company said in 2024."
)
QUESTION = "By how much did the Riedbach plant's fossil CO2 emissions fall between 2020 and 2023?"


def one(report: str, shown: str = EMISSIONS, question: str = QUESTION):
    _, statements = support_of(report, shown, question)
    assert len(statements) == 1, statements
    return statements[0]


def test_periods_are_years_seasons_and_spans_not_dates_or_figures():
    assert periods("in 2023") == {(2023, 2023)}
    assert periods("the 2022/23 season and campaña 2020/2021") == {(2022, 2023), (2020, 2021)}
    assert periods("FY2024 budget") == {(2024, 2024)}
    assert periods("from 2019–2023") == {(2019, 2019), (2023, 2023)}
    assert periods("released 2021-03-03") == {(2021, 2021)}
    assert periods("1.284,6 kt and 2,020 t and 20231 units") == set()
    assert agree({(2021, 2021)}, {(2020, 2021)}) and not agree({(2020, 2021)}, {(2019, 2020)})


def test_a_figure_of_another_year_is_marked_with_the_years_own():
    statement = one("The plant emitted 1,241,900 t of fossil CO₂ in 2020.")
    assert statement.support == "unsupported" and not statement.invented
    assert statement.contradicts == "1,284,600 for 2020"
    assert statement.url == "http://web/ue-2021.html" and "1,284,600" in statement.passage


def test_a_table_row_of_the_wrong_year_is_marked():
    report = "| Year | Fossil CO₂ emissions (t) |\n|---|---|\n| 2020 | 1,241,900 |"
    statement = one(report)
    assert statement.contradicts == "1,284,600 for 2020"


def test_each_figure_with_its_own_year_is_stated():
    for report in (
        "The plant emitted 1,241,900 t of fossil CO₂ in 2021.",
        "In 2020 the plant's fossil CO₂ emissions were 1,284,600 t.",
        "Fossil CO₂ emissions fell from 1,241,900 t in 2021 to 1,102,300 t in 2023.",
        "| Year | Fossil CO₂ emissions (t) |\n|---|---|\n| 2023 | 1,102,300 |",
    ):
        statement = one(report)
        assert statement.support == "stated" and statement.contradicts is None, report


def test_a_year_of_another_thing_beside_a_figure_is_not_a_misattachment():
    # 214 people is the Courier's 2024 figure; 2021 is when the turbine opened
    statement = one("The gas turbine, opened in 2021, now employs 214 people at the plant.")
    assert statement.contradicts is None


def test_the_same_figure_rounded_is_not_another_years():
    shown = (
        "Table from [Relazione 2023](http://web/rel.html):\n| Formato | 2022 | 2023 |\n|---|---|---|\n"
        "| Audiolibri (download e ascolti) | 36.200 | 52.900 |\n\n"
        "[Comunicato](http://web/com.html): Gli audiolibri hanno raggiunto quasi 53.000 download e ascolti "
        "completi nel 2022."
    )
    statement = one("Audiolibri: quasi 53.000 download e ascolti completi nel 2023.", shown, "Audiolibri?")
    assert statement.contradicts is None


def test_not_given_for_what_a_table_gives_is_marked():
    statement = one("The documents do not report the plant's fossil CO₂ emissions for 2020.")
    assert statement.support == "absent" and not statement.invented  # a claim of a lack, refuted
    assert statement.contradicts == "1,284,600" and statement.url == "http://web/ue-2021.html"


def test_an_honest_not_given_is_absent():  # and contradicted by nothing
    for report in (
        "The documents do not report the plant's fossil CO₂ emissions for 2018.",
        "The documents do not give one agreed figure for the plant's 2020 fossil CO₂ emissions.",
        "None of the documents gives the fossil CO₂ emissions of the Lenningen plant.",
    ):
        statement = one(report)
        assert statement.support == "absent" and statement.contradicts is None, report


def test_not_disclosed_where_the_source_says_so_is_absent():
    shown = (
        "Table from [Post](http://web/post.html):\n| Club | Sponsor | Years | Annual value |\n|---|---|---|---|\n"
        "| Kelsbridge Athletic | Corvane Energy | 10 | Not disclosed |\n| Harnmouth City | Sandmere | 8 | £1.2m |"
    )
    statement = one(
        "The annual amount Corvane Energy pays Kelsbridge Athletic is not disclosed in the sources.",
        shown,
        "How much does Corvane Energy pay Kelsbridge Athletic?",
    )
    assert statement.support == "absent" and statement.contradicts is None


def test_a_misattached_and_a_refuted_absence_are_marked_warned_and_listed_with_their_source():
    report = (
        "# Riedbach\n\n- The plant emitted 1,102,300 t of fossil CO₂ in 2023.\n"
        "- The plant emitted 1,241,900 t of fossil CO₂ in 2020.\n"
        "- The documents do not report the plant's fossil CO₂ emissions for 2020.\n"
    )
    counts, statements = support_of(report, EMISSIONS, QUESTION)
    found = contradicted(statements)
    assert [s.support for s in found] == ["unsupported", "absent"]
    shipped = marked(report, found)
    assert "CO₂ in 2020." + OTHERWISE_MARK in shipped and "for 2020." + OTHERWISE_MARK in shipped
    assert MARK not in shipped and "1,102,300 t of fossil CO₂ in 2023.\n" in shipped  # the faithful one as written
    note = support_note(counts, statements)
    assert "1 stated by a source" in note and "1 saying what the sources do not give" in note
    listed = note.split("Not found in the sources, or given otherwise by them:\n")[1].splitlines()
    assert "a source gives 1,284,600 for 2020: http://web/ue-2021.html" in listed[0]
    assert "a source gives 1,284,600: http://web/ue-2021.html" in listed[1]
    warning = contradicted_warning(statements)
    assert warning.startswith("2 statement(s) of the report say what its sources say otherwise")


LEAKAGE = (
    "Table from [Annual report](http://web/annual.md):\n"
    "| Reporting year | Leakage (Ml/d) | Status |\n|---|---|---|\n"
    "| 2021/22 | 45.3 | Audited |\n| 2022/23 | 41.2 | Provisional |\n\n"
    "[Regulator's bulletin](http://web/bulletin.md): Kelsbury Water's audited leakage for 2022/23 was 42.7 Ml/d, "
    "after the regulator corrected its repair counts.\n\n"
    "[Courier](http://web/courier.md): In the spring the company estimated leakage at about 44.0 Ml/d, though "
    "the audited figure would not be known before November."
)
LEAKAGE_QUESTION = "What was Kelsbury Water's audited leakage for 2022/23?"


def test_the_provisional_figure_called_final_is_marked_with_the_final_one():
    statement = one("Kelsbury Water's audited leakage for 2022/23 was 41.2 Ml/d.", LEAKAGE, LEAKAGE_QUESTION)
    assert (statement.support, statement.contradicts) == ("unsupported", "42.7 (final)")
    assert statement.url == "http://web/bulletin.md"


def test_each_status_named_as_the_material_names_it_is_stated():
    for report in (
        "Kelsbury Water's audited leakage for 2022/23 was 42.7 Ml/d.",
        "The provisional 2022/23 leakage figure of 41.2 Ml/d became 42.7 Ml/d once audited.",
        "Kelsbury Water's leakage for 2022/23 was first put at 41.2 Ml/d (provisional).",
        # a status word far from the figure speaks of another: 44.0 is no final figure
        "In the spring Kelsbury Water estimated its leakage at about 44.0 Ml/d.",
    ):
        statement = one(report, LEAKAGE, LEAKAGE_QUESTION)
        assert statement.contradicts is None, (report, statement)
