"""A percentage and a count in one sum, difference, share or change is
chance, not working (activities/arithmetic.py ``_pairs``): an invented
"65.9" beside a load factor of 83.9 % and a fleet of 18 must not read as
83.9 − 18. A percentage of a count (a product) and percentages set apart
in points stay derived, as a strong model writes them; so much per cent
of a count only from the two figures the statement names (a report's
invented "£12.4m" had been 41.3 % of its own earlier £30m)."""

from __future__ import annotations

import pytest

from activities.support import support_of

MATERIAL = """[user]
# Research question
How did the Orvenia airline's year go?

# Evidence: passages of the pages the findings rest on, each after a link to its page

[Annual report](http://127.0.0.1:8080/annual.md): The airline flew a fleet of 18 aircraft to 24 destinations.
Its load factor was 83.9 % in 2023, up from 81.6 % in 2022, across 180 seats per aircraft.
"""


def one(sentence: str) -> tuple[str, bool, str]:
    _, statements = support_of(f"# Report\n\n- {sentence}\n", MATERIAL, "How did the airline's year go?")
    (found,) = [(s.support, s.invented, s.arithmetic or "") for s in statements]
    return found


@pytest.mark.parametrize(
    ("sentence", "arithmetic"),
    [
        ("The load factor rose 2.3 percentage points, from 81.6 % to 83.9 %.", "83.9 − 81.6 = 2.3"),
        ("Load factor: 83.9 % (+2.3 pp on 2022's 81.6 %).", "83.9 − 81.6 = 2.3"),
        ("At 83.9 % of 180 seats, about 151 seats were filled per aircraft.", "83.9 % × 180 = 151"),
    ],
)
def test_points_and_a_percentage_of_a_count_are_derived(sentence: str, arithmetic: str):
    support, invented, how = one(sentence)
    assert (support, invented) == ("derived", False), how
    assert arithmetic in how


@pytest.mark.parametrize(
    "sentence",
    [
        "The airline's margin reached 65.9 across its network.",  # 83.9 − 18
        "Its punctuality index stood at 107.9 for the year.",  # 83.9 + 24
        "Some 75.0 % of its routes were profitable.",  # 18 / 24 is a share of counts, but 75.0 is no stated share here
        "Cargo made up 21.45 % of revenue.",  # 18 / 83.9 %
        "About 151 seats were filled per aircraft.",  # 83.9 % of 180, neither named by it: chance
    ],
)
def test_a_count_set_against_a_percentage_is_not_working(sentence: str):
    support, invented, how = one(sentence)
    assert support == "unsupported" and invented, how
