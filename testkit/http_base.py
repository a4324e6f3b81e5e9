"""Shared machinery of the scripted loopback servers: one JSON POST endpoint,
bearer-key check, request log, fault injection and latency.

A subclass sets ``path`` and implements ``_record`` (what goes into
``requests``), ``_reply`` (the scripted answer) and ``_error`` (an error
response in the mimicked service's format).

A GET endpoint (a search API taking a query string) sets ``methods = ("GET",)``:
its ``body`` is then the query string as a dict (first value of each name).
A service that checks its key elsewhere than ``Authorization: Bearer``
overrides ``_authorised``. ``account`` (an ``AccountLimit``) answers 429
beyond a provider account's request rate.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from testkit.account_limit import AccountLimit

HANG_UP = "X-Scripted-Hang-Up"  # a response header never sent: close the connection after this answer


@dataclass
class Response:
    status: int
    body: bytes | Iterable[bytes]  # bytes: sized body; iterable: streamed, then close
    headers: dict[str, str]


def json_response(status: int, obj: object, headers: dict[str, str] | None = None) -> Response:
    return Response(status, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the client went away (a killed worker, in the crash tests)
        super().handle_error(request, client_address)


class ScriptedServer:
    path: str
    methods: tuple[str, ...] = ("POST",)  # the HTTP methods ``path`` answers

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.requests: list[dict] = []
        self.errors: list[str] = []  # tracebacks of handlers that raised (answered with 500)
        self.latency = 0.0
        self._lock = threading.Lock()
        self._faults: list[tuple[int, float | None]] = []
        self._fail_rate = 0.0
        self._fail_statuses: tuple[int, ...] = ()
        self._rng = random.Random(0)
        self._httpd: ThreadingHTTPServer | None = None
        # A provider account's request limit (testkit/account_limit.py): 429 beyond it.
        self.account: AccountLimit | None = None

    # -- lifecycle -------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._httpd, "server not started"
        return self._httpd.server_address[1]

    def start(self):
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.scripted = self  # type: ignore[attr-defined]
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd:
            httpd.shutdown()
            httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- fault injection -------------------------------------------------------

    def fail_next(self, n: int, status: int = 500, retry_after: float | None = None) -> None:
        """Answer the next ``n`` authorised requests with ``status``."""
        with self._lock:
            self._faults += [(status, retry_after)] * n

    def fail_rate(self, rate: float, statuses: tuple[int, ...] = (429, 500), seed: int = 0) -> None:
        """Fail a random fraction ``rate`` of authorised requests (0 turns it off)."""
        with self._lock:
            self._fail_rate, self._fail_statuses, self._rng = rate, statuses, random.Random(seed)

    def _next_fault(self) -> tuple[int, float | None] | None:
        with self._lock:
            if self._faults:
                return self._faults.pop(0)
            if self._fail_rate and self._rng.random() < self._fail_rate:
                return self._rng.choice(self._fail_statuses), None
        return None

    # -- one request -----------------------------------------------------------

    def _record(self, body: dict) -> dict:
        raise NotImplementedError

    def _reply(self, body: dict) -> Response:
        raise NotImplementedError

    def _error(self, status: int, message: str, headers: dict[str, str]) -> Response:
        raise NotImplementedError

    def _authorised(self, headers) -> bool:
        return headers.get("Authorization") == f"Bearer {self.api_key}"

    def _respond(self, path: str, headers, raw: bytes, method: str = "POST") -> Response:
        if path.split("?")[0] != self.path:
            return json_response(404, {"error": f"no route {path}"})
        if method not in self.methods:
            return json_response(405, {"error": f"{method} not allowed on {self.path}"})
        if method == "GET":
            query = parse_qs(urlsplit(path).query, keep_blank_values=True)
            body = {name: values[0] for name, values in query.items()}
        else:
            try:
                body = json.loads(raw)
            except ValueError:
                return self._error(400, "request body is not JSON", {})
        record = {**self._record(body), "_status": None}  # set once answered
        with self._lock:
            self.requests.append(record)
        if self.account is not None and self._authorised(headers) and (wait := self.account.take()) is not None:
            message = f"Rate limit reached: {self.account.rate:g} requests a second. Please try again later."
            record["_status"] = 429
            return self._error(429, message, AccountLimit.headers(wait))  # at once, as providers do
        time.sleep(self.latency)
        if not self._authorised(headers):
            response = self._error(401, "invalid API key", {})
        elif fault := self._next_fault():
            status, retry_after = fault
            extra = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
            response = self._error(status, f"injected failure ({status})", extra)
        else:
            try:
                response = self._reply(body)
            except Exception as err:
                with self._lock:
                    self.errors.append(traceback.format_exc())
                response = self._error(500, f"scripted handler raised {err!r}", {})
        record["_status"] = response.status
        return response


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        response = self.server.scripted._respond(self.path, self.headers, raw)  # type: ignore[attr-defined]
        try:
            self._send(response)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            self.close_connection = True

    def do_GET(self) -> None:
        scripted = self.server.scripted  # type: ignore[attr-defined]
        response = scripted._respond(self.path, self.headers, b"", method="GET")
        try:
            self._send(response)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        for name, value in response.headers.items():
            if name != HANG_UP:
                self.send_header(name, value)
        if isinstance(response.body, bytes):
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            self.wfile.write(response.body)
            # A server that closes the connection after a whole answer without saying so (no
            # "Connection: close"): the client's next request on it meets a closed connection.
            if HANG_UP in response.headers:
                self.close_connection = True
            return
        self.send_header("Connection", "close")
        self.close_connection = True
        self.end_headers()
        for chunk in response.body:
            self.wfile.write(chunk)
            self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass
