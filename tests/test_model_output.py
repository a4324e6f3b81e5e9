"""Named cases for reading what a model (or a client) sends; the fuzz suite
(tests/test_fuzz_model_output.py) covers the same functions generically.
Numbers refer to the issue "Twenty-five ways a model, a page or a folder
breaks a run today"."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import ValidationError

from activities.llm import scrub
from workflows.agent import MAX_CALLS_PER_TURN, tool_action
from workflows.model_output import load_json, read_arguments, read_plan, repair_arguments, strip_think
from workflows.models import ResearchInput, ToolCall

NAMES = ["web_search", "crawl", "run_python"]


def action(name: str, arguments: str, position: int = 0):
    return tool_action(ToolCall(id="c", name=name, arguments=repair_arguments(arguments)), NAMES, position, 16)


def test_1_whitespace_only_code_is_an_error_for_the_model():
    assert action("run_python", json.dumps({"code": "  \n\t "})) == action("run_python", '{"code": ""}')
    assert action("run_python", json.dumps({"code": "  \n\t "})).tool == "error"
    assert action("run_python", json.dumps({"code": "\nprint(1)"})).argument == "\nprint(1)"


def test_2_lone_surrogates_are_replaced_wherever_they_come_from():
    args, _ = read_arguments('{"query": "fish \\ud83d"}')
    assert args["query"] == "fish \ufffd"
    assert action("web_search", '{"query": "fish \\ud83d"}').argument == "fish \ufffd"
    reading = read_plan('{"title": "T \\ud83d", "steps": [{"title": "a\\ud83d"}]}', 3, "en-US")
    assert reading.plan.title == "T \ufffd" and reading.plan.steps[0].title == "a\ufffd"


def test_3_calls_beyond_the_turn_limit_get_an_error():
    assert action("web_search", '{"query": "q"}', position=MAX_CALLS_PER_TURN - 1).tool == "web_search"
    late = action("web_search", '{"query": "q"}', position=MAX_CALLS_PER_TURN)
    assert late.tool == "error" and "only the first" in late.argument


@pytest.mark.parametrize("text", ["[" * 331, "[" * 1000, "{" * 30_000, "{" * 1_000_000])
def test_5_deep_or_huge_nesting_is_refused_at_once(text):
    started = time.monotonic()
    assert read_plan(text, 3, "en-US").problem
    assert read_arguments(text)[1]
    assert repair_arguments(text)  # left as it was, for read_arguments to refuse
    assert time.monotonic() - started < 1.0  # far below Temporal's 2 s workflow-task limit


def test_7_a_literal_think_in_an_answer_stays():
    assert strip_think("Use <think> tags to reason. Then answer.") == "Use <think> tags to reason. Then answer."
    assert strip_think("<think>plan it</think>The answer.") == "The answer."
    assert strip_think("reasoning without an opening</think>The answer.") == "The answer."
    assert strip_think("<think>cut off while thinking") == ""


def test_9_a_bare_list_of_steps_becomes_a_plan_with_inferred_types_and_titles():
    reading = read_plan(
        json.dumps([{"need_search": True, "description": "Find figures"}, {"need_search": False, "title": "Weigh"}]),
        3,
        "en-US",
        "Wind power in Denmark",
    )
    plan = reading.plan
    assert plan.title == "Wind power in Denmark"
    assert [(s.title, s.step_type) for s in plan.steps] == [("Find figures", "research"), ("Weigh", "analysis")]


def test_9_steps_beyond_the_limit_are_named():
    reading = read_plan(json.dumps({"title": "T", "steps": [{"title": f"s{i}"} for i in range(5)]}), 3, "en-US")
    assert [s.title for s in reading.plan.steps] == ["s0", "s1", "s2"] and reading.cut == ["s3", "s4"]


def test_json_is_read_from_fences_and_repaired():
    assert load_json('```json\n{"a": 1}\n```') == ({"a": 1}, None)
    assert load_json('{"a": 1,}')[0] == {"a": 1}
    assert load_json("")[1] == "the reply is empty"


def test_23_provider_errors_lose_keys_and_bearer_tokens():
    text = "bad header Authorization: Bearer sk-abc123456789 for key tvly-secretsecret and my-own-secret"
    cleaned = scrub(text, ["my-own-secret"])
    assert "sk-abc123456789" not in cleaned and "tvly-secretsecret" not in cleaned and "my-own-secret" not in cleaned
    assert "Bearer ***" in cleaned


@pytest.mark.parametrize("hours", [3e10, 1e300, float("inf"), float("nan"), 0, -1])
def test_24_review_timeouts_out_of_range_are_rejected(hours):
    with pytest.raises(ValidationError):
        ResearchInput(question="q", review_timeout_hours=hours)


def test_24_a_long_but_sane_review_timeout_is_accepted():
    assert ResearchInput(question="q", review_timeout_hours=24 * 365).review_timeout_hours == 24 * 365


@pytest.mark.parametrize(
    "text",
    [
        '{"title": "Tides", "steps": ["Find tidal barrage costs", "Compare with tidal stream"]}',
        '["Find tidal barrage costs", "Compare with tidal stream"]',
        '{"title": "Tides", "steps": "Find tidal barrage costs"}',
    ],
)
def test_weak_model_steps_written_as_strings_become_research_steps(text):
    reading = read_plan(text, 3, "en-US", topic="Tides")
    assert reading.problem is None and reading.plan.steps
    assert reading.plan.steps[0].description == "Find tidal barrage costs"
    assert reading.plan.steps[0].step_type == "research" and reading.plan.steps[0].title


@pytest.mark.parametrize(
    ("given", "meant"),
    [("search", "research"), ("Calculation", "processing"), ("analyse", "analysis"), ("web", "research")],
)
def test_a_step_type_outside_the_three_is_read_as_the_one_meant(given, meant):
    text = json.dumps({"title": "T", "steps": [{"title": "a", "description": "d", "step_type": given}]})
    assert read_plan(text, 3, "en-US").plan.steps[0].step_type == meant
