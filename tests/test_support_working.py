"""A strong model's working, read as arithmetic both ways (activities/figures.py
``unlatex``, activities/expressions.py, activities/arithmetic.py,
activities/units.py ``per_scales``): formulas in LaTeX, "× 100" for a
percentage, rates per 1,000, so much a year, a rate shown the way its words
go. Each faithful form is derived; the same form with a figure the material
does not give is not."""

from __future__ import annotations

import pytest

from activities.figures import figures, plain
from activities.support import support_of
from activities.units import per_scales

QUESTION = "How did harbour landings change between 2019 and 2023?"
MATERIAL = """[user]
# Research question
How did harbour landings change between 2019 and 2023?

# Findings
## Landings and the fleet
- Harbour landings were 1,960 t in 2019 and 2,675 t in 2023 (Port Authority annual report).
- The harbour had 412 registered boats in 2023, and 8,240 residents lived in the town.
- Total headcount was 18,420 at the autumn 2019 census and 22,340 at the autumn 2024 census.
- The harbour lighthouse was first lit in 1871 and rebuilt in 1923.

# Evidence: passages of the pages the findings rest on, each after a link to its page

[Port report](http://127.0.0.1:8080/port.md): Landings at the harbour reached 2,675 tonnes in 2023, up from
1,960 tonnes in 2019. There were 412 registered boats.
"""


def classes(report: str) -> list[tuple[str, bool, str]]:
    _, statements = support_of(report, MATERIAL, QUESTION)
    return [(s.support, s.invented, s.arithmetic or "") for s in statements]


def one(sentence: str) -> tuple[str, bool, str]:
    (found,) = classes(f"# Report\n\n- {sentence}\n")
    return found


@pytest.mark.parametrize(
    ("latex", "read"),
    [
        (r"$\frac{2675-1960}{1960} \approx 36.5\%$", "$(2675-1960)/(1960) ≈ 36.5%$"),
        (r"$\left(\frac{2{,}675}{1{,}960}\right)^{1/4} - 1$", "$((2,675)/(1,960))^(1/4) - 1$"),
        (r"$(x)^{\frac{1}{5}}$", "$(x)^((1)/(5))$"),
        (r"$491.7\text{m} \div 208{,}950 \approx \pounds 2{,}353$", "$491.7m ÷ 208,950 ≈ £ 2,353$"),
        ("no formula: {a} and 2,675 t", "no formula: {a} and 2,675 t"),
    ],
)
def test_latex_is_read_as_the_arithmetic_it_writes(latex: str, read: str):
    assert plain(latex) == read


def test_a_figure_in_latex_is_one_figure_and_a_latex_per_cent_a_percentage():
    found = figures(plain(r"$22\,340 - 18{,}420 = 3{,}920$ and $3.93\,\%$"), None)
    assert [(f.values[0], f.percent) for f in found] == [
        (22340.0, False),
        (18420.0, False),
        (3920.0, False),
        (3.93, True),
    ]


@pytest.mark.parametrize(
    "sentence",
    [
        r"$$\text{CAGR} = \left( \dfrac{22\,340}{18\,420} \right)^{\frac{1}{5}} - 1 \approx 3.93\,\%$$",
        r"The compound annual growth rate is $\left(\frac{22{,}340}{18{,}420}\right)^{1/5} - 1 \approx 3.9\%$.",
        r"Landings grew by $\frac{2675-1960}{1960} \approx 36.5\%$ between 2019 and 2023.",
        r"Landings grew by $\frac{2{,}675 - 1{,}960}{1{,}960} \times 100 \approx 36.5\%$.",
        r"Headcount grew by $22{,}340 - 18{,}420 = 3{,}920$ students.",
        "Landings grew by (2,675 − 1,960) / 1,960 × 100 ≈ 36.5 %.",
    ],
)
def test_working_shown_in_latex_or_times_100_is_derived(sentence: str):
    support, invented, _ = one(sentence)
    assert (support, invented) == ("derived", False)


@pytest.mark.parametrize(
    "sentence",
    [
        r"Landings grew by $\frac{2675-1960}{1960} \approx 41.2\%$ between 2019 and 2023.",
        r"Headcount grew by $22{,}340 - 18{,}420 = 4{,}920$ students.",
        "Landings grew by 3,650 t (2,675 × 100 ≈ 3,650).",
        r"The compound annual growth rate is $\left(\frac{24{,}340}{18{,}420}\right)^{1/5} - 1 \approx 5.7\%$.",
    ],
)
def test_wrong_working_or_an_unstated_figure_in_it_is_not_derived(sentence: str):
    support, invented, _ = one(sentence)
    assert support == "unsupported" and invented


def test_a_rate_per_thousand_is_the_ratio_of_the_figures_it_names():
    assert one("The town had about 50 boats per 1,000 residents (412 boats, 8,240 residents).")[:2] == (
        "derived",
        False,
    )
    assert one("The town had about 70 boats per 1,000 residents (412 boats, 8,240 residents).")[:2] == (
        "unsupported",
        True,
    )
    assert one("The town had about 50 boats per 1,000 residents.")[0] == "unsupported"  # from what it names only


@pytest.mark.parametrize(
    ("text", "scales"),
    [
        ("50 boats per 1,000 residents", [1000.0]),
        ("3.1 per 100,000 people", [100000.0]),
        ("7 pour 100 000 habitants", [100000.0]),
        ("for every thousand", [1000.0]),
        ("per capita", []),
        ("per 10,0001", []),
    ],
)
def test_the_scale_a_rate_is_counted_in(text: str, scales: list[float]):
    assert per_scales(text) == scales


def test_so_much_a_year_is_a_difference_over_the_span_of_its_years():
    found = classes(
        "# R\n\n- Landings rose from 1,960 t in 2019 to 2,675 t in 2023.\n"
        "- On average landings grew by around 179 t a year.\n"
        "- On average landings grew by around 219 t a year.\n"
    )
    assert found[1] == ("derived", False, "(2,675 − 1,960) / 4 years = 178.8")
    assert found[2][:2] == ("unsupported", True)
    # one digit "a year" is matched by too much by chance: never computed so
    assert one("Landings were 1,960 t in 2019 and 2,675 t in 2023, about £5 million a year.")[0] == "unsupported"


def test_a_rate_is_shown_the_way_its_words_go():
    found = classes(
        "# R\n\n- Landings rose from 1,960 t in 2019 to 2,675 t in 2023.\n"
        "- That is growth of roughly 8 % a year compounded.\n"
        "- In 2019 landings were 73 % of their 2023 level.\n"
    )
    assert found[1] == ("derived", False, "(2,675 / 1,960)^(1/4) − 1 = 8.085 %")  # not a fall of 7.48 % a year
    assert found[2] == ("derived", False, "1,960 / 2,675 = 73.27 %")


def test_a_span_of_years_is_shown_in_years():
    found = classes(
        "# R\n\n- The harbour lighthouse was first lit in 1871 and rebuilt in 1923.\n"
        "- It was rebuilt 52 years after it was first lit.\n"
        "- It was rebuilt 61 years after it was first lit.\n"
    )
    assert found[1] == ("derived", False, "1923 − 1871 = 52")
    assert found[2][:2] == ("unsupported", True)
