"""The pure checks behind issue 31's items 1, 2 and 7: how much of a reply
repeats its instructions, whether a plan is its prompt's example, whether a
report is in its locale's script, the report built when the reporter
fails, and that every role that writes for the user is told the language."""

from __future__ import annotations

import json

import pytest

from activities.llm import render_prompt
from testkit.research_script import plan_json
from workflows.echoes import EchoMask, echo_share, echoed
from workflows.fallback_report import fallback_report
from workflows.languages import language_name, script_share
from workflows.model_output import read_plan
from workflows.models import Citation

VARIABLES = {"locale": "zh-CN", "current_time": "2026-11-26, Thursday", "report_style": "academic", "max_step_num": 3}


def test_a_reply_that_is_its_instructions_is_an_echo_and_one_in_its_own_words_is_not():
    prompt = render_prompt("reporter", VARIABLES)
    assert echo_share(prompt, prompt) == 1.0
    gemma = prompt[:1500] + "\n\nI hope this helps."  # Gemma's replies: the prompt, and a little more
    assert echoed(echo_share(gemma, prompt))
    own = "# Lantern Rock\n\n## Key Points\n- The keeper logged 4,417 ships in 1911, the log book says.\n"
    assert not echoed(echo_share(own, prompt))
    assert not echoed(echo_share(prompt, prompt), has_tool_calls=True)  # a tool call is an answer
    assert echo_share("Thanks!", prompt) == 0.0  # too short to tell


def test_a_plan_that_copies_the_prompts_example_is_no_plan_but_real_plans_pass():
    prompt = render_prompt("planner", VARIABLES | {"locale": "en-US"})
    example = prompt.split("```")[1].replace("$locale", "en-US")
    assert "copies the prompt's example" in read_plan(example, 3, "en-US", "q", prompt).problem
    # Only the step copied (a weak model that wrote its own title):
    copied = json.loads(example) | {"title": "Tessary's population", "thought": "The user wants a number."}
    assert read_plan(json.dumps(copied), 3, "en-US", "q", prompt).plan is None
    for plan in (
        plan_json("Scripted research", [(f"Step {i}", "research") for i in range(5)]),
        plan_json("Lantern Rock", [("Find the lighthouse fact", "research"), ("Compute the sum", "processing")]),
        json.dumps({"steps": ["Find the 2023 census count of Tessary", "Compare it with the 2010 count"]}),
    ):
        assert read_plan(plan, 3, "en-US", "q", prompt).plan is not None, plan


def test_text_repeating_its_request_is_masked_word_runs_only():
    mask = EchoMask(["Who kept the Lantern Rock lighthouse in 1911?"])
    text, own, total = mask.own_words("Who kept the Lantern Rock lighthouse in 1911? Ada Halvorsen did.")
    assert "Ada Halvorsen did." in text and "lighthouse" not in text
    assert (own, total) == (3, 11)
    assert mask.own_words("The Lantern Rock keeper")[1:] == (4, 4)  # three words in a row tell nothing


@pytest.mark.parametrize(
    ("text", "locale", "share"),
    [
        ("人口增长了36.5%，据2023年的人口普查。" * 3, "zh-CN", 1.0),
        # What Gemma wrote for the Chinese question: 11 CJK characters, 964 Latin letters.
        ("灯塔看守人记录了船只数。 " + "The keeper of the lighthouse logged ships. " * 25, "zh-CN", 0.3),
        ("This report is in English, see https://example.com/路径/页面 for more." * 3, "en-US", 1.0),
        ("Отчёт написан по-русски. " * 8, "ru-RU", 1.0),
        ("short", "en-US", None),  # too short to tell
        ("Ein Bericht auf Deutsch über den Leuchtturm. " * 5, "ka-GE", None),  # a script not known here
    ],
)
def test_how_much_of_a_text_is_in_its_locales_script(text: str, locale: str, share: float | None):
    found = script_share(text, locale)
    assert found == share if share in (None, 1.0) else found < share


def test_the_language_reaches_every_role_that_writes_for_the_user():
    for role in ("coordinator", "planner", "researcher", "coder", "analyst", "reporter", "condense"):
        rendered = render_prompt(role, VARIABLES)
        assert "zh-CN" in rendered, role
        assert "$locale" not in rendered and "$language" not in rendered, role
    for role in ("what_changed", "podcast", "slides"):
        assert "Chinese (zh-CN)" in render_prompt(role, VARIABLES), role
    assert "Chinese (zh-CN)" in render_prompt("reporter", VARIABLES)
    assert language_name("ka-GE") == "the language of the locale `ka-GE`"


def test_the_report_built_when_the_reporter_fails_says_so_and_holds_the_findings():
    sources = [Citation(title="Lantern [Rock]", url="http://127.0.0.1:9/rock"), Citation(url="http://127.0.0.1:9/b")]
    report = fallback_report(
        "How many ships?", [("Find the fact", "- FACT: 4417 ships")], sources, "HTTP 500", "the run was cancelled"
    )
    head = report[:600]
    assert report.startswith("# How many ships?\n") and "the reporter failed (HTTP 500)" in head
    assert "the run was cancelled" in head and "### Find the fact\n\n- FACT: 4417 ships" in report
    assert "- [Lantern (Rock)](http://127.0.0.1:9/rock)\n- [http://127.0.0.1:9/b](http://127.0.0.1:9/b)" in report
    empty = fallback_report("Q", [], [], "no reply", background="Search results: one.")
    assert "## What the background search found\n\nSearch results: one." in empty
