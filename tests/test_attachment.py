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


HARVEST = (
    "[Preguntas frecuentes](http://web/faq.html): La mayor cosecha de nuestra historia fue la de la campaña "
    "2020/2021, con 16.880 toneladas de aceituna entregadas.\n\n"
    "[Memoria](http://web/memoria.html): En la campaña 2023/2024 se entregaron 9.615 toneladas."
)
HARVEST_QUESTION = "¿Cuál fue la media de aceituna entregada a la cooperativa entre 2020/2021 y 2023/2024?"


def test_not_given_in_another_language_for_what_a_page_gives_is_marked():
    # "Los documentos no indican la cantidad exacta": its words of saying so are no words of what is lacking
    statement = one(
        "Los documentos no indican la cantidad exacta de aceituna entregada en la campaña 2020/2021.",
        HARVEST,
        HARVEST_QUESTION,
    )
    assert statement.support == "absent" and statement.contradicts == "16.880"
    assert statement.url == "http://web/faq.html"


def test_an_honest_not_given_in_another_language_is_absent():
    for report in (
        "Los documentos no indican la cantidad exacta de aceituna entregada en la campaña 2021/2022.",
        "Las fuentes no dan el precio pagado por kilo de aceituna en la campaña 2020/2021.",
    ):
        statement = one(report, HARVEST, HARVEST_QUESTION)
        assert statement.support == "absent" and statement.contradicts is None, report


TRIAL = (
    "[ORCHID-2 abstract](http://web/abstract.html): In ORCHID-2 (2021), which enrolled 212 patients, 58.5% of "
    "patients on tavorelin 80 mg reached PASI 75 at week 12. ORCHID-3, of about 980 patients, reports in 2024."
)
TRIAL_QUESTION = "What proportion of patients on tavorelin 80 mg reached PASI 75 in ORCHID-2?"


def test_not_given_for_what_a_page_gives_beside_the_questions_own_figures_is_marked():
    # 80 and 75 are the question's: the passage holding them is not the statement's own source
    statement = one(
        "The sources do not report the proportion of ORCHID-2 patients on tavorelin 80 mg who reached PASI 75.",
        TRIAL,
        TRIAL_QUESTION,
    )
    assert statement.support == "absent" and statement.contradicts is not None and "58.5" in statement.contradicts
    for report in (  # of the same trial and dose, what the abstract does not give
        "The sources do not report how many ORCHID-2 patients on tavorelin 80 mg had side effects.",
        "The sources do not say how many ORCHID-2 patients on tavorelin 80 mg stopped treatment early.",
        "None of the documents gives PASI 75 results for ORCHID-3.",  # another trial, numbered
        "The Kessmoor patient group says it does not know how many ORCHID-2 patients reached PASI 75.",  # said
    ):
        honest = one(report, TRIAL, TRIAL_QUESTION)
        assert honest.support == "absent" and honest.contradicts is None, report
    # a unit saying the results are still to come gives none, whatever figures it holds
    pending = TRIAL + " Topline results from ASTERION-4, of approximately 980 patients, are expected in 2023."
    honest = one("None of the documents gives PASI 75 results for ASTERION-4.", pending, TRIAL_QUESTION)
    assert honest.support == "absent" and honest.contradicts is None
    given = TRIAL + " ASTERION-4 results: 64.1% of its 980 patients reached PASI 75 at week 16."
    statement = one("None of the documents gives PASI 75 results for ASTERION-4.", given, TRIAL_QUESTION)
    assert statement.contradicts is not None and "64.1" in statement.contradicts
    # "However" is no word of what is lacking; a period is one: two words alone tell too little to look for
    statement = one("However, the sources do not give ORCHID-2's patients for 2021.", TRIAL, TRIAL_QUESTION)
    assert statement.contradicts is not None
    statement = one("However, the sources do not give ORCHID-2's patients.", TRIAL, TRIAL_QUESTION)
    assert statement.contradicts is None
    statement = one(
        "However, the sources do not give the proportion of ORCHID-2 patients who reached PASI 75.",
        TRIAL,
        TRIAL_QUESTION,
    )
    assert statement.contradicts is not None


FERRIES = (
    "Table from [Boletín](http://web/boletin.html):\n| Año | Navieras Albora | Ferris Mareta passengers |\n"
    "|---|---|---|\n| 2020 | 355.100 | 257.840 |\n| 2021 | 528.730 | 405.830 |"
)
FERRIES_QUESTION = "What share of the route's passengers did Navieras Albora carry in 2021?"


def test_not_given_for_what_a_tables_header_names_is_marked():
    # the row names no operator: its header does
    statement = one("The documents do not give Ferris Mareta's passenger numbers for 2021.", FERRIES, FERRIES_QUESTION)
    assert statement.support == "absent" and statement.contradicts is not None
    assert statement.url == "http://web/boletin.html"
    for report in (
        "The documents do not give Ferris Mareta's passenger numbers for 2022.",
        "The documents do not give Ferris Mareta's ticket revenue or fares for 2021.",
    ):
        honest = one(report, FERRIES, FERRIES_QUESTION)
        assert honest.support == "absent" and honest.contradicts is None, report


RELEASES = (
    "Table from [Release team](http://web/release-team.html):\n"
    "| Release | Feature freeze | Release date | Release manager | Notes |\n|---|---|---|---|---|\n"
    "| 2.4.0 | 2020-10-12 | 2020-11-09 | Rashid Okwuosa | |\n"
    "| 3.0.0 | 2021-01-18 | 2021-03-03 | Mei-Lin Zhou | took over the cycle on 11 January 2021 |\n"
    "| 3.3.0 | 2022-08-01 | 2022-09-06 | — | |\n"
    "| 4.2.0 | 2024-09-23 (planned) | 2024-10-21 (planned) | Nomvula Dlamini-Reyes | |\n\n"
    "[Changelog](http://web/changelog.md): Quillstone 3.0.0 (2021-03-03): vector (kNN) search is now stable; "
    "the work was largely written by Aurelio Santangelo."
)
RELEASES_QUESTION = "In which Quillstone release did vector search become stable, and who was its release manager?"


def test_not_given_for_what_a_tables_cell_names_is_marked():
    # no figure: the row's label and the column's header say what the statement says is lacking
    for report in (
        "The documents do not identify the release manager of 3.0.0.",
        "The release-team page does not name a release manager for 3.0.0.",
    ):
        statement = one(report, RELEASES, RELEASES_QUESTION)
        assert (statement.support, statement.contradicts) == ("absent", "Mei-Lin Zhou"), report
        assert statement.url == "http://web/release-team.html" and "| 3.0.0 |" in statement.passage
    for report in (
        "The documents do not name the release manager of 3.3.0.",  # its cell is a dash
        "The documents do not give the signing key of the 3.0.0 release manager.",  # more than the cell
        "The documents do not say who nominated the 3.0.0 release manager.",
        "The sources do not give an actual release date for 4.2.0, only a planned one.",  # still to come
        "The documents do not name the release manager of 5.0.0.",  # no such row
    ):
        honest = one(report, RELEASES, RELEASES_QUESTION)
        assert honest.support in ("absent", "unsupported") and honest.contradicts is None, report


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
