"""A reporter that states what its findings and evidence do not say (as
SmolLM2-135M does: fluent text around the research's names) is asked once
more, then the run's report is built from the findings and the pages
(workflows/reply_checks.py, activities/held.py). Real dev server, real
worker and crawler, scripted model over HTTP."""

from __future__ import annotations

import pytest

from testkit.llm_server import last_user
from testkit.pages import article
from testkit.research_script import FACT, first_user
from testkit.runs import keep_history, start
from workflows.models import RunStatus

QUESTION = "How many ships did the Lantern Rock lighthouse keeper log in 1911?"
INVENTED = """# Lantern Rock

The Lantern Rock lighthouse was painted red by the Harbour Board in 1872.
Its first keeper, Jonas Pell, moved to Saltcombe in 1890 with his family.
The Lantern Rock Society now runs tours for 300 visitors every summer.
A museum about the lighthouse opened in Kelderby in 1998, with a café.
"""


async def test_a_reporter_that_twice_states_what_nothing_says_gives_the_findings_and_pages_as_the_report(
    temporal_client, task_queue, worker, llm, script, pages
):
    script.reporter = lambda request: INVENTED
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "report_unsupported")
    assert result.status == "completed"
    report = result.final_report
    assert "painted red" not in report and "Jonas Pell" not in report
    assert "the reporter failed" in report[:800] and "do not say" in report[:800]
    assert FACT in report and pages.url("/lighthouse") in report  # the findings, and the page that holds the fact
    assert result.warnings and "the reporter failed" in result.warnings[0]
    asked = llm.calls("reporter")
    assert len(asked) == 2 and "states things that the findings and evidence do not say" in last_user(asked[1])


async def test_a_reporter_asked_again_that_then_states_too_little_to_tell_has_failed(
    temporal_client, task_queue, worker, llm, script
):
    script.reporter = lambda request: INVENTED if len(llm.calls("reporter")) == 1 else "Please see the report above."
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    assert "the reporter failed" in result.final_report[:800] and FACT in result.final_report
    assert "Please see the report above" not in result.final_report and len(llm.calls("reporter")) == 2


async def test_a_reporter_asked_again_that_writes_from_its_findings_ships_its_report(
    temporal_client, task_queue, worker, llm, script
):
    written = script.reporter  # quotes the findings and passages it was given
    script.reporter = lambda request: INVENTED if len(llm.calls("reporter")) == 1 else written(request)
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    assert result.status == "completed" and result.final_report.startswith("# Scripted Report")
    assert FACT in result.final_report and "painted red" not in result.final_report and not result.warnings
    assert len(llm.calls("reporter")) == 2


async def test_a_report_written_from_its_findings_is_not_asked_for_again(
    temporal_client, task_queue, worker, llm, script
):
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    assert result.final_report.startswith("# Scripted Report") and FACT in result.final_report
    assert len(llm.calls("reporter")) == 1 and not result.warnings


async def test_a_report_asked_again_for_using_none_of_the_findings_is_never_asked_a_third_time(
    temporal_client, task_queue, worker, llm, script
):
    """Invented, and none of the findings' names: asked again once (for the
    findings); the second reply is judged as the second report, never asked
    for a third time: a faithful one-line answer ships, one with nothing to
    judge ("Please see the report above") does not."""
    script.researcher = lambda request: (
        "## Findings\n- The keeper, Ada Brisk, logged 4417 ships in 1911, said the Kelder Quay Registry."
    )
    script.reporter = lambda request: INVENTED if len(llm.calls("reporter")) == 1 else "Ada Brisk logged 4417 ships."
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    asked = llm.calls("reporter")
    assert len(asked) == 2 and "uses none of the facts" in last_user(asked[1])
    assert result.final_report.startswith("Ada Brisk logged 4417 ships.") and not result.warnings
    assert [(s.support, s.text) for s in result.statements] == [("stated", "Ada Brisk logged 4417 ships.")]


STRONG = """# Ships logged at Lantern Rock in 1911

**Answer:** the keeper logged **4,417 ships** in 1911 [1].

- That is about 12.1 ships a day over the year's 365 days [1].
- The record gives no figure for 1912, so no change can be computed [1].

## References
[1] [Lantern Rock history]({url})
"""


async def test_a_strong_models_report_with_derived_figures_and_footnotes_ships_as_written(
    temporal_client, task_queue, worker, llm, script, pages
):
    """The faithful report a frontier model writes (a figure computed from the
    finding, a "not given" statement, footnote markers) is not asked for
    again; the result traces each statement."""
    script.reporter = lambda request: STRONG.format(url=pages.url("/lighthouse"))
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "report_traced")
    assert len(llm.calls("reporter")) == 1 and not result.warnings
    assert result.final_report.startswith(STRONG.format(url=pages.url("/lighthouse")).strip())
    support = {s.text.split()[0]: s for s in result.statements}
    assert support["**Answer:**"].support == "stated" and support["**Answer:**"].url == pages.url("/lighthouse")
    assert support["That"].support == "derived" and "4,417 / 365" in support["That"].arithmetic
    assert support["The"].support == "absent"
    assert "## How the statements are supported" in result.final_report
    # and each research step's findings, against what the step read
    status = await handle.query("status", result_type=RunStatus)
    research = [step for step in status.steps if step.step_type == "research"]
    assert research and all(step.statements and step.statements.stated >= 1 for step in research)


PARTLY = """# Lantern Rock in 1911

The keeper logged 4417 ships in 1911.
The keeper's log of 4417 ships is kept at the lighthouse.
The Lantern Rock lighthouse was painted red by the Harbour Board in 1872.
Its first keeper, Jonas Pell, moved to Saltcombe in 1890 with his family.
"""


async def test_a_second_report_still_partly_invented_ships_with_its_unsupported_statements_marked(
    temporal_client, task_queue, worker, llm, script
):
    """Half invention, twice: not mostly invention, so the model's report is
    kept rather than replaced, each unsupported statement marked, listed in
    the closing note, and a warning says so."""
    script.reporter = lambda request: PARTLY
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "report_invented_marked")
    assert len(llm.calls("reporter")) == 2 and "Jonas Pell" in last_user(llm.calls("reporter")[1])
    report = result.final_report
    assert "the reporter failed" not in report and FACT.split(": ", 1)[1] not in report[:200]
    assert "in 1872. *(not found in the sources)*" in report and "4417 ships in 1911.\n" in report
    assert "Not found in the sources:\n- “The Lantern Rock lighthouse was painted red" in report
    assert result.warnings and "marked in the report" in result.warnings[0]


BRISK = "## Findings\n- The keeper, Ada Brisk, logged 4417 ships in 1911, said the Kelder Quay Registry."
NOTHING = "# Kelder Quay Registry notes\n\nThe number of ships changed a great deal, largely because of the weather.\n"


MOSTLY = (
    "Ada Brisk logged 4417 ships in 1911, says the Kelder Quay Registry. In 1911 the quay lost 4417 of its boats "
    "to a storm. Since 1987, 1% of the ships have sunk each winter.\n"
)
# SmolLM2's olvane-founder kind (at d90c946): fiction in the findings' own words, no figure or name they
# lack, two of three statements found in no source; it shipped unmarked, each listed in the note
UNFOUND = (
    "Ada Brisk logged 4417 ships in 1911, says the Kelder Quay Registry. "
    "The keeper later bought the quay from the Registry and opened a hotel there. "
    "The keeper launched a new boat in January and is now focused on sea salt monitoring. "
    "The Registry was sold to a company in the south after the keeper left.\n"
)
FAITHFUL = "Ada Brisk logged 4417 ships in 1911, says the Kelder Quay Registry."


@pytest.mark.parametrize(
    ("report", "history", "said", "left_out"),
    [
        # SmolLM2's kind of report that names a source in its heading but states no figure, name or lack of
        # the findings (it passes as grounded)
        (NOTHING, "report_stated_nothing", "states none of the research's facts", "largely because of the weather"),
        # SmolLM2's kittiwake-decline kind: one statement of three invented (under the invented share), but two
        # of three unsupported, as would fail a report asked for again (before, it shipped with a note)
        (MOSTLY, "report_mostly_invented", "Since 1987, 1% of the ships", "each winter"),
        (UNFOUND, "report_mostly_unfound", "The keeper later bought the quay", "opened a hotel"),
    ],
    ids=["states-nothing", "mostly-unsupported", "mostly-unfound"],
)
async def test_a_report_that_states_nothing_or_mostly_invention_is_asked_again_and_twice_is_the_reporters_failure(
    temporal_client, task_queue, worker, llm, script, report, history, said, left_out
):
    """Asked for once more, saying why; the same again, and the findings are the report."""
    script.researcher = lambda request: BRISK
    script.reporter = lambda request: report
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, history)
    asked = llm.calls("reporter")
    assert len(asked) == 2 and said in last_user(asked[1])
    assert "the reporter failed" in result.final_report[:800] and "Ada Brisk" in result.final_report
    assert left_out not in result.final_report
    assert result.warnings and "the reporter failed" in result.warnings[0]


@pytest.mark.parametrize(
    "first", [NOTHING, MOSTLY, UNFOUND], ids=["states-nothing", "mostly-unsupported", "mostly-unfound"]
)
async def test_a_first_report_asked_again_then_a_faithful_one_ships_the_second(
    temporal_client, task_queue, worker, llm, script, first
):
    script.researcher = lambda request: BRISK
    script.reporter = lambda request: first if len(llm.calls("reporter")) == 1 else FAITHFUL
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    assert len(llm.calls("reporter")) == 2 and not result.warnings
    assert result.final_report.startswith(FAITHFUL)
    assert [s.support for s in result.statements] == ["stated"]


async def test_a_report_that_states_nothing_over_passages_standing_for_empty_findings_is_asked_again(
    temporal_client, task_queue, worker, llm, script, pages
):
    """SmolLM2 on oyster-harvest: its findings stated nothing ("You worked on the research step…"), so the
    step's passages stood for them, and the report that stated nothing either shipped (the findings alone
    held no fact to miss). What the reporter was shown holds the facts: asked again, then the findings."""
    script.researcher = lambda request: "You worked on the research step, completed with a paragraph in the end."
    script.reporter = lambda request: NOTHING
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    asked = llm.calls("reporter")
    assert len(asked) == 2 and "states none of the research's facts" in last_user(asked[1])
    assert "4417" in last_user(asked[0])  # the passages it was shown
    assert "the reporter failed" in result.final_report[:800] and pages.url("/lighthouse") in result.final_report
    assert "largely because of the weather" not in result.final_report


ONLY_ABSENT = "The Kelder Quay Registry does not give any details about the number of ships logged that year.\n"


async def test_a_report_only_saying_what_is_not_given_over_findings_that_give_it_is_asked_again(
    temporal_client, task_queue, worker, llm, script
):
    """SmolLM2 on brackwater-mayor: "doesn't provide any details about the
    total number of votes cast" over a page giving 3,412 votes. Its one
    statement claims only a lack, so it used to ship as an honest answer;
    it is asked again, and the faithful second ships."""
    script.researcher = lambda request: BRISK
    script.reporter = lambda request: ONLY_ABSENT if len(llm.calls("reporter")) == 1 else FAITHFUL
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "report_only_absent")
    asked = llm.calls("reporter")
    assert len(asked) == 2 and "only says what the findings and evidence do not give" in last_user(asked[1])
    assert result.final_report.startswith(FAITHFUL) and not result.warnings
    assert [s.support for s in result.statements] == ["stated"]


async def test_a_report_saying_twice_what_is_not_given_ships_the_second(
    temporal_client, task_queue, worker, llm, script
):
    """A writer that says again that the material lacks the answer is taken
    at its word (an honest "not given" asked again stays one): the second
    ships as written, with its support note, no third call."""
    script.researcher = lambda request: BRISK
    script.reporter = lambda request: ONLY_ABSENT
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    assert len(llm.calls("reporter")) == 2 and result.final_report.startswith(ONLY_ABSENT.strip())
    assert "the reporter failed" not in result.final_report and [s.support for s in result.statements] == ["absent"]


FILLER = [
    f"Visitors' note {n}: the walk to the headland takes an hour, and the café opens at ten in summer."
    for n in range(40)
]
LAMP = "The lamp room was rebuilt by the engineer Halvard Brekke in 1906 for £2,340."


async def test_a_statement_a_page_the_run_read_states_is_stated_though_no_passage_shown_held_it(
    temporal_client, task_queue, worker, llm, script, pages
):
    """A strong model's faithful report (or an outside check's, written from
    the documents) may state what a page the run read says beyond the
    passages the reporter was shown: stated, with that page, not invention."""
    pages.add("/lighthouse", article("Lantern Rock history", [FACT + ".", *FILLER, LAMP]))
    script.reporter = lambda request: f"The keeper logged 4,417 ships in 1911.\n\n{LAMP}\n"
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True, evidence_tokens=200)
    result = await handle.result()
    await keep_history(handle, "report_stated_by_page_read")
    assert "Brekke" not in first_user(llm.calls("reporter")[0])  # the passages shown did not hold it
    assert len(llm.calls("reporter")) == 1 and not result.warnings
    lamp = next(s for s in result.statements if "Brekke" in s.text)
    assert lamp.support == "stated" and lamp.url == pages.url("/lighthouse") and "Brekke" in lamp.passage


YEARS = range(1901, 1921)
LOG = [f"FACT: in {y} the Lantern Rock keeper logged {4100 + 7 * (y - 1900)} ships" for y in YEARS]
COPIED = [f"In {y} the Lantern Rock keeper logged {4100 + 7 * (y - 1900):,} ships." for y in YEARS]
INVENTIONS = [
    "The Mlacron Shipyard built 42 of those ships in Kelderby.",
    "Tempwell Industries insured 318 of them against storms.",
    "The harbourmaster Orvald Creskin counted 57 wrecks in 1931.",
    "The Brackmoor Lifeboat Society saved 212 sailors in 1932.",
    "Saltcombe's Vennick Foundry cast 19 new lamps in 1933.",
    "The pilot Harl Dunnock guided 88 of them into Kelder Sound.",
    "The Orvik Trust paid 41 keepers' pensions from 1934.",
]


async def test_a_long_copied_report_with_many_invented_statements_is_asked_again_then_marked(
    temporal_client, task_queue, worker, llm, script, pages
):
    """SmolLM2 on chengbo-zh: 8 invented statements of 36, beside 27 copied,
    under the quarter that asks again: it shipped unmarked. Seven invented
    of 27 now ask again; the same twice is kept with them marked."""
    pages.add("/lighthouse", article("Lantern Rock history", [line + "." for line in LOG]))
    report = "# Lantern Rock, 1901-1920\n\n" + "\n".join(f"- {s}" for s in COPIED + INVENTIONS) + "\n"
    script.reporter = lambda request: report
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "report_many_invented_marked")
    asked = llm.calls("reporter")
    assert len(asked) == 2 and "Mlacron" in last_user(asked[1])
    assert "Mlacron Shipyard built 42 of those ships in Kelderby. *(not found in the sources)*" in result.final_report
    assert "logged 4,107 ships.\n" in result.final_report  # a copied statement is not marked
    assert result.warnings and "marked in the report" in result.warnings[0]


async def test_a_report_saying_twice_what_is_not_given_in_none_of_the_researchs_words_is_the_reporters_failure(
    temporal_client, task_queue, worker, llm, script
):
    """SmolLM2 on ferry-average: "the rest of your text needs to be referenced with … what they did not
    provide", twice: no answer, in none of the findings' figures and names. The findings are the report."""
    script.researcher = lambda request: BRISK
    script.reporter = lambda request: "Your report needs the information about what they did not provide.\n"
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    assert len(llm.calls("reporter")) == 2
    assert "the reporter failed" in result.final_report[:800] and "Ada Brisk" in result.final_report
