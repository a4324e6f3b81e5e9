"""A loopback web server for tests: serves pages, redirects and failures
from a table of routes that tests can change while it runs."""

from __future__ import annotations

import email.utils
import hashlib
import html
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from client.loopback import LoopbackServer


@dataclass
class _Route:
    body: bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    validators: bool = False  # ETag and Last-Modified, and 304 to a request that has them

    def not_modified(self, request_headers) -> bool:
        if not self.validators:
            return False
        etag, since = request_headers.get("If-None-Match"), request_headers.get("If-Modified-Since")
        return (
            bool(etag or since)
            and etag in (None, self.headers["ETag"])
            and since
            in (
                None,
                self.headers["Last-Modified"],
            )
        )


class _Handler(BaseHTTPRequestHandler):
    pages: PageServer  # set on the class PageServer.handler_class makes

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, send_body: bool) -> None:
        pages = self.pages
        with pages._lock:
            pages.hits.append(self.path)
            pages.requests.append((self.path, dict(self.headers.items())))
            route = pages._routes.get(self.path) or pages._routes.get(urlsplit(self.path).path)
        if route is None:
            route = _Route(b"not found", 404, {"Content-Type": "text/plain"})
        if route.delay:
            time.sleep(route.delay)
        same = route.not_modified(self.headers)
        try:
            self.send_response(304 if same else route.status)
            for name, value in route.headers.items():
                self.send_header(name, value)
            if not same and not any(name.lower() == "content-length" for name in route.headers):
                self.send_header("Content-Length", str(len(route.body)))
            self.end_headers()
            if send_body and not same:
                self.wfile.write(route.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def log_message(self, format: str, *args: object) -> None:
        pass


class PageServer(LoopbackServer):
    """HTTP server on 127.0.0.1 (random port) in a daemon thread.

    ``add`` and ``redirect`` define routes (matched on the full request path,
    then on the path without query); ``hits`` lists requested paths in order.
    """

    name = "PageServer"
    poll_seconds = 0.05  # tests start and stop many: stop at once

    def __init__(self) -> None:
        super().__init__()
        self.hits: list[str] = []
        self.requests: list[tuple[str, dict[str, str]]] = []  # (path, request headers), in order
        self._routes: dict[str, _Route] = {}
        self._lock = threading.Lock()

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        return type("PageHandler", (_Handler,), {"pages": self})

    def add(
        self,
        path: str,
        body: bytes | str,
        content_type: str = "text/html; charset=utf-8",
        status: int = 200,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        validators: bool = False,
    ) -> None:
        """Serve ``body`` at ``path``; ``headers`` add to (or override)
        Content-Type. ``validators``: send an ``ETag`` (the body's hash) and a
        ``Last-Modified`` (when it was added), and answer a request that
        carries them with 304 Not Modified, as a real server does."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        all_headers = {"Content-Type": content_type, **(headers or {})}
        if validators:
            all_headers["ETag"] = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
            all_headers["Last-Modified"] = email.utils.formatdate(time.time(), usegmt=True)
        with self._lock:
            self._routes[path] = _Route(data, status, all_headers, delay, validators)

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        """Redirect ``path`` to ``location`` (absolute, or relative to this server)."""
        with self._lock:
            self._routes[path] = _Route(b"", status, {"Location": location})

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def article(title: str, paragraphs: list[str]) -> str:
    """A realistic news-style page: head, site nav, the article, a footer."""
    body = "\n".join(f"      <p>{html.escape(p)}</p>" for p in paragraphs)
    t = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>{t}</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <link rel="stylesheet" href="/static/site.css">
  <script>window.analytics = {{track: function () {{}}}};</script>
</head>
<body>
  <header class="site-header">
    <a class="logo" href="/">The Daily Example</a>
    <nav class="main-nav">
      <ul>
        <li><a href="/world">World</a></li>
        <li><a href="/science">Science</a></li>
        <li><a href="/subscribe">Subscribe to our newsletter</a></li>
      </ul>
    </nav>
  </header>
  <main>
    <article class="post">
      <h1>{t}</h1>
      <p class="byline">By Jane Reporter, March 3, 2024</p>
{body}
    </article>
    <aside class="related">
      <h2>Related stories</h2>
      <ul><li><a href="/other">Ten celebrity gardens you must see</a></li></ul>
    </aside>
  </main>
  <footer class="site-footer">
    <p>Copyright 2024 The Daily Example. All rights reserved.</p>
    <p><a href="/privacy">Privacy policy</a> | <a href="/cookies">Cookie settings</a></p>
  </footer>
</body>
</html>
"""
