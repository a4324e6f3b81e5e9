"""Fitting requests into a context window keeps the task and the newest turns."""

from activities import context


def convo(turns: int, page_chars: int) -> list[dict]:
    messages = [{"role": "system", "content": "You are the researcher."}, {"role": "user", "content": "TASK"}]
    for n in range(turns):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "crawl", "arguments": f'{{"url": "u{n}"}}'}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"PAGE{n} " + "x" * page_chars})
    return messages


def test_small_requests_are_untouched():
    messages = convo(2, 100)
    assert context.fit(messages, 10_000) is messages


def test_large_requests_fit_and_keep_system_task_and_newest_turn():
    messages = convo(20, 60_000)
    fitted = context.fit(messages, 8_000)
    assert context.total_tokens(fitted) <= 8_000
    assert fitted[0]["content"] == "You are the researcher."
    assert fitted[1]["content"].startswith("TASK")
    assert "PAGE19" in fitted[-1]["content"]


def test_older_turns_keep_what_the_model_wrote_and_lose_their_tool_outputs_first():
    messages = convo(20, 60_000)
    for n, message in enumerate(messages):
        if message["role"] == "assistant":
            message["content"] = f"Note {n}: the keeper logged {n * 7} ships."
    fitted = context.fit(messages, 8_000)
    notes = [m["content"] for m in fitted if m["role"] == "assistant"]
    assert len(notes) == 20 and all(note.startswith("Note ") for note in notes)  # every note kept
    tool_outputs = [m["content"] for m in fitted if m["role"] == "tool"]
    shown = [n for n, text in enumerate(tool_outputs) if text != context.OMITTED]
    assert shown == list(range(20 - len(shown), 20)) and 1 <= len(shown) < 5  # the newest outputs, in full
    assert "PAGE19" in tool_outputs[-1]


def test_turns_that_do_not_fit_even_without_their_outputs_are_dropped_with_a_note():
    fitted = context.fit(convo(400, 1_000), 8_000)
    assert context.total_tokens(fitted) <= 8_000
    assert "earlier turn(s) were dropped" in fitted[1]["content"]
    assert "PAGE399" in fitted[-1]["content"]


def test_no_tool_result_is_left_without_its_call():
    fitted = context.fit(convo(30, 5_000), 6_000)
    ids_called = {c["id"] for m in fitted for c in m.get("tool_calls") or []}
    assert all(m["tool_call_id"] in ids_called for m in fitted if m["role"] == "tool")


def test_a_huge_task_is_trimmed_too():
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "y" * 200_000}]
    fitted = context.fit(messages, 4_000)
    assert context.total_tokens(fitted) <= 4_000
    assert fitted[1]["content"].startswith("yyy")
