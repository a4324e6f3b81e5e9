"""A scripted OpenAI-compatible chat-completions server on loopback.

    with ScriptedLLM(lambda req: Reply(tool_calls=[("web_search", {"query": "x"})])) as llm:
        AsyncOpenAI(base_url=llm.base_url, api_key="test-openai-key")...

The handler gets the parsed request JSON and returns a ``Reply``, a plain
string (the reply's content) or a dict (sent verbatim as the response body;
as a single SSE event when the request streams).

A streaming request (``stream: true``) is answered with server-sent events,
the content in small pieces: ``Reply.token_delay`` between pieces (a slow
model), ``Reply.stall`` (a silence mid-answer), ``Reply.reasoning`` (sent as
``reasoning_content``). Server switches mimic what real servers do:
``plain_json_streams`` (a JSON body even when asked to stream),
``reject_stream_options``, ``want_max_completion_tokens`` (OpenAI's reasoning
models) and ``enforce_max_tokens`` (cut the reply at the request's bound,
``finish_reason: "length"``), ``unescaped_events`` (events whose JSON
holds non-ASCII characters raw, U+2028 and U+0085 among them, as the demo
model and many JSON encoders write them), ``empty_failed_streams`` (a
streamed request the server fails gets an empty event stream, the error only
in the server's log, as llama-cpp-python answers a tool call its
``chatml-function-calling`` cannot stream, "Automatic streaming tool choice
is not supported", or a prompt over its ``context_window``) and ``serial`` (one request at a
time, as llama-cpp-python serves them: an answer not streamed is written to
its end even when the client has left, and ``GET /v1/models`` is answered
only once the server is free). ``streams_cut`` counts the streams the client
hung up on before their end.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from testkit.http_base import HANG_UP, Response, ScriptedServer, json_response
from testkit.tokenizers import faithful_count

ROLES = (
    "coordinator", "planner", "researcher", "coder", "analyst", "reporter", "editor", "podcast", "slides", "prose",
    "followup", "judge",
)  # fmt: skip

# What llama-cpp-python sends for a streamed request it fails: no event, and
# the connection closed after it, unannounced.
_EMPTY_STREAM = Response(200, b"", {"Content-Type": "text/event-stream; charset=utf-8", HANG_UP: "1"})
_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    429: ("requests", "rate_limit_exceeded"),
}


@dataclass
class Reply:
    content: str = ""
    # (function name, arguments); arguments given as a str are sent verbatim
    tool_calls: list[tuple[str, dict | str]] = field(default_factory=list)
    status: int = 200  # >= 400 without body: an OpenAI error whose message is content
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: str | None = None  # sent verbatim instead of a chat.completion (SSE text if streaming)
    token_delay: float = 0.0  # seconds between streamed pieces
    stall: tuple[int, float] | None = None  # (after this many pieces, this many seconds of silence)
    reasoning: str = ""  # the model's reasoning, sent as reasoning_content


Handler = Callable[[dict], "Reply | dict | str"]


class ScriptedLLM(ScriptedServer):
    path = "/v1/chat/completions"

    def __init__(self, handler: Handler | None = None, api_key: str = "test-openai-key") -> None:
        super().__init__(api_key)
        self.handler: Handler = handler or (lambda request: Reply("ok"))
        self._ids = itertools.count(1)
        # Reject conversations a real provider rejects (a tool call without
        # its answer, an answer without its call), as OpenAI does with a 400.
        self.strict_conversation = True
        # When set: reject any request whose prompt is larger (counted by
        # ``prompt_tokens``), as a provider rejects what exceeds its window.
        self.context_window: int | None = None
        self.largest_prompt = 0  # the largest prompt received, in tokens
        self.tokens_received = 0  # all prompts received, in tokens
        self.rejected: list[tuple[str, int]] = []  # (role, tokens) of requests over the window
        self.plain_json_streams = False
        self.reject_stream_options = False
        self.want_max_completion_tokens = False
        self.enforce_max_tokens = False
        self.unescaped_events = False
        self.empty_failed_streams = False
        self.serial = False
        self._turn = threading.Lock()  # held while a serial server writes an answer
        self.streams_cut = 0  # streams the client closed before their end

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def calls(self, role: str | None = None) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if role is None or r["_role"] == role]

    def _record(self, body: dict) -> dict:
        return {**body, "_role": role_of(body)}

    def _error(self, status: int, message: str, headers: dict[str, str]) -> Response:
        kind, code = _ERROR_TYPES.get(status, ("server_error", None))
        error = {"message": message, "type": kind, "param": None, "code": code}
        return json_response(status, {"error": error}, headers)

    def _respond(self, path: str, headers, raw: bytes, method: str = "POST") -> Response:
        if self.serial and method == "GET" and path.split("?")[0] == "/v1/models":
            with self._turn:  # llama-cpp-python answers it only between two generations
                return json_response(200, {"object": "list", "data": [{"id": "scripted-model", "object": "model"}]})
        return super()._respond(path, headers, raw, method)

    def _reply(self, request: dict) -> Response:
        if not self.serial:
            return self._answer(request)
        self._turn.acquire()
        try:
            response = self._answer(request)
        except BaseException:
            self._turn.release()
            raise
        if isinstance(response.body, bytes):
            self._turn.release()
            return response
        return Response(response.status, _released(response.body, self._turn), response.headers)

    def _answer(self, request: dict) -> Response:
        if self.strict_conversation and (problem := conversation_problem(request.get("messages") or [])):
            return self._error(400, problem, {})
        size = prompt_tokens(request)
        with self._lock:
            self.largest_prompt = max(self.largest_prompt, size)
            self.tokens_received += size
        if self.context_window and size > self.context_window:
            with self._lock:
                self.rejected.append((role_of(request), size))
            if request.get("stream") and self.empty_failed_streams:
                return _EMPTY_STREAM
            return json_response(
                400,
                {
                    "error": {
                        "message": f"This model's maximum context length is {self.context_window} tokens. "
                        f"However, your messages resulted in {size} tokens. Please reduce the length of the messages.",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": "context_length_exceeded",
                    }
                },
            )
        if problem := self._parameter_problem(request):
            return self._error(400, problem, {})
        reply = self.handler(request)
        if isinstance(reply, str):
            reply = Reply(reply)
        stream = bool(request.get("stream")) and not self.plain_json_streams
        if stream and self.empty_failed_streams and isinstance(reply, Reply) and reply.tool_calls:
            if request.get("tools") and request.get("tool_choice", "auto") == "auto":
                return _EMPTY_STREAM
        if isinstance(reply, dict):
            raw = json.dumps(reply)
            reply = Reply(body=f"data: {raw}\n\ndata: [DONE]\n\n" if stream else raw)
        time.sleep(reply.delay)
        if reply.status >= 400 and reply.body is None:
            message = reply.content or f"scripted error ({reply.status})"
            return self._error(reply.status, message, reply.headers)
        if reply.body is not None:
            return self._response(reply, stream, reply.body.encode())
        completion = self._completion(request, reply)
        if stream:
            events = _sse(completion, request, reply, ascii=not self.unescaped_events)
            return self._response(reply, True, self._counted(events))
        # Not streamed: the answer comes once the whole of it is written.
        pieces = len(list(_sse(completion, request, Reply())))
        time.sleep(reply.token_delay * pieces + (reply.stall[1] if reply.stall else 0.0))
        return self._response(reply, False, json.dumps(completion).encode())

    def _parameter_problem(self, request: dict) -> str | None:
        """A 400 message for a parameter this server does not take, as real ones word it."""
        if self.reject_stream_options and "stream_options" in request:
            return "Unrecognized request argument supplied: stream_options"
        if self.want_max_completion_tokens and "max_tokens" in request:
            return (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead."
            )
        return None

    def _counted(self, events: Iterator[bytes]) -> Iterator[bytes]:
        finished = False
        try:
            yield from events
            finished = True
        finally:
            if not finished:
                with self._lock:
                    self.streams_cut += 1

    def _response(self, reply: Reply, stream: bool, body) -> Response:
        content_type = "text/event-stream" if stream and reply.status == 200 else "application/json"
        return Response(reply.status, body, {"Content-Type": content_type, **reply.headers})

    def _completion(self, request: dict, reply: Reply) -> dict:
        tool_calls = [
            {
                "id": f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for name, args in reply.tool_calls
        ]
        content, finish = reply.content, "tool_calls" if tool_calls else "stop"
        bound = request.get("max_tokens") or request.get("max_completion_tokens")
        if self.enforce_max_tokens and isinstance(bound, int) and len(content) > bound * 4:
            content, finish = content[: bound * 4], "length"  # about 4 characters a token
        message: dict = {"role": "assistant", "content": content or (None if tool_calls else "")}
        if tool_calls:
            message["tool_calls"] = tool_calls
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        generated = content + "".join(c["function"]["arguments"] for c in tool_calls)
        prompt_tokens = len(json.dumps(request.get("messages", []))) // 4
        completion_tokens = len(generated) // 4 + 1
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "scripted-model"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _released(body: Iterable[bytes], lock: threading.Lock) -> Iterator[bytes]:
    """``body``, and ``lock`` released once it is sent (or given up)."""
    try:
        yield from body
    finally:
        lock.release()


def _sse(completion: dict, request: dict, reply: Reply, ascii: bool = True) -> Iterator[bytes]:
    """The completion as chat.completion.chunk events, content in small
    pieces, tool calls in two (name, then arguments), paced as ``reply`` says;
    ``ascii``: non-ASCII characters escaped in the JSON (else raw UTF-8)."""
    message, choice = completion["choices"][0]["message"], completion["choices"][0]
    head = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def event(delta: dict, finish_reason: str | None = None, **extra) -> bytes:
        chunk = head | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]} | extra
        return f"data: {json.dumps(chunk, ensure_ascii=ascii)}\n\n".encode()

    def pieces() -> Iterator[bytes]:
        yield event({"role": "assistant", "content": ""})
        reasoning = message.get("reasoning_content") or ""
        for start in range(0, len(reasoning), 16):
            yield event({"reasoning_content": reasoning[start : start + 16]})
        content = message["content"] or ""
        for start in range(0, len(content), 16):
            yield event({"content": content[start : start + 16]})
        for index, call in enumerate(message.get("tool_calls", [])):
            function = call["function"]
            yield event(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": function["name"], "arguments": ""},
                        }
                    ]
                }
            )
            yield event({"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]})
        yield event({}, choice["finish_reason"])

    for n, piece in enumerate(pieces()):
        if reply.stall and n == reply.stall[0]:
            time.sleep(reply.stall[1])
        elif n and reply.token_delay:
            time.sleep(reply.token_delay)
        yield piece
    if (request.get("stream_options") or {}).get("include_usage"):
        yield (f"data: {json.dumps(head | {'choices': [], 'usage': completion['usage']})}\n\n").encode()
    yield b"data: [DONE]\n\n"


def prompt_tokens(request: dict) -> int:
    """The request's prompt in tokens as a provider counts it: messages, tool
    calls and tool schemas by the least economical of the real tokenizers
    (``testkit.tokenizers``), and 4 tokens per message for the chat template."""
    total = 0
    for message in request.get("messages") or []:
        text = _text(message.get("content"))
        for call in message.get("tool_calls") or []:
            text += call["function"]["name"] + (call["function"].get("arguments") or "")
        total += faithful_count(text) + 4
    return total + faithful_count(json.dumps(request.get("tools") or [], ensure_ascii=False))


def conversation_problem(messages: list[dict]) -> str | None:
    """Why a provider would reject this conversation's tool calls, or None:
    every tool call is answered exactly once, right after its message, and
    every tool message answers a call."""
    open_ids: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_ids:
                return f"Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id {call_id!r})"
            open_ids.remove(call_id)
            continue
        if open_ids:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(open_ids)}"
            )
        if role == "assistant":
            ids = [c.get("id") for c in message.get("tool_calls") or []]
            if len(set(ids)) != len(ids) or not all(isinstance(i, str) and i for i in ids):
                return "Invalid 'messages': tool call ids must be unique non-empty strings"
            open_ids = list(ids)
    if open_ids:
        return f"The following tool_call_ids did not have response messages: {', '.join(open_ids)}"
    return None


# -- helpers for writing scripts ------------------------------------------------


def _text(content: object) -> str:
    """A message's content as text (it may be a list of content parts)."""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def role_of(request: dict) -> str:
    """The agent role named on the first line of the first system message."""
    system = next((m for m in request.get("messages", []) if m.get("role") == "system"), None)
    first_line = (_text(system["content"]) if system else "").split("\n", 1)[0].lower()
    return next((w for w in re.findall(r"[a-z]+", first_line) if w in ROLES), "unknown")


def last_user(request: dict) -> str:
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    return _text(users[-1]["content"]) if users else ""


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request.get("messages", []) if m.get("role") == "tool"]


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def has_tool_result(request: dict, tool_name: str) -> bool:
    """Whether an assistant message earlier in the conversation called ``tool_name``."""
    return any(
        call["function"]["name"] == tool_name
        for m in request.get("messages", [])
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
    )


def all_text(request: dict) -> str:
    return "\n".join(_text(m.get("content")) for m in request.get("messages", []))
