"""Each passage reaches the model once per step (activities/seen.py,
activities/reading.py, activities/shown.py): a page the step's evidence
already quoted, crawled again, answers with what is new or a short note;
evidence that comes after the model read its page brings only the rest.
Pure functions and the model activity's request, no server."""

from __future__ import annotations

import json

from activities import reading, shown
from activities.evidence import Source, render
from activities.seen import Seen
from workflows.models import Message, ToolCall

FACT = "The Lantern Rock keeper logged 4417 ships in the year 1911, more than ever before."
OTHER = "The lamp was first lit in 1852 by the harbour board, with oil brought from the mainland."
MORE = "Storms closed the landing stage for eleven weeks in the winter of 1907, the longest on record."
URL = "http://example.org/lighthouse"
PAGE = f"# Lantern Rock history\n\n{OTHER}\n\n{FACT}\n\n{MORE}"
LONG = "\n\n".join(f"Paragraph {i}: the tide ran over the granite ledges past the quay again." for i in range(3000))
LONG += f"\n\n{FACT}"


def evidence(*passages: str) -> str:
    source = Source("Lantern Rock history", URL, "")
    return "# Evidence gathered for this step\n\n" + "\n\n".join(render(source, p) for p in passages)


def test_a_passage_shown_with_its_link_is_known_in_the_page_it_came_from():
    seen = Seen()
    seen.add(evidence(FACT))
    assert seen.holds(FACT) and not seen.holds(OTHER)
    assert not seen.holds("Short line.")  # too short to be known by: never taken for shown


def test_a_short_page_crawled_again_shows_only_what_the_evidence_did_not():
    seen = Seen()
    seen.add(evidence(FACT))
    shown_again = reading.view(PAGE, 3000, source=URL, seen=seen)
    assert FACT not in shown_again and OTHER in shown_again and MORE in shown_again
    assert "1 passage(s) of http://example.org/lighthouse already shown above are left out" in shown_again
    seen.add(evidence(OTHER, MORE))
    assert "already shown above" in reading.view(PAGE, 3000, source=URL, seen=seen)
    assert reading.view(PAGE, 3000, source=URL, seen=Seen()) == PAGE  # nothing seen: the page as it is


def test_a_long_page_read_already_answers_with_a_note_and_how_to_read_on():
    seen = Seen()
    seen.add(evidence(FACT))
    note = reading.view(LONG, 1000, source=URL, seen=seen, hints="How many ships did the keeper log")
    assert note.startswith(f"[This page of {URL} was read already") and FACT not in note
    assert f'read_page(url="{URL}", part=N)' in note and "find_in_page(" in note
    assert len(note) < len(reading.view(LONG, 1000, source=URL, hints="How many ships")) / 3


def test_evidence_that_comes_after_the_page_brings_only_the_rest():
    seen = Seen()
    seen.add(PAGE)
    later = reading.excerpt(
        evidence(FACT, "A passage the page never had, long enough to be known by its words."), 3000, "", seen
    )
    assert FACT not in later and "never had" in later and "1 passage(s) already shown above are left out" in later


def test_the_request_sends_each_passage_once_unless_the_window_makes_it_cut_the_conversation():
    blobs = {"ev": evidence(OTHER, FACT), "page": PAGE}
    call = ToolCall(id="c1", name="crawl", arguments=json.dumps({"url": URL}))
    conversation = [
        Message(role="user", content="# Your step\nHow many ships?\n\n", blob="ev", budget=3000),
        Message(role="assistant", content="", tool_calls=[call]),
        Message(
            role="tool", tool_call_id="c1", content=f"# Lantern Rock history\nURL: {URL}\n", blob="page", source=URL
        ),
    ]
    sent = shown.messages(conversation, blobs, 3000, 20_000)
    assert sum(m["content"].count(FACT) for m in sent) == 1 and MORE in sent[2]["content"]
    tight = shown.messages(conversation, blobs, 3000, 150)  # does not fit anyway: every message shows its own
    assert FACT in tight[2]["content"]
