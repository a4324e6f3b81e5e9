"""A statement whose figure is a near miss of the figure a passage saying the
same thing gives ("224 patients" where the trial's abstract gives 212) is
invented and contradicted: it is marked in any report, however faithful
the rest, with a warning, and listed first in the note with the figure its
source gives (``activities/contradiction.py``, ``workflows/statements.py``).
Proven both ways: what a writer who makes figures up beside true ones
writes is caught; what a strong model writes faithfully (the same figure
more or less precise, a figure it computes, another quantity, small counts)
is never taken for a contradiction."""

from __future__ import annotations

import pytest

from activities.support import support_of
from workflows.statements import MARK, contradicted, contradicted_warning, marked, support_note

URL = "http://127.0.0.1:8080/orchid2.md"
MATERIAL = f"""[user]
# Research question
How did tavorelin do in its trials?

# Evidence: passages of the pages the findings rest on, each after a link to its page

[ORCHID-2 abstract]({URL}): The ORCHID-2 trial randomised 212 patients with plaque psoriasis to placebo or tavorelin.
At week 12, 58.5 % of patients on tavorelin 80 mg reached PASI 75, against 9.4 % on placebo.
Of the 212 randomised patients, 193 completed week 12. The trial ran at 118 sites in 14 countries.
The cooperative expects some 13,000 tonnes of olives this season.
"""
QUESTION = "How did tavorelin do in its trials?"


def judged(sentence: str):
    _, statements = support_of(f"# Report\n\n- {sentence}\n", MATERIAL, QUESTION)
    (found,) = statements
    return found


@pytest.mark.parametrize(
    ("sentence", "given"),
    [
        ("The ORCHID-2 trial randomised 229 patients with plaque psoriasis.", "212"),
        ("At week 12, 56.6 % of patients on tavorelin 80 mg reached PASI 75.", "58.5 %"),
        ("Of the 212 randomised patients, 189 completed week 12.", "193"),
        ("The trial ran at 126 sites.", "118"),
    ],
)
def test_a_near_miss_of_a_stated_figure_is_contradicted(sentence: str, given: str):
    s = judged(sentence)
    assert (s.support, s.invented, s.contradicts, s.url) == ("unsupported", True, given, URL)
    assert given.split()[0] in s.passage


@pytest.mark.parametrize(
    "sentence",
    [
        "The ORCHID-2 trial randomised 212 patients with plaque psoriasis.",  # as stated
        "At week 12, about 59 % of patients on tavorelin 80 mg reached PASI 75.",  # rounded
        "At week 12, 58.50 % of patients on tavorelin 80 mg reached PASI 75.",  # more digits, the same figure
        "Of the 212 randomised patients, 193 (91.0 %) completed week 12.",  # computed: 193 / 212
        "The trial ran at 16 sites in 14 countries.",  # two-digit counts lie near one another by chance
        "With the estimate the cooperative's yearly average would rise to about 11,864 tonnes of olives.",  # far
        "At week 12, 58.2 patients on tavorelin 80 mg reached PASI 75.",  # a count, not a percentage
    ],
)
def test_what_a_strong_model_writes_is_never_taken_for_a_contradiction(sentence: str):
    assert judged(sentence).contradicts is None


def test_a_contradicted_statement_is_marked_warned_and_listed_first_with_its_source():
    report = (
        "# Report\n\n- The ORCHID-2 trial ran at 118 sites in 14 countries.\n"
        "- Results were presented at the Halvsund congress.\n"
        "- The ORCHID-2 trial randomised 229 patients with plaque psoriasis.\n"
    )
    counts, statements = support_of(report, MATERIAL, QUESTION)
    found = contradicted(statements)
    assert [s.contradicts for s in found] == ["212"]
    shipped = marked(report, found)
    assert "randomised 229 patients with plaque psoriasis." + MARK in shipped
    assert shipped.count(MARK) == 1  # only the contradicted one, in a report not mostly invented
    note = support_note(counts, statements)
    listed = note.split("Not found in the sources:\n")[1].splitlines()
    assert listed[0].startswith("- “The ORCHID-2 trial randomised 229") and f"a source gives 212: {URL}" in listed[0]
    assert "229" in contradicted_warning(statements) and "212" in contradicted_warning(statements)
