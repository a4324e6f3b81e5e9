"""The reporter's re-ask decisions, both ways (``workflows/statements.py``):
a report that states nothing, one that only says what is not given, many
invented statements, mostly invention; and what the reporter was shown
counts as facts to miss (``activities/statement_text.specifics``)."""

from __future__ import annotations

import pytest

from activities.statement_text import specifics
from activities.support import support_of
from workflows.models import ModelReply
from workflows.statements import invented_too_much, mostly_invention, mostly_unfound, only_absent, states_nothing
from workflows.support_models import SupportCounts


def test_mostly_invention_needs_a_statement_found_nowhere_and_most_unsupported():
    assert mostly_invention(SupportCounts(stated=1, unsupported=2, invented=1))
    assert not mostly_invention(SupportCounts(stated=1, unsupported=2))  # figures of the material, out of place
    assert not mostly_invention(SupportCounts(stated=2, unsupported=2, invented=2))  # half: not most
    assert not mostly_invention(SupportCounts(stated=1, derived=1, absent=3, unsupported=1, invented=1))
    assert not mostly_invention(None)


def test_mostly_unfound_is_most_of_three_statements_or_more_found_in_no_source_with_nothing_invented():
    """SmolLM2's fiction in the material's words at d90c946 (olvane-founder 5 of 7 unsupported,
    olvane-revenue-2012 3 of 4) is caught; the faithful held-out report with the most statements
    unsupported (suite 1's marbesa-poniente-terminal, concise: 5 of 11) and a short answer are not."""
    assert mostly_unfound(SupportCounts(stated=2, unsupported=5)) and mostly_unfound(
        SupportCounts(stated=1, unsupported=3)
    )
    assert not mostly_unfound(SupportCounts(stated=6, unsupported=5))
    assert not mostly_unfound(SupportCounts(stated=2, unsupported=2, absent=3))  # half: not most
    assert not mostly_unfound(SupportCounts(unsupported=2))  # two statements: too few to judge so
    assert not mostly_unfound(SupportCounts(absent=4)) and not mostly_unfound(None)


FINDINGS = ["- The keeper, Ada Brisk, logged 4417 ships in 1911, said the Kelder Quay Registry."]
QUESTION_ASKED = "How many ships did the Lantern Rock lighthouse keeper log in 1911?"


def judged(report: str, material: str = FINDINGS[0]) -> ModelReply:
    counts, statements = support_of(report, material, QUESTION_ASKED)
    return ModelReply(content=report, history="h", support=counts, statements=statements, judged=True)


@pytest.mark.parametrize(
    "report",
    [
        "# Kelder Quay Registry notes\n\nThe number of ships changed a great deal, largely because of the weather.",
        "## Introduction\n\n## Findings\n\n## Conclusion\n\nThis report sets out what the research found.",
        "How many ships did the Lantern Rock lighthouse keeper log in 1911?",
    ],
    ids=["weather", "outline", "question"],
)
def test_a_report_that_states_nothing_over_findings_with_facts_is_caught(report: str):
    assert states_nothing(judged(report), FINDINGS, QUESTION_ASKED)


@pytest.mark.parametrize(
    "report",
    [
        "Ada Brisk logged 4,417 ships in 1911 [1].",
        "The records do not give the number of ships for 1912.",
        "About 12.1 ships a day, from the 4417 the keeper logged over 365 days.",
    ],
    ids=["stated", "absent", "derived"],
)
def test_a_report_that_states_something_is_not_caught(report: str):
    assert not states_nothing(judged(report), FINDINGS, QUESTION_ASKED)


def test_a_reply_not_judged_or_findings_too_thin_to_tell_are_not_caught():
    weather = "The number of ships changed a great deal, largely because of the weather."
    assert not states_nothing(judged(weather).model_copy(update={"judged": False}), FINDINGS, QUESTION_ASKED)
    assert not states_nothing(judged(weather), ["- Ships were logged."], QUESTION_ASKED)


def test_findings_that_state_nothing_are_judged_by_the_passages_shown_for_them():
    weather = "The number of ships changed a great deal, largely because of the weather."
    empty = ["You worked on the research step, completed with a paragraph in the end."]
    assert states_nothing(judged(weather).model_copy(update={"shown_items": 6}), empty, QUESTION_ASKED)
    assert not states_nothing(judged(weather).model_copy(update={"shown_items": 2}), empty, QUESTION_ASKED)
    assert not states_nothing(judged(weather), empty, QUESTION_ASKED)  # recorded before: the findings alone


def test_a_report_only_saying_what_is_not_given_over_findings_with_facts_is_caught():
    """Both ways: only a lack, over findings that hold facts, is caught; a
    lack beside what the findings do give (a strong model's honest answer),
    or over findings too thin to tell, is not."""
    lack = "The registry does not give any details about the number of ships logged."
    assert only_absent(judged(lack), FINDINGS, QUESTION_ASKED)
    honest = lack + " It gives Ada Brisk's log of 4,417 ships in 1911."
    assert not only_absent(judged(honest), FINDINGS, QUESTION_ASKED)
    assert not only_absent(judged(lack), ["- Ships were logged."], QUESTION_ASKED)
    assert not only_absent(judged(lack).model_copy(update={"judged": False}), FINDINGS, QUESTION_ASKED)


def test_many_invented_statements_in_a_long_report_are_too_much_and_fewer_are_not():
    """Both ways: seven invented of 36 (19 %, SmolLM2's chengbo-zh had 8)
    ask again; six of 36 (a faithful held-out report's false ones), or
    seven of 50 (14 %), do not. Recorded runs (``many`` off) judge by the
    share alone."""
    assert invented_too_much(SupportCounts(stated=29, invented=7, unsupported=7), many=True)
    assert not invented_too_much(SupportCounts(stated=29, invented=7, unsupported=7))
    assert not invented_too_much(SupportCounts(stated=30, invented=6, unsupported=6), many=True)
    assert not invented_too_much(SupportCounts(stated=43, invented=7, unsupported=7), many=True)


def test_what_a_reporter_was_shown_counts_only_the_facts_its_statements_carry():
    """A failed run's reporter shown a blob digest and a data path, and no
    finding, was shown nothing it could fail to state; the facts of a page
    count, the question's do not."""
    failed = (
        "# Note\nThe research stopped early (the run failed: blob sha256:4c3ef9e1b4b2266485c855230b432536edb147bf4f10"
        "ba005bb6d69bd638711d is missing from /tmp/pytest-of-root/pytest-41/data/blobs (deleted, or "
        "DEEPRESEARCH_DATA_DIR differs between workers)).\n\n# Findings\n(none)\n"
    )
    assert specifics(failed, "Tell me about Lantern Rock") == 0
    page = "The mayor, Jane Holloway, won 3,412 votes in 2019, against 2,100 for Ruth Penn."
    assert specifics(page, "Who won in 2019?") == 6  # jane, holloway, ruth, penn, 3,412, 2,100
