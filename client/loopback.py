"""A threaded HTTP server on 127.0.0.1 in a daemon thread: what the demo's
scripted model (``client/demo/model.py``) and the evaluation's offline web
(``client/evaluation/web.py``) are served by."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # a client that went away; nothing to tell


class LoopbackServer:
    """Start/stop (or use as a context manager); subclasses give their
    request handler class and a name for the thread and for errors. With
    ``any_port_if_taken``, ``port`` is only a preference: when it cannot be
    bound the server takes any free port (see ``port`` for the one it got)."""

    name = "loopback server"
    poll_seconds = 0.5  # how often the serving thread looks for a stop

    def __init__(self, port: int = 0, any_port_if_taken: bool = False) -> None:
        self._port = port
        self._any_port_if_taken = any_port_if_taken
        self._httpd: ThreadingHTTPServer | None = None

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError(f"the {self.name} is not started")
        return self._httpd.server_address[1]

    def start(self) -> Self:
        if self._httpd is None:
            try:
                self._httpd = _Server(("127.0.0.1", self._port), self.handler_class())
            except OSError:
                # Taken (a listener, or any socket bound there: an outgoing
                # connection's own port); a preferred port may fall back.
                if not (self._port and self._any_port_if_taken):
                    raise
                self._httpd = _Server(("127.0.0.1", 0), self.handler_class())
            serve = self._httpd.serve_forever
            threading.Thread(target=serve, args=(self.poll_seconds,), name=self.name, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
