"""Days between two dates, read as arithmetic both ways (activities/dates.py,
activities/derivation.py ``_days``): a strong model counts the days from a
plan's date to an opening's, or from one release to the next, in every
form a page or a report writes a date. Each faithful count is derived; a
count that no two dates give is not, and no date is counted for a
statement that does not count days."""

from __future__ import annotations

from datetime import date

import pytest

from activities.dates import dates
from activities.support import support_of

MATERIAL = """[user]
# Research question
When did the Cawdell Narrows Bridge open, and how late was it?

# Evidence: passages of the pages the findings rest on, each after a link to its page

[Project FAQ](http://127.0.0.1:8080/faq.md): The contract set the opening to traffic for 30 September 2020.
The bridge was opened by the mayor at a ceremony on 26 February 2021 and opened to traffic on 3 March 2021.
The first bus crossed on 25 March 2021.

[Release notes](http://127.0.0.1:8080/releases.md): Version 2.4.0 (2020-11-09) added experimental vector search.
Version 3.0.0 was released on 2021-03-03 and made it stable.
"""


def one(sentence: str) -> tuple[str, bool, str]:
    report = f"# Report\n\n- {sentence}\n"
    if sentence.startswith("|"):
        report = f"# Report\n\n| Milestone | Date | Days late |\n|---|---|---|\n{sentence}\n"
    _, statements = support_of(report, MATERIAL, "When did the bridge open?")
    (found,) = [(s.support, s.invented, s.arithmetic or "") for s in statements]
    return found


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("planned 30 Sep 2020, opened 3 Mar. 2021", [date(2020, 9, 30), date(2021, 3, 3)]),
        ("from 2020-11-09 to 2021-03-03", [date(2020, 11, 9), date(2021, 3, 3)]),
        ("am 3. März 2021, protokolliert am 14.11.2017", [date(2021, 3, 3), date(2017, 11, 14)]),
        ("el 3 de marzo de 2021 y le 1er mars 2020", [date(2021, 3, 3), date(2020, 3, 1)]),
        ("on March 3, 2021 and on 3rd March 2021", [date(2021, 3, 3)]),
        ("31 February 2020, 2020-13-01 and March 2021", []),  # no such day; a month alone is no date
    ],
)
def test_dates_are_read_in_the_forms_pages_write_them(text: str, read: list[date]):
    assert dates(text) == read


@pytest.mark.parametrize(
    ("sentence", "arithmetic"),
    [
        ("Planned opening 30 Sep 2020 → actual 3 Mar 2021 = +154 days.", "2021-03-03 − 2020-09-30 = 154 days"),
        ("The bridge opened to traffic 154 days late, on 3 March 2021.", "2021-03-03 − 2020-09-30 = 154 days"),
        ("Experimental → stable: 2020-11-09 → 2021-03-03 = 114 days.", "2021-03-03 − 2020-11-09 = 114 days"),
        ("The first bus crossed 22 days after the opening of 3 March 2021.", "2021-03-25 − 2021-03-03 = 22 days"),
        ("| Opening to traffic | 3 Mar 2021 | 154 |", "2021-03-03 − 2020-09-30 = 154 days"),
    ],
)
def test_days_between_two_dates_the_material_states_are_derived(sentence: str, arithmetic: str):
    assert one(sentence) == ("derived", False, arithmetic)


@pytest.mark.parametrize(
    "sentence",
    [
        "The bridge opened to traffic 163 days late, on 3 March 2021.",  # no two dates give 163
        "The first bus crossed 23 days after the opening of 3 March 2021.",
        "The bridge carried 154 lorries on its first day.",  # days named, but 154 of nothing dated: chance
    ],
)
def test_a_count_of_days_no_two_dates_give_is_not_derived(sentence: str):
    support, invented, _ = one(sentence)
    assert support == "unsupported" and invented


def test_two_far_dates_never_give_a_count_of_fewer_than_three_digits():
    """Two dates of the passages, neither the statement's: a count of days
    under 100 between some two of them is too likely by chance."""
    support, _, _ = one("The works took 40 days in all.")  # 2020-09-30 to 2020-11-09 is 40 days: two far dates
    assert support == "unsupported"
