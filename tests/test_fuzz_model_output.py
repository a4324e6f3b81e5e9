"""Property-based tests: whatever a model writes, the functions that read it
return a value or a readable error, never raise, and what they return can
always be serialised for Temporal again.

Bounded for CI: each property runs ``EXAMPLES`` examples (``FUZZ_EXAMPLES``
overrides), the whole file well under a minute on two cores.
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activities.llm import tool_calls
from activities.text_tools import parse_reply
from workflows import coordinator, planner, reporter, review
from workflows.agent import MAX_CALLS_PER_TURN, ToolAction, tool_action
from workflows.clean import clean_deep, clean_text
from workflows.languages import guess_locale, locale_tag
from workflows.model_output import (
    MAX_NESTING,
    load_json,
    nesting_depth,
    read_arguments,
    read_plan,
    repair_arguments,
    strip_think,
)
from workflows.models import Citation, ModelReply, Plan, ToolCall
from workflows.research_team import batches
from workflows.tool_models import ToolResult

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1000"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# Text as hostile as a model can send: any code point, lone surrogates and
# control characters included, and the shapes that broke parsers before.
hostile_text = st.one_of(
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=300),
    st.text(alphabet=st.sampled_from('{}[]",:\\ \n\t<>/thinkTHINK\x00\ud83d\ude00\u4e2d'), max_size=300),
    st.builds(lambda n, c: c * n, st.integers(0, 3000), st.sampled_from(["[", "{", '{"a":', "[[{", "<think>"])),
    st.just(""),
    st.just(" \n\t "),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | hostile_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=20,
)
json_text = st.one_of(hostile_text, json_values.map(lambda v: json.dumps(v)), json_values.map(str))


def serialisable(model) -> None:
    """What Temporal does with every value that crosses the workflow boundary."""
    type(model).model_validate_json(model.model_dump_json())


@FUZZ
@given(hostile_text)
def test_clean_text_always_serialises(text):
    cleaned = clean_text(text)
    json.dumps(cleaned).encode("utf-8")
    assert clean_text(cleaned) == cleaned  # idempotent
    assert "\x00" not in cleaned


@FUZZ
@given(json_values)
def test_clean_deep_always_serialises(value):
    json.dumps(clean_deep(value)).encode("utf-8")


@FUZZ
@given(hostile_text)
def test_strip_think_never_raises_and_keeps_a_literal_think(text):
    out = strip_think(text)
    assert isinstance(out, str)
    if "think>" not in text.lower():  # a tag in the answer's own text is not reasoning
        assert strip_think(f"The tag <think> appears here. {text}").startswith("The tag <think> appears here.")


@FUZZ
@given(json_text, st.booleans())
def test_load_json_never_raises(text, repair):
    value, problem = load_json(text, repair=repair)
    assert problem is None or value is None
    json.dumps(value).encode("utf-8")


@FUZZ
@given(json_text)
def test_tool_arguments_are_repaired_then_read_without_raising(raw):
    repaired = repair_arguments(raw)
    args, problem = read_arguments(repaired)
    assert isinstance(args, dict)
    assert problem is None or isinstance(problem, str)
    json.dumps(args).encode("utf-8")


@FUZZ
@given(hostile_text, hostile_text, json_text, st.integers(0, 40))
def test_every_tool_call_gets_one_readable_decision(call_id, name, arguments, position):
    call = ToolCall(id=call_id or "x", name=name, arguments=repair_arguments(arguments))
    serialisable(call)
    names = ["web_search", "crawl", "run_python", "local_search", "mcp__srv__tool"]
    action = tool_action(call, names, position, MAX_CALLS_PER_TURN)
    assert isinstance(action, ToolAction)
    if action.tool == "error":
        assert action.argument.strip()
    elif action.tool != "mcp":
        assert action.argument.strip()  # never an empty query, URL or code
        json.dumps(action.argument).encode("utf-8")


def fake_call(ident, name, arguments):
    return SimpleNamespace(id=ident, function=SimpleNamespace(name=name, arguments=arguments))


@FUZZ
@given(st.lists(st.tuples(st.none() | hostile_text, st.none() | hostile_text, st.none() | json_text), max_size=8))
def test_provider_tool_calls_become_valid_unique_calls(raw):
    calls = tool_calls([fake_call(*c) for c in raw] + [SimpleNamespace(id="no-function")])
    assert len(calls) == len(raw)
    assert len({c.id for c in calls}) == len(calls)  # every call is answered under its own id
    reply = ModelReply(content="", tool_calls=calls, history="sha256:" + "0" * 64)
    serialisable(reply)


@FUZZ
@given(hostile_text, st.integers(1, 20), hostile_text)
def test_read_plan_returns_a_plan_or_a_reason(text, max_steps, topic):
    reading = read_plan(text, max_steps, "en-US", topic)
    assert (reading.plan is None) != (reading.problem is None)
    if reading.plan:
        assert len(reading.plan.steps) <= max_steps
        serialisable(reading.plan)
        assert batches(reading.plan, True) and batches(reading.plan, False) or not reading.plan.steps


plan_like = st.fixed_dictionaries(
    {},
    optional={
        "title": json_values,
        "thought": json_values,
        "has_enough_context": json_values,
        "locale": json_values,
        "steps": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "title": json_values,
                    "description": json_values,
                    "step_type": st.sampled_from(["research", "processing", "analysis", "Research", "", "other"])
                    | json_values,
                    "need_search": json_values,
                    "need_web_search": json_values,
                },
            ),
            max_size=25,
        )
        | json_values,
    },
)


@FUZZ
@given(plan_like, st.integers(1, 20))
def test_plans_of_any_shape_are_read_without_raising(data, max_steps):
    for text in (json.dumps(data), json.dumps(data.get("steps")), f"```json\n{json.dumps(data)}\n```"):
        reading = read_plan(text, max_steps, "zh-CN", "the topic")
        if reading.plan:
            serialisable(reading.plan)
            assert all(s.title.strip() for s in reading.plan.steps)


@FUZZ
@given(hostile_text, st.integers(1, 20))
def test_recorded_replies_are_read_as_before_or_fail_with_plan_error(text, max_steps):
    try:
        plan = planner.parse_plan(text, max_steps, "en-US")
    except planner.PlanError:
        return
    serialisable(plan)


@FUZZ
@given(st.lists(st.tuples(hostile_text, json_text), max_size=4), hostile_text, st.booleans())
def test_coordination_never_raises(calls, content, may_ask):
    reply = ModelReply(
        content=content,
        history="sha256:" + "0" * 64,
        tool_calls=[ToolCall(id=f"c{i}", name=n, arguments=repair_arguments(a)) for i, (n, a) in enumerate(calls)],
    )
    decision = coordinator.coordination(reply, "the question", may_ask=may_ask)
    assert decision.kind in ("handoff", "answer", "decline", "ask")
    if decision.kind == "handoff":
        assert decision.topic.strip()
    json.dumps([decision.text, decision.topic, decision.locale]).encode("utf-8")


@FUZZ
@given(json_values)
def test_review_texts_are_accepted_or_rejected_with_a_reason(feedback):
    try:
        verdict = review.parse_review(feedback)
    except review.InvalidReview as err:
        assert str(err)
        return
    assert verdict.accepted or verdict.edit.strip()


@FUZZ
@given(hostile_text, st.lists(st.builds(Citation, title=hostile_text, url=hostile_text), max_size=5))
def test_citation_checks_never_raise(report, seen):
    checked = reporter.verify_citations(report, seen)
    reporter.cited(checked, seen)
    json.dumps(checked).encode("utf-8")


@FUZZ
@given(hostile_text, st.lists(st.sampled_from(["web_search", "crawl", "run_python"]), max_size=3))
def test_json_tool_mode_replies_never_raise(text, allowed):
    content, calls = parse_reply(text, allowed)
    for call in calls:
        assert call.name in allowed
        serialisable(call)


@FUZZ
@given(json_values, hostile_text)
def test_locale_guesses_never_raise(value, text):
    tag = locale_tag(value)
    assert tag is None or tag.strip()
    assert guess_locale(text)


@FUZZ
@given(hostile_text)
def test_tool_results_and_models_clean_what_pages_send(text):
    serialisable(ToolResult(content=text, sources=[Citation(title=text, url=text)]))
    serialisable(Plan(title=text, thought=text))


@pytest.mark.parametrize("depth", [331, 1000, 30_000])
def test_deep_nesting_is_refused_quickly(depth):
    for text in ("[" * depth, "{" * depth, '{"a":' * depth):
        assert nesting_depth(text) > MAX_NESTING
        assert load_json(text)[1]
        assert read_plan(text, 3, "en-US").problem
        assert read_arguments(text)[1]
