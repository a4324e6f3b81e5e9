"""The flow's decisions (pure functions beside each box), tested without Temporal."""

import json
from pathlib import Path

import pytest

from workflows import coordinator, languages, models, planner, reporter, research_team, review, topics
from workflows.models import Citation, ModelReply, Plan, Step, ToolCall


def reply(content="", calls=()):
    return ModelReply(
        content=content,
        history="sha256:" + "0" * 64,
        tool_calls=[ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)],
    )


@pytest.mark.parametrize("text", ["[ACCEPTED]", "[accepted] looks good", "  [Accepted]"])
def test_review_accepts_case_insensitively(text):
    assert review.parse_review(text) == review.Review(accepted=True)


def test_review_edit_carries_the_change():
    verdict = review.parse_review("[edit_plan] add a step on costs")
    assert not verdict.accepted and verdict.edit == "add a step on costs"


@pytest.mark.parametrize("text", ["looks good", "", "ACCEPTED", "[EDIT_PLAN]   "])
def test_review_rejects_anything_else_with_a_reason(text):
    with pytest.raises(review.InvalidReview, match=r"\[ACCEPTED\]|\[EDIT_PLAN\]"):
        review.parse_review(text)


def test_coordinator_handoff_uses_topic_and_locale():
    d = coordinator.coordination(
        reply(calls=[("handoff_to_planner", '{"research_topic": "AI 芯片市场", "locale": "zh-CN"}')]),
        "AI 芯片的现状",
    )
    assert (d.kind, d.topic, d.locale) == ("handoff", "AI 芯片市场", "zh-CN")


@pytest.mark.parametrize(
    "topic",
    [
        "The user's locale, e.g. en-US or zh-CN.",
        "The research topic, restated in the user's language.",
        "The research question, restated clearly in the user's language.",
        "2019-08-30 2025",
        "en-US",
        "",
    ],
)
def test_a_handoff_topic_not_about_the_question_falls_back_to_the_question(topic):
    question = "How does tidal stream power compare with tidal barrages?"
    arguments = json.dumps({"research_topic": topic, "locale": "en-US"})
    d = coordinator.coordination(reply(calls=[("handoff_to_planner", arguments)]), question)
    assert (d.kind, d.topic) == ("handoff", question)


def test_every_schema_description_is_not_a_topic():
    tools = json.loads((Path(__file__).parent.parent / "prompts" / "tools.json").read_text())
    for tool in tools:
        for spec in tool["parameters"]["properties"].values():
            assert not topics.about_question(spec["description"], "Research the user's language and locale")


def test_a_topic_sharing_content_words_with_the_question_is_kept():
    d = coordinator.coordination(
        reply(calls=[("handoff_to_planner", '{"research_topic": "Tidal barrages versus tidal stream turbines"}')]),
        "How does tidal stream power compare with tidal barrages?",
    )
    assert d.topic == "Tidal barrages versus tidal stream turbines"


@pytest.mark.parametrize(
    ("model", "question", "expected"),
    [
        ("zh-CN", "What is tidal power?", "en-US"),
        ("en-US", "潮汐能发展现状如何？", "zh-CN"),
        ("de-DE", "Was ist Gezeitenkraft?", "de-DE"),
        ("zh-TW", "潮汐能是什麼", "zh-TW"),
        ("ja-JP", "What is tidal power?", "en-US"),
        ("hi-IN", "ज्वारीय ऊर्जा क्या है", "hi-IN"),
    ],
)
def test_the_locale_follows_the_questions_script(model, question, expected):
    arguments = json.dumps({"research_topic": question, "locale": model})
    d = coordinator.coordination(reply(calls=[("handoff_to_planner", arguments)]), question)
    assert d.locale == expected


def test_a_research_question_answered_in_prose_is_handed_off():
    question = "How does tidal stream power compare with tidal barrages?"
    d = coordinator.coordination(reply("Tidal barrages are cheaper, see https://video.example/x"), question)
    assert (d.kind, d.topic) == ("handoff", question)


@pytest.mark.parametrize("question", ["hello", "Hi there!", "thanks a lot", "who are you?", "你好", "Hola"])
def test_small_talk_is_still_answered_in_prose(question):
    d = coordinator.coordination(reply("Hello! How can I help?"), question)
    assert (d.kind, d.text) == ("answer", "Hello! How can I help?")


@pytest.mark.parametrize(
    "arguments", ['{"reply": ""}', '{"reply": "The polite refusal shown to the user, in the user\'s language."}']
)
def test_a_decline_without_a_refusal_is_not_a_refusal(arguments):
    d = coordinator.coordination(reply(calls=[("decline_request", arguments)]), "What is tidal power?")
    assert (d.kind, d.topic) == ("handoff", "What is tidal power?")


def test_coordinator_handoff_with_broken_arguments_falls_back_to_question():
    d = coordinator.coordination(reply(calls=[("handoff_to_planner", '{"locale": "xx_bad!')]), "the q")
    assert (d.kind, d.topic, d.locale) == ("handoff", "the q", None)


def test_coordinator_without_tool_answers_directly_or_asks_in_clarification_mode():
    assert coordinator.coordination(reply("Hello!"), "hi").kind == "answer"
    assert coordinator.coordination(reply("Which region?"), "hi", may_ask=True).kind == "ask"


def test_coordinator_decline():
    d = coordinator.coordination(reply(calls=[("decline_request", '{"reply": "I cannot help with that."}')]), "q")
    assert (d.kind, d.text) == ("decline", "I cannot help with that.")


def test_plan_is_repaired_validated_and_cut():
    text = """<think>hmm</think>```json
    {"title": "T", "thought": "x", "has_enough_context": false,
     "steps": [{"need_web_search": true, "title": "a", "description": "d"},
               {"need_search": false, "title": "b", "description": "d", "step_type": "Processing"},
               {"title": "c", "description": "d", "step_type": "research"},]
    ```"""
    plan = planner.parse_plan(text, max_step_num=2, locale="de-DE")
    assert plan.locale == "de-DE"
    assert [s.title for s in plan.steps] == ["a", "b"]
    assert plan.steps[0].need_search and plan.steps[0].step_type == "research"
    assert plan.steps[1].step_type == "processing"


@pytest.mark.parametrize(
    "text",
    ["I cannot make a plan.", '{"title": "T", "steps": []}', '{"steps": [{"title": "a"}]}'],
)
def test_plan_errors_name_the_problem(text):
    with pytest.raises(planner.PlanError):
        planner.parse_plan(text, 3, "en-US")


def test_plan_without_steps_is_fine_when_context_is_enough():
    plan = planner.parse_plan('{"title": "T", "has_enough_context": true}', 3, "en-US")
    assert plan.has_enough_context and plan.steps == []


def _plan(*types):
    return Plan(title="T", steps=[Step(title=str(i), step_type=t) for i, t in enumerate(types)])


def test_batches_group_research_and_isolate_processing():
    plan = _plan("research", "research", "processing", "research", "analysis", "research", "research")
    assert research_team.batches(plan, parallel=True) == [[0, 1], [2], [3], [4], [5, 6]]
    assert research_team.batches(plan, parallel=False) == [[i] for i in range(7)]


def test_batches_skip_finished_steps():
    plan = _plan("research", "research")
    plan.steps[0].execution_res = "done"
    assert research_team.batches(plan, parallel=True) == [[1]]


def test_cited_keeps_only_retrieved_sources_in_report_order():
    seen = [Citation(title="A", url="https://a.example/x"), Citation(title="B", url="https://b.example/")]
    report = "See [B](https://b.example) and [A](https://a.example/x). Also https://invented.example/y."
    assert [c.title for c in reporter.cited(report, seen)] == ["B", "A"]


def test_verify_citations_marks_urls_the_run_never_retrieved():
    seen = [Citation(title="A", url="https://a.example/x")]
    report = "See [A](https://a.example/x), [Fake](https://fake.example/y) and https://bare.example/z."
    checked = reporter.verify_citations(report, seen)
    assert "[A](https://a.example/x)" in checked
    assert "fake.example" not in checked and "bare.example" not in checked
    assert f"Fake {reporter.UNVERIFIED}" in checked and checked.endswith(f"{reporter.UNVERIFIED}.")


@pytest.mark.parametrize(
    "text, locale",
    [
        ("量子计算的现状如何", "zh-CN"),
        ("日本のロボット産業", "ja-JP"),
        ("한국 반도체", "ko-KR"),
        ("Как работает", "ru-RU"),
        ("How do batteries work?", "en-US"),
    ],
)
def test_guess_locale_from_script(text, locale):
    assert languages.guess_locale(text) == locale


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"question": ""}, "question"),
        ({"question": "q", "max_step_num": 0}, "max_step_num"),
        ({"question": "q", "report_style": "poem"}, "report_style"),
        ({"question": "q", "locale": "english!"}, "locale"),
        ({"question": "q", "max_steps": 3}, "max_steps"),
        ("just a string", "input"),
        ({"question": "x" * 100_000}, "question"),
    ],
)
def test_input_problem_names_the_field(raw, field):
    assert models.input_problem(raw).startswith(field)


def test_valid_input_has_no_problem():
    assert models.input_problem({"question": "q", "locale": "zh_CN"}) is None


def test_the_planner_always_sees_the_users_own_question():
    from workflows.state import RunState

    state = RunState(topic="Tidal barrages versus stream turbines", locale="en-US")
    planner.begin(state, "How does tidal stream power compare with tidal barrages?")
    assert "How does tidal stream power compare with tidal barrages?" in state.planner_pending[0].content


def test_the_question_is_a_plan_of_one_research_step():
    plan = planner.question_plan("How does tidal stream power\ncompare with barrages?", "en-US")
    assert [(s.step_type, s.need_search) for s in plan.steps] == [("research", True)]
    assert plan.title == "How does tidal stream power compare with barrages?"
    assert plan.steps[0].description == "How does tidal stream power\ncompare with barrages?"
