"""The pure decisions of steering (workflows/steer_models.py and
``steering.not_started``), without Temporal: what a steer may be, when a run
takes one, where it applies, what the report's closing note says."""

from __future__ import annotations

import pytest

from workflows.evidence_models import EvidencePage
from workflows.languages import asked_language
from workflows.models import Plan, Step
from workflows.steer_models import (
    MAX_NOTE_CHARS,
    MAX_STEERS,
    SteerProblem,
    SteerRecord,
    applies_at,
    closing_note,
    read_steer,
    same_steps,
    steer_problem,
)
from workflows.steering import not_started


def test_a_steer_is_a_note_with_pages_and_unknown_fields_are_ignored():
    steer = read_steer({"note": "  only EU sources ", "urls": [" https://a.eu/x ", "https://a.eu/x"], "user": "ann"})
    assert steer.note == "only EU sources" and steer.urls == ["https://a.eu/x"]  # trimmed, each page once
    assert read_steer("a bare note").note == "a bare note"  # `temporal workflow update --input '"…"'`


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ({"note": " \n "}, "the note is empty"),
        ({"note": "x" * (MAX_NOTE_CHARS + 1)}, f"at most {MAX_NOTE_CHARS:,}"),
        ({"note": "ok", "urls": ["file:///etc/passwd"]}, "not a web address"),
        ({"note": "ok", "urls": ["https://a b"]}, "not a web address"),
        ({"note": "ok", "urls": [f"https://a/{n}" for n in range(6)]}, "at most 5 pages"),
        ({"note": "ok", "urls": "https://a"}, "urls"),
        ({"urls": []}, "note"),
        (["note"], "a steer is"),
        (None, "a steer is"),
    ],
)
def test_bad_steers_are_refused_with_one_line(raw, said):
    with pytest.raises(SteerProblem) as refused:
        read_steer(raw)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_run_takes_steers_until_it_ends_but_not_while_its_plan_waits_for_review():
    for phase in ("coordinating", "planning", "researching", "reporting"):
        assert steer_problem(phase, 0, "run-1") is None
    assert "deepresearch ask run-1" in steer_problem("completed", 0, "run-1")
    assert "deepresearch ask run-1" in steer_problem("cancelled", 0, "run-1")
    assert 'deepresearch review run-1 --edit "your note"' in steer_problem("awaiting_review", 0, "run-1")
    assert str(MAX_STEERS) in steer_problem("researching", MAX_STEERS, "run-1")


def test_where_a_steer_applies_follows_the_phase():
    assert applies_at("planning", False)[0] == "plan"
    assert applies_at("clarifying", False)[0] == "plan"
    assert applies_at("researching", True)[0] == "next_turn"
    assert applies_at("researching", False)[0] == "steps"
    assert applies_at("reporting", False)[0] == "report"


def _plan(*done: bool) -> Plan:
    return Plan(
        title="t", steps=[Step(title=f"s{n}", execution_res="found" if d else None) for n, d in enumerate(done)]
    )


def test_only_the_plans_last_steps_not_started_are_revised():
    assert not_started(_plan(True, False, False), {}) == [1, 2]
    assert not_started(_plan(False, False), {0: object()}) == [1]  # step 0 paused mid-way: it has started
    assert not_started(_plan(True, True), {}) == []
    assert not_started(_plan(False, True), {}) == []  # not the last: left alone


def test_a_revision_that_changes_nothing_a_step_does_is_no_change():
    old = [Step(title="Prices", description="Find prices", step_type="research")]
    assert same_steps(old, [Step(title=" Prices ", description="Find prices", step_type="research")])
    assert not same_steps(old, [Step(title="Prices", description="Find EU prices", step_type="research")])
    assert not same_steps(old, old + old)


def test_the_closing_note_names_each_steer_when_and_where():
    page = EvidencePage(url="https://a.eu/register", title="Register", blob="sha256:" + "0" * 64)
    steers = [
        SteerRecord(
            note="only  EU\nsources",
            received_at="2026-05-01T10:02:03+00:00",
            applied_at="2026-05-01T10:02:05+00:00",
            applied_where="researcher · step 1, turn 3",
            pages=[page],
            unread=["https://b.example/: the address is private"],
        ),
        SteerRecord(note="late", received_at="2026-05-01T10:09:00+00:00"),
    ]
    note = closing_note(steers)
    assert note.startswith("## Guidance received during the research\n")
    assert "1. “only EU sources” (received 2026-05-01 10:02:03 UTC; applied: researcher · step 1, turn 3)" in note
    assert "Pages read: https://a.eu/register." in note and "Not read: https://b.example/" in note
    assert "2. “late” (received 2026-05-01 10:09:00 UTC; not applied)" in note
    assert closing_note([]) == ""


@pytest.mark.parametrize(
    ("note", "tag"),
    [
        ("write it in German", "de"),
        ("请用中文写报告", "zh"),
        ("Please write the report in Chinese", "zh"),
        ("Schreib den Bericht auf Deutsch", "de"),
        ("also compare prices", None),
        ("ignore the German guide of 2017", None),  # names a language, asks for none
    ],
)
def test_a_note_asking_for_a_language_names_it(note: str, tag: str | None):
    assert asked_language(note) == tag
