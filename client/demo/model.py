"""The scripted demo model: an OpenAI-compatible chat-completions server on
loopback that plays every role of a research run by simple, deterministic
rules over what the real activities send it. No language model, no network.

    with DemoModel() as model:
        AsyncOpenAI(base_url=model.base_url, api_key="demo")  # .../v1

- coordinator: hands the user's question to the planner (greets back a greeting);
- planner: a JSON plan with one research step (two for a two-part question) and a
  processing step when the question asks for a computation;
- researcher: ``local_search`` first when it may, then ``web_search`` on the
  step, ``crawl`` on the top results, ``find_in_page`` on a long page; then
  extractive findings (the sentences and tables of what it read that share the
  most words with the question), with their URLs as references;
- coder: a small Python program computing what the question asks from the
  tables in the findings (growth between two years, an average), else listing
  the figures;
- reporter and the others: a markdown report built from the findings it is given.

It is corpus-agnostic: nothing in it knows the built-in suite. Rules live in
``client/demo/roles.py``; this module is the HTTP side (plain JSON and
``stream: true`` server-sent events, with ``usage``).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler

from client.demo.roles import Turn, play
from client.loopback import LoopbackServer

MODEL_NAME = "demo-scripted"
MAX_BODY = 50_000_000


class DemoModel(LoopbackServer):
    """The server; a context manager (also ``start()``/``stop()``)."""

    name = "demo model"

    def __init__(self, port: int = 0, pace: float = 0.0) -> None:
        super().__init__(port)
        self.pace = pace  # seconds each agent turn takes (`demo --pace`: time to steer the run)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}  # role -> number of requests answered

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    def complete(self, request: dict) -> dict:
        """A ``chat.completion`` answering ``request``."""
        turn = play(request)
        if self.pace and turn.role in ("researcher", "coder"):
            time.sleep(self.pace)  # a handler thread of its own: other requests go on
        with self._lock:
            self.calls[turn.role] = self.calls.get(turn.role, 0) + 1
            number = next(self._ids)
        return completion(request, turn, number)


def completion(request: dict, turn: Turn, number: int) -> dict:
    tool_calls = [
        {
            "id": f"call_demo_{number}_{index}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
        }
        for index, (name, arguments) in enumerate(turn.tool_calls)
    ]
    message: dict = {"role": "assistant", "content": turn.content if not tool_calls else (turn.content or None)}
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt = sum(len(str(m.get("content") or "")) for m in request.get("messages") or []) // 4 + 1
    generated = len(turn.content or "") // 4 + sum(len(c["function"]["arguments"]) for c in tool_calls) // 4 + 1
    return {
        "id": f"chatcmpl-demo-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(request.get("model") or MODEL_NAME),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated},
    }


def sse_events(done: dict, include_usage: bool) -> list[bytes]:
    """The completion as ``chat.completion.chunk`` events."""
    head = {k: done[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = done["choices"][0]
    message = choice["message"]

    def event(delta: dict, finish: str | None = None) -> bytes:
        chunk = head | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()

    events = [event({"role": "assistant", "content": ""})]
    content = message.get("content") or ""
    events += [event({"content": content[i : i + 200]}) for i in range(0, len(content), 200)]
    for index, call in enumerate(message.get("tool_calls") or []):
        events.append(event({"tool_calls": [{"index": index, **call}]}))
    events.append(event({}, choice["finish_reason"]))
    if include_usage:
        usage = head | {"choices": [], "usage": done["usage"]}
        events.append(f"data: {json.dumps(usage)}\n\n".encode())
    events.append(b"data: [DONE]\n\n")
    return events


def _handler(model: DemoModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, obj: object) -> None:
            body = json.dumps(obj, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": {"message": message, "type": "invalid_request_error", "code": None}})

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "owned_by": "demo"}]})
            else:
                self._error(404, "not found")

        def do_POST(self) -> None:
            if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
                self._error(404, "not found")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._error(413, "request too large")
                return
            try:
                request = json.loads(self.rfile.read(length))
                if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                    raise ValueError("messages missing")
            except ValueError as err:
                self._error(400, f"bad request: {err}")
                return
            done = model.complete(request)
            if not request.get("stream"):
                self._send(200, done)
                return
            include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            body = b"".join(sse_events(done, include_usage))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
