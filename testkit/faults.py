"""Fault-injection helpers for the fault and bad-input tests: a model server
that can also answer with a raw (e.g. cut-off) HTTP response, per-role
one-shot overrides of a script, a port nobody listens on, and a check of the
tool-call protocol every OpenAI-compatible server enforces."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testkit.crash import RecordingLLM
from testkit.http_base import Response
from testkit.llm_server import Reply, has_tool_result, role_of


class RawLLM(RecordingLLM):
    """``RecordingLLM`` (requests carry ``_time`` and ``_request_id``) that
    can answer the next request(s) of a role with a raw HTTP ``Response``
    instead of the handler's reply: e.g. a body shorter than its
    Content-Length, then the connection closed (see ``raw_next``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._raw: dict[str, list[Response]] = {}

    def raw_next(self, role: str, *responses: Response) -> None:
        with self._lock:
            self._raw.setdefault(role, []).extend(responses)

    def _reply(self, request: dict) -> Response:
        with self._lock:
            queued = self._raw.get(role_of(request))
            response = queued.pop(0) if queued else None
        return response if response is not None else super()._reply(request)


def cut_off_response(text: str = '{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"mess') -> Response:
    """A 200 that promises far more body than it sends, then hangs up."""
    return Response(
        200, iter([text.encode()]), {"Content-Type": "application/json", "Content-Length": str(len(text) + 4000)}
    )


class Override:
    """Wraps a model handler: the ``n``-th request (1-based) of ``role`` gets
    ``reply(request, normal)`` instead (``normal`` is the wrapped handler's
    answer); every other request is answered normally."""

    def __init__(
        self, handler: Callable[[dict], Any], role: str, reply: Callable[[dict, Any], Any], n: int = 1
    ) -> None:
        self.handler, self.role, self.reply, self.n = handler, role, reply, n
        self.seen = 0
        self.fired = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict) -> Any:
        if role_of(request) == self.role:
            with self._lock:
                self.seen += 1
                mine = self.seen == self.n
            if mine:
                self.fired += 1
                return self.reply(request, self.handler(request))
        return self.handler(request)


def closed_port() -> int:
    """A loopback port that refuses connections (bound once, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tool_protocol_problems(request: dict) -> list[str]:
    """What an OpenAI-compatible server would reject with HTTP 400: an
    assistant message's tool calls must each be answered by a following
    ``tool`` message with its id, and a ``tool`` message must answer one."""
    problems = []
    messages = request.get("messages", [])
    for i, message in enumerate(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        answered = set()
        for later in messages[i + 1 :]:
            if later.get("role") != "tool":
                break
            answered.add(later.get("tool_call_id"))
        for call in message["tool_calls"]:
            if call["id"] not in answered:
                problems.append(f"tool call {call['id']} ({call['function']['name']}) has no tool message answering it")
    called = {c["id"] for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") not in called:
            problems.append(f"tool message for unknown call {message.get('tool_call_id')}")
    return problems


def attempts_of_first(llm: RawLLM, role: str) -> list[dict]:
    """The requests made by the activity behind the first ``role`` request."""
    first = llm.calls(role)[0]["_request_id"]
    return [r for r in llm.calls(role) if r["_request_id"] == first]


def blobs_deleted_at_first_crawl(script, data_dir: Path) -> None:
    """Make ``script``'s researcher delete every stored blob (as a careless
    hand would) once it has a crawl's result, then search again: its next
    model call finds a crawled page gone."""
    researcher, deleted = script.researcher, []

    def deleting(request):
        if has_tool_result(request, "crawl") and not deleted:
            for path in (data_dir / "blobs").rglob("*"):
                if path.is_file():
                    path.unlink()
            deleted.append(True)
            return Reply(tool_calls=[("web_search", {"query": "more about the lighthouse"})])
        return researcher(request)

    script.researcher = deleting
