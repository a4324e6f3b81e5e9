"""How much of a report what its writer was shown holds (activities/held.py):
a report written from its material against one a small model invented
around the material's names (SmolLM2-135M's, as it wrote them on the eval
suite), a report in another language, a looping reply."""

from __future__ import annotations

import pytest

from activities.held import held_share, same_language, statements

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
Brackwater to Hallow Point, which takes 40 minutes, four times a day.
"""

FAITHFUL = """# The mayor of Brackwater

## Key Points
- Tobias Wren is the mayor of Brackwater; he was elected on 6 May 2021.
- Wren received 4,312 votes, ahead of Ada Locke with 3,877 votes.
- Before he was elected, Wren was a ferry captain with Harrowgate Ferries.

## Overview
Brackwater is a harbour town at the mouth of the Selm, and the question is who leads it.

## Key Citations
- [Brackwater](http://127.0.0.1:8080/towns/brackwater.md)
"""

INVENTED = """The Harrowgate Ferry, the only vessel that travels from Brackwater to Saltcombe, offers a great deal to
visitors. The Ferry Pier, a beautiful building on the south coast of Brackwater, will double its capacity.
The Ferries also offer an excellent tour that includes 50 different sights for sightseeing.
In 2020 the Brackwater Council saw a significant increase to 800 vessels, mostly in the sea.
The Tresco, designed by a team from a luxury company, is bringing a fresh new look to Brackwater."""

GERMAN = """# Der Bürgermeister von Brackwater

Tobias Wren ist seit dem 6. Mai 2021 Bürgermeister von Brackwater. Er erhielt bei der Wahl 4.312 Stimmen.
Zuvor war er Kapitän bei Harrowgate Ferries. Die Stadt liegt an der Mündung der Selm und hat einen Hafen.
Seine Gegenkandidatin Ada Locke erhielt 3.877 Stimmen, wie die Stadt mitteilte."""


def test_a_report_written_from_its_material_is_held_and_an_invented_one_is_not():
    assert held_share(FAITHFUL, MATERIAL, QUESTION) >= 0.75
    assert held_share(INVENTED, MATERIAL, QUESTION) == 0.0  # its names are the material's; what it says of them is not


def test_a_report_in_another_language_than_its_material_is_not_judged():
    assert not same_language(GERMAN, MATERIAL) and held_share(GERMAN, MATERIAL) is None
    assert same_language(FAITHFUL, MATERIAL) and same_language(INVENTED, MATERIAL)


@pytest.mark.parametrize(
    "report",
    [
        "",
        "The findings are clear and the report is short.",  # states no figure and no name
        "Tobias Wren was elected mayor of Brackwater in May 2021.",  # one statement: too few to tell
        # What the question gives is no statement: "Brackwater" and "mayor" are the question's.
        "The mayor of Brackwater was elected by the people.\nThe question asks how many votes the mayor received.",
    ],
)
def test_a_report_stating_too_little_is_not_judged(report: str):
    assert held_share(report, MATERIAL, QUESTION) is None


def test_sentences_restating_the_question_are_not_statements():
    restating = "Who is the mayor of Brackwater? Brackwater elects its mayor, and votes are counted.\n"
    assert statements(restating + INVENTED, QUESTION)[0].startswith("The Harrowgate Ferry")
    assert held_share(restating * 3 + INVENTED, MATERIAL, QUESTION) == 0.0


def test_a_reply_looping_on_one_sentence_states_it_once():
    loop = "The Ferry Pier of Brackwater will double its capacity in 2024.\n" * 200
    assert statements(loop + FAITHFUL)[0] == "The Ferry Pier of Brackwater will double its capacity in 2024."
    assert len(statements(loop)) == 1 and held_share(loop, MATERIAL) is None


def test_a_chinese_report_is_judged_against_chinese_material():
    """Its statements are its sentences with figures (CJK text has no capitals to tell a name by)."""
    material = (
        "[user]\n# 发现\n澄波海洋仪器有限公司是一家海洋仪器制造商，成立于1998年，总部位于宁州市的港口区，有320名员工。"
        "该公司在2023年一共售出了1250台Tern-4潮位计，主要销往沿海城市的港务局。"
    )
    held = (
        "澄波海洋仪器有限公司是一家海洋仪器制造商，成立于1998年。\n该公司的总部位于宁州市的港口区，有320名员工。\n"
        "该公司在2023年一共售出了1250台Tern-4潮位计，主要销往沿海城市。"
    )
    invented = (
        "澄波海洋仪器有限公司在2010年把总部迁往了上海市的浦东新区。\n该公司在2023年一共售出了9000台RP-9潮位计和风速计。\n"
        "该公司目前有5000名员工在北京和广州的工厂工作。"
    )
    assert held_share(held, material) == 1.0
    assert held_share(invented, material) == 0.0
