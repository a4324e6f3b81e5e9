"""Condensing the findings for the reporter holds to what it condenses
(workflows/condense.py), both ways: a weak model's condensation that states
what its text lacks is not used, a strong model's faithful one always is.

Each condensation is traced against the text it condensed as the model
activity traces it (``activities/support.support_of``, what ``keep_shown``
returns), then judged by ``invents``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from activities.evidence import NOT_FOUND, NOTHING_WRITTEN
from activities.support import support_of
from workflows.condense import CUT, invents, shortened, stands_for_findings
from workflows.models import ModelReply

ROOT = Path(__file__).resolve().parent.parent
STRONG = ROOT / "tests" / "fixtures" / "strong"
LIVE = ROOT / "tests" / "fixtures" / "weak" / "smollm2-live"
WEB = "http://127.0.0.1:8800"
OLVANE = "By what percentage did Olvane Instruments' revenue grow from 2021 to 2023?"

# Faithful condensations written as a strong hosted model condenses (the
# ``condense`` prompt: short bullets, every figure, name and URL kept, at
# times a figure computed from them), each of the text it condensed: the
# strong findings fixtures, and two strong reports standing for long
# findings (one in Chinese).
CONDENSED = {
    "olvane-revenue-growth-1": "olvane-revenue-growth/findings-1.md",
    "tide-gauge-comparison-1": "tide-gauge-comparison/findings-1.md",
    "tide-gauge-comparison-2": "tide-gauge-comparison/findings-2.md",
    "selm-nitrate-1": "selm-nitrate/findings-1.md",
    "puffins-latest-1": "puffins-latest/findings-1.md",
    "chengbo-zh-1": "chengbo-zh/report-full.md",
    "ferry-average-1": "ferry-average/report-full.md",
}


def judged(condensed: str, text: str, question: str = "") -> ModelReply:
    """The reply as the model activity returns it with ``keep_shown``."""
    counts, statements = support_of(condensed, text, question)
    return ModelReply(content=condensed, history="", support=counts, statements=statements, judged=True)


def fixture(path: Path) -> str:
    return path.read_text(encoding="utf-8").replace("{web}", WEB)


@pytest.mark.parametrize("name", sorted(CONDENSED))
def test_a_strong_models_faithful_condensation_is_used(name: str):
    text = fixture(STRONG / CONDENSED[name])
    condensed = fixture(STRONG / "condensed" / f"{name}.md")
    reply = judged(condensed, text)
    assert reply.support is not None and reply.support.stated >= 2
    assert not invents(reply), [s.text for s in reply.statements if s.invented]


def live(round_: int) -> tuple[str, str]:
    """What SmolLM2-135M was given to condense, and what it wrote, in the
    eval's olvane-revenue-growth run at 5d5eafa (round ``round_`` of three:
    each round condenses the one before)."""
    messages = json.loads((LIVE / f"olvane-revenue-growth-condense-{round_}.json").read_text(encoding="utf-8"))
    return messages[0]["content"], messages[-1]["content"]


@pytest.mark.parametrize("round_", [2, 3])
def test_a_weak_models_condensation_that_invents_is_not_used(round_: int):
    """Round 2 named "The Ocean Life 2.0", round 3 added "founded … in 2016":
    neither is in the text it condensed (nor on any page of the run); the
    reporter "stated" them from the condensed findings and they shipped."""
    text, condensed = live(round_)
    reply = judged(condensed, text, OLVANE)
    assert invents(reply), reply.statements


def test_the_passages_that_stand_for_a_steps_findings_are_not_given_to_a_model():
    """Round 1 was given a step's passages (its model wrote no findings), and
    lost every figure of them; passages are shortened by the workflow."""
    text, _ = live(1)
    assert stands_for_findings(text)
    assert stands_for_findings(f"{NOT_FOUND}\n\n[Page]({WEB}/a): A passage.")
    assert stands_for_findings(f"The model's words, stating nothing.\n\n{NOTHING_WRITTEN}\n\n[Page]({WEB}/a): A.")
    assert not stands_for_findings(fixture(STRONG / "olvane-revenue-growth/findings-1.md"))
    short = shortened(text, 400)
    assert len(short) <= 400 * 3 + len(CUT) + 2 and short.endswith(CUT)
    assert short.startswith(NOTHING_WRITTEN.join(text.split(NOTHING_WRITTEN)[:1]))  # its note first
    assert "| 2023 | 26.0 | 4.4 | 212 |" in short  # its best passage, the revenue table, whole


def test_a_reply_not_judged_is_taken_as_written():
    assert not invents(ModelReply(content="The Ocean Life 2.0 was founded in 2016.", history="", judged=False))
    assert not invents(judged("Nothing here.", "Also nothing."))  # states nothing: nothing invented


def test_shortened_keeps_whole_paragraphs_and_cuts_one_that_is_too_long_at_a_sentence():
    paragraphs = [f"Paragraph {n}. " + "Words of it. " * 10 for n in range(10)]
    text = "\n\n".join(p.strip() for p in paragraphs)
    assert shortened(text, 10_000) == text  # fits: as it is
    short = shortened(text, 100)
    kept = short.removesuffix(f"\n\n{CUT}").split("\n\n")
    assert kept == [p.strip() for p in paragraphs[: len(kept)]] and 1 <= len(kept) < 10
    one = "One sentence of a long paragraph. " * 40
    cut = shortened(one, 60)
    assert cut.endswith(f". {CUT}") and len(cut) <= 60 * 3 + 2
