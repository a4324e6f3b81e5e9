"""A signing-in reverse proxy on loopback, standing in for oauth2-proxy in
front of the research desk: it asks the browser for a user name and password
(HTTP Basic), drops whatever user header the browser sent, and forwards the
request to the desk from its own address (``SOURCE``, another loopback
address than the browser's) with ``X-Remote-User: <name>``. Responses,
server-sent events too, stream back as they come."""

from __future__ import annotations

import base64
import threading
import time

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from client.devserver import free_port

SOURCE = "127.0.0.2"  # where the proxy connects from: the desk trusts this address only
HEADER = "X-Remote-User"
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-authorization", "authorization"}


class AuthProxy:
    def __init__(self, upstream: str, passwords: dict[str, str]) -> None:
        self.upstream, self.passwords = upstream.rstrip("/"), passwords
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.client = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(local_address=SOURCE), timeout=None, trust_env=False
        )
        app = Starlette(routes=[Route("/{path:path}", self.forward, methods=["GET", "POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def who(self, request: Request) -> str | None:
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            name, _, password = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            return None
        return name if self.passwords.get(name) == password else None

    async def forward(self, request: Request) -> Response:
        name = self.who(request)
        if name is None:
            return Response("sign in", 401, headers={"WWW-Authenticate": 'Basic realm="desk"'})
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP and k.lower() != HEADER.lower()]
        headers.append((HEADER, name))
        url = self.upstream + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        upstream = self.client.build_request(request.method, url, headers=headers, content=await request.body())
        reply = await self.client.send(upstream, stream=True)
        kept = {k: v for k, v in reply.headers.items() if k.lower() not in HOP and k.lower() != "content-length"}
        return StreamingResponse(
            reply.aiter_raw(), status_code=reply.status_code, headers=kept, background=BackgroundTask(reply.aclose)
        )

    def __enter__(self) -> AuthProxy:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the test proxy did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
