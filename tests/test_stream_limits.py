"""What one streamed answer may hold (issue 36 item 5): an unterminated line
grew a worker by 839 MB in 10 s, and a 50 MB event held the event loop
1.4 s and added 204 MB. The stream reader (activities/llm_stream.py) against
the scripted model server over real HTTP, its memory measured with
tracemalloc (the server's thread is measured too: it sends in small chunks)."""

from __future__ import annotations

import json
import threading
import tracemalloc
from collections.abc import Iterator

import pytest
from openai import AsyncOpenAI

from activities import llm_stream
from activities.llm_stream import MAX_EVENT_BYTES, MAX_PLAIN_BODY, TooLarge, stream_completion
from testkit.faults import RawLLM
from testkit.http_base import Response

SENT = 40_000_000  # bytes a hostile server sends: ten times the bound
EVENTS = {"Content-Type": "text/event-stream; charset=utf-8"}


@pytest.fixture
def llm():
    with RawLLM() as server:
        yield server


def chunks(head: bytes, filler: bytes, total: int, tail: bytes = b"") -> Iterator[bytes]:
    """``head``, then ``filler`` repeated up to ``total`` bytes in 64 KB writes, then ``tail``."""
    yield head
    piece = filler * max(65_536 // len(filler), 1)
    for _ in range(total // len(piece)):
        yield piece
    yield tail


async def read(llm: RawLLM, response: Response) -> llm_stream.Completion:
    llm.raw_next("reporter", response)
    client = AsyncOpenAI(base_url=llm.base_url, api_key="test-openai-key", max_retries=0)
    request = {"model": "m", "messages": [{"role": "system", "content": "You are the reporter."}]}
    try:
        return await stream_completion(client, request, first=60, idle=60)
    finally:
        await client.close()


async def peak_of(llm: RawLLM, response: Response) -> tuple[BaseException | None, int]:
    """What reading ``response`` raised, and the most memory it held at once
    (after a first answer, so that what the client imports on first use is
    not counted)."""
    await read(llm, Response(200, [b'data: {"choices": [{"index": 0, "finish_reason": "stop"}]}\n\n'], EVENTS))
    tracemalloc.start()
    try:
        await read(llm, response)
        raised = None
    except Exception as err:  # noqa: BLE001 - the test looks at it
        raised = err
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return raised, peak


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(chunks(b"data: ", b"x", SENT), id="an unterminated line"),
        pytest.param(chunks(b"", b"data: xxxxxxxxxx\n", SENT), id="an event of many lines"),
        pytest.param(
            chunks(b'data: {"choices": [{"index": 0, "delta": {"content": "', b"y", SENT, b'"}}]}\n\n'),
            id="one huge event",
        ),
    ],
)
async def test_36_an_event_over_the_bound_fails_the_call_holding_no_more_than_the_bound(llm, body):
    raised, peak = await peak_of(llm, Response(200, body, EVENTS))
    assert isinstance(raised, TooLarge), raised
    assert str(raised) == f"an event of the answer is larger than {MAX_EVENT_BYTES:,} bytes: not read further"
    assert peak < 4 * MAX_EVENT_BYTES, f"{peak:,} bytes held at once"  # not the 40 MB sent


async def test_36_a_plain_answer_over_the_bound_fails_the_call_holding_no_more_than_the_bound(llm):
    body = chunks(b'{"choices": [{"index": 0, "message": {"content": "', b"z", SENT, b'"}}]}')
    raised, peak = await peak_of(llm, Response(200, body, {"Content-Type": "application/json"}))
    assert isinstance(raised, TooLarge), raised
    assert str(raised) == f"the answer is larger than {MAX_PLAIN_BODY:,} bytes: not read further"
    assert peak < 4 * MAX_PLAIN_BODY, f"{peak:,} bytes held at once"


async def test_36_a_big_event_within_the_bound_is_read_off_the_event_loop(llm, monkeypatch):
    """A 1 MB event (a whole reply in one, as some servers send) is read,
    in a thread of the model replies' own; the small ones stay on the loop."""
    threads: list[tuple[str, int]] = []
    add = llm_stream._Assembly.add

    def recorded(self: llm_stream._Assembly, chunk: dict) -> bool:
        threads.append((threading.current_thread().name, len(json.dumps(chunk))))
        return add(self, chunk)

    monkeypatch.setattr(llm_stream._Assembly, "add", recorded)
    text = " ".join(f"In {1000 + n} the keeper logged {n * 7919 % 10007} ships." for n in range(25_000))
    events = [{"choices": [{"index": 0, "delta": {"content": part}}]} for part in ("Short. ", text)]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    done = await read(llm, Response(200, [body], EVENTS))
    assert done.content == "Short. " + text and done.finish_reason == "stop"
    big = [name for name, size in threads if size > llm_stream.BIG_EVENT]
    small = [name for name, size in threads if size < 1_000]
    assert big and all(name.startswith("model-reply") for name in big), threads
    assert small and all(name == threading.main_thread().name for name in small), threads
