"""One chat completion, streamed: read as server-sent events while the
model writes, so a slow model that keeps writing is never cut off, and a
silent one is noticed (no token for ``idle`` seconds) rather than a long one.

Assembles what the stream carries: the content, tool calls (their names and
arguments arrive in pieces, by index), the finish reason and the usage (the
last event, when ``stream_options.include_usage`` is honoured). Reasoning
(``reasoning_content``, ``reasoning``) is read as a sign of life and
dropped. A reply that degenerates into repetition is cut off as it streams
(``Looping``). A server that answers the streaming request with one plain
JSON body (some do, and some scripted ones) is read as that.

Events are read by httpx-sse, which ends a line at CR, LF or CRLF only, as
the event-stream format says: a JSON encoder may leave U+2028, U+2029 or
U+0085 unescaped inside a string, and ``str.splitlines`` (httpx's
``aiter_lines``) would cut the event there.

What one answer may hold is bounded before the parser buffers it: one event
(or one line: a line never ends outside an event) at most
``MAX_EVENT_BYTES``, the whole answer at most ``MAX_ANSWER_BYTES``, a plain
JSON body at most ``MAX_PLAIN_BODY``; past a bound the call fails
(``TooLarge``, a broken stream) at once, holding no more than the bound. An
unterminated line once grew a worker by 839 MB in 10 s. An event over
``BIG_EVENT`` bytes is parsed and assembled in a thread (``off_loop``); the
JSON parser holds the interpreter lock while it runs, so the bound is what
keeps the event loop's pause short (a 50 MB event held it 1.4 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypeVar

import httpx
from httpx_sse import EventSource, ServerSentEvent
from openai import AsyncOpenAI

from activities.off_loop import off_loop
from activities.repetition import LoopWatch, cut_loop
from workflows.clean import split_lines

T = TypeVar("T")
MAX_PLAIN_BODY = 4_000_000  # bytes of an answer kept, to read it as one JSON body if it holds no event
MAX_EVENT_BYTES = 4_000_000  # bytes of one event (a chunk is a few hundred; a whole reply in one, tens of thousands)
MAX_ANSWER_BYTES = 64_000_000  # bytes of one answer in all (8,192 tokens of text are well under a megabyte)
BIG_EVENT = 64_000  # characters of an event parsed off the event loop
LINE_COST = 64  # bytes an event's line costs beyond its own (a Python string)


# A body that breaks off raises the errors of the HTTP library the openai
# client is built on: its own fork of httpx (httpx2) in the versions that
# have one, else httpx.
try:
    import httpx2

    HTTP_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, httpx2.HTTPError)
except ImportError:  # an openai client on httpx itself
    HTTP_ERRORS = (httpx.HTTPError,)


class Silence(Exception):
    """No token within the time allowed: ``seconds``; ``first``: no token at
    all; ``whole``: a call not streamed, whose whole answer did not come in time."""

    def __init__(self, seconds: float, first: bool, whole: bool = False) -> None:
        super().__init__(f"no token for {seconds:g} s")
        self.seconds, self.first, self.whole = seconds, first, whole


class BrokenStream(Exception):
    """The answer could not be read: cut off, malformed, or an error event."""


class TooLarge(BrokenStream):
    """One event, or the whole answer, is larger than the reader takes."""


class EmptyStream(BrokenStream):
    """The event stream ended before its first event (keep-alive comments
    aside): llama-cpp-python answers so when it fails a streamed request,
    e.g. a tool call its ``chatml-function-calling`` cannot stream
    ("Automatic streaming tool choice is not supported")."""


class ToolStreamRefused(EmptyStream):
    """A streamed request with native tool calls got an empty stream."""


class Looping(Exception):
    """The reply degenerated into repetition; ``completion`` is what was
    written, cut to one copy of the repeated unit."""

    def __init__(self, completion: Completion) -> None:
        super().__init__("the reply degenerated into repetition")
        self.completion = completion


@dataclass
class Completion:
    content: str = ""
    tool_calls: list[SimpleNamespace] = field(default_factory=list)  # .id, .function.name, .function.arguments
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    choices: int = 0  # how many choice events (or choices) the answer carried


class _Assembly:
    """The completion as its pieces arrive."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.done = Completion()
        self.watch = LoopWatch()  # the answer: content and tool-call arguments
        self.thinking = LoopWatch()  # the reasoning, which can loop as well

    @property
    def looping(self) -> bool:
        return bool(self.watch.loop or self.thinking.loop)

    def add(self, chunk: dict) -> bool:
        """Take one event's JSON; whether it carried generated text."""
        if not isinstance(chunk, dict):
            raise BrokenStream(f"unexpected event: {str(chunk)[:200]}")
        if chunk.get("error"):
            error = chunk["error"]
            raise BrokenStream(str(error.get("message") if isinstance(error, dict) else error)[:500])
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.done.prompt_tokens = _int(usage.get("prompt_tokens")) or self.done.prompt_tokens
            self.done.completion_tokens = _int(usage.get("completion_tokens")) or self.done.completion_tokens
        generated = False
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self.done.choices += 1
            delta = choice.get("delta") or choice.get("message") or {}
            if choice.get("finish_reason"):
                self.done.finish_reason = str(choice["finish_reason"])
            if isinstance(delta, dict):
                generated = self._delta(delta) or generated
        return generated

    def _delta(self, delta: dict) -> bool:
        text = delta.get("content")
        generated = False
        if isinstance(text, str) and text:
            self.content.append(text)
            self.watch.feed(text)
            generated = True
        for key in ("reasoning_content", "reasoning"):  # a sign of life, never part of the answer
            if isinstance(delta.get(key), str) and delta[key]:
                self.thinking.feed(delta[key])
                generated = True
        for position, call in enumerate(delta.get("tool_calls") or []):
            if not isinstance(call, dict):
                continue
            index = call.get("index") if isinstance(call.get("index"), int) else position
            slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
            if isinstance(call.get("id"), str) and call["id"]:
                slot["id"] = call["id"]
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            name = function.get("name")
            if isinstance(name, str) and name and name != slot["name"]:
                slot["name"] += name  # in pieces; a server that repeats the whole name sends it equal
            arguments = function.get("arguments")
            if isinstance(arguments, dict):  # some servers send an object, not a string
                arguments = json.dumps(arguments, ensure_ascii=False)
            if isinstance(arguments, str) and arguments:
                slot["arguments"] += arguments
                self.watch.feed(arguments)
            generated = True
        return generated

    def result(self) -> Completion:
        self.done.content = "".join(self.content)
        self.done.tool_calls = [
            SimpleNamespace(id=c["id"], function=SimpleNamespace(name=c["name"], arguments=c["arguments"]))
            for _, c in sorted(self.calls.items())
        ]
        return self.done

    def cut(self) -> Completion:
        """What was written up to the loop, with one copy of its unit."""
        done = self.result()
        period, run = self.watch.loop or (0, 0)  # (0, 0): only the reasoning looped
        if done.tool_calls and not done.content.endswith(self.watch.tail[-50:]):
            last = done.tool_calls[-1].function
            last.arguments = cut_loop(last.arguments, period, run)
        else:
            done.content = cut_loop(done.content, period, run)
        done.finish_reason = "repetition"
        return done


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


async def stream_completion(client: AsyncOpenAI, kwargs: dict[str, Any], first: float, idle: float) -> Completion:
    """Send ``kwargs`` (with ``stream=True``) and read the answer: at most
    ``first`` seconds for its first token, then at most ``idle`` seconds of
    silence between tokens. Raises the client's errors for an error status,
    ``Silence``, ``BrokenStream`` or ``Looping``."""
    assembly = _Assembly()
    began = time.monotonic()
    try:
        async with asyncio.timeout(first):
            response = client.chat.completions.with_streaming_response.create(**kwargs, stream=True)
            raw = await response.__aenter__()
    except TimeoutError:
        raise Silence(first, True) from None
    try:
        if "text/event-stream" not in raw.headers.get("content-type", ""):
            return await _plain_body(raw.http_response, assembly, first - (time.monotonic() - began))
        await _read_events(raw.http_response, assembly, first, idle, began)
        return assembly.result()
    except HTTP_ERRORS as err:
        if not assembly.done.choices:  # (llama-cpp-python fails a streamed request so too)
            raise EmptyStream(f"the answer broke off before its first event: {type(err).__name__}: {err}") from None
        raise BrokenStream(f"the answer was cut off: {type(err).__name__}: {err}") from None
    finally:
        with contextlib.suppress(*HTTP_ERRORS):  # closing a body that broke off can raise again
            await response.__aexit__(None, None, None)


async def whole_completion(client: AsyncOpenAI, kwargs: dict[str, Any], seconds: float) -> Completion:
    """Send ``kwargs`` without streaming and read the answer, which comes
    only once all of it is written: at most ``seconds`` in all (there is no
    silence to watch). Raises the client's errors for an error status,
    ``Silence`` (``whole``) when the time is up, or ``Looping``."""
    try:
        async with asyncio.timeout(seconds):
            response = await client.chat.completions.create(**kwargs)
    except TimeoutError:
        raise Silence(seconds, True, whole=True) from None
    assembly = _Assembly()
    _whole(response.model_dump(), assembly)
    return assembly.result()


async def _plain_body(http: httpx.Response, assembly: _Assembly, left: float) -> Completion:
    body = bytearray()
    try:
        async with asyncio.timeout(max(left, 1.0)):
            async for chunk in http.aiter_bytes():
                body += chunk
                if len(body) > MAX_PLAIN_BODY:
                    raise TooLarge(f"the answer is larger than {MAX_PLAIN_BODY:,} bytes: not read further")
    except TimeoutError:
        raise Silence(left, True) from None
    await _off_loop_if_big(_whole_body, bytes(body), assembly, size=len(body))
    return assembly.result()


def _whole_body(body: str | bytes, assembly: _Assembly) -> None:
    """Read a whole chat.completion body into ``assembly``."""
    try:
        data = json.loads(body)
    except ValueError:
        raise BrokenStream(f"the answer is not JSON: {body[:200]!r}") from None
    _whole(data, assembly)


def _whole(data: Any, assembly: _Assembly) -> None:
    assembly.add(data)
    if assembly.looping:
        raise Looping(assembly.cut())


async def _read_events(http: httpx.Response, assembly: _Assembly, first: float, idle: float, began: float) -> None:
    kept = _Kept()
    events = _events(http, kept)
    last_token, spoke = began, False
    count = 0
    try:
        while True:
            allowed = idle if spoke else first
            try:
                async with asyncio.timeout(max(last_token + allowed - time.monotonic(), 0.01)):
                    event = await anext(events)
            except TimeoutError:
                raise Silence(allowed, not spoke) from None
            except StopAsyncIteration:  # ended without [DONE]: complete only if it said how it finished
                if (
                    not count
                    and (body := await _off_loop_if_big(_without_comments, kept.text(), size=kept.size)).strip()
                ):
                    await _off_loop_if_big(_whole_body, body, assembly, size=len(body))
                elif not count:
                    raise EmptyStream("the answer ended before its first event") from None
                elif assembly.done.finish_reason is None:
                    raise BrokenStream("the answer was cut off before its end") from None
                return
            if not event.data:  # an event without data: nothing of the answer
                continue
            count += 1
            data = event.data.strip()
            if data == "[DONE]":
                return
            if await _off_loop_if_big(_take_event, data, assembly, size=len(data)):
                last_token, spoke = time.monotonic(), True
            if assembly.looping:
                raise Looping(assembly.cut())
    finally:
        await events.aclose()


def _take_event(data: str, assembly: _Assembly) -> bool:
    """One event's JSON into ``assembly``; whether it carried generated text."""
    try:
        chunk = json.loads(data)
    except ValueError:
        raise BrokenStream(f"an event is not JSON: {data[:200]!r}") from None
    return assembly.add(chunk)


async def _off_loop_if_big(fn: Callable[..., T], *args: Any, size: int) -> T:
    """``fn(*args)``: on the event loop when ``size`` is small, else in a
    thread of the model replies' own (``off_loop``)."""
    return fn(*args) if size <= BIG_EVENT else await off_loop(fn, *args)


def _without_comments(text: str) -> str:
    """``text`` without event-stream comment lines (``: ping``, a keep-alive)."""
    return "\n".join(line for line in split_lines(text) if not line.startswith(":"))


class _Kept:
    """The body on its way to the event parser, measured: no event (bytes
    between two blank lines) over ``MAX_EVENT_BYTES``, no answer over
    ``MAX_ANSWER_BYTES``, or ``TooLarge`` before the parser buffers it. Its
    first ``MAX_PLAIN_BODY`` bytes are kept: a server that sends one JSON
    body as an event stream (no ``data:`` field in it) is read from them."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.event = 0  # bytes since the last blank line
        self.last = b""  # the byte before this chunk (a blank line can span two chunks)

    async def passing(self, http: httpx.Response) -> AsyncIterator[bytes]:
        async for chunk in http.aiter_bytes():
            self.measure(chunk)
            if self.size < MAX_PLAIN_BODY:
                self.parts.append(chunk)
            self.size += len(chunk)
            yield chunk

    def measure(self, chunk: bytes) -> None:
        """Count ``chunk`` in the event it belongs to: its bytes, and
        ``LINE_COST`` for each line end (the parser keeps each line of an
        event as a string of its own). A blank line, where an event ends, is
        two line ends in a row (CR, LF or CRLF): LF LF, CR CR or LF CR."""
        if not chunk:
            return
        size, joined = len(chunk), self.last + chunk
        end = max(joined.rfind(b"\n\n"), joined.rfind(b"\r\r"), joined.rfind(b"\n\r"))
        if end >= 0:
            self.event = 0
            chunk = joined[end + 2 :]
        self.event += len(chunk) + LINE_COST * (chunk.count(b"\n") + chunk.count(b"\r"))
        self.last = joined[-1:]
        if self.event > MAX_EVENT_BYTES:
            raise TooLarge(f"an event of the answer is larger than {MAX_EVENT_BYTES:,} bytes: not read further")
        if self.size + size > MAX_ANSWER_BYTES:
            raise TooLarge(f"the answer is larger than {MAX_ANSWER_BYTES:,} bytes: not read further")

    def text(self) -> str:
        return b"".join(self.parts).decode("utf-8", "replace")


async def _events(http: httpx.Response, kept: _Kept) -> AsyncIterator[ServerSentEvent]:
    """The body's server-sent events, read by httpx-sse: its lines end at CR,
    LF or CRLF only, as the format says. (httpx's ``aiter_lines`` ends them
    wherever ``str.splitlines`` does, at U+2028, U+2029, U+0085 and other
    characters a JSON encoder may leave unescaped inside a string.)"""
    body = httpx.Response(200, headers={"content-type": "text/event-stream; charset=utf-8"}, content=kept.passing(http))
    async for event in EventSource(body).aiter_sse():
        yield event
