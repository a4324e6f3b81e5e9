"""Who may use the desk: the token when one is set (query, cookie or bearer
header), and same-origin JSON for anything that changes a run, so another
site cannot drive the desk from a visitor's browser. ASGI middleware."""

from __future__ import annotations

import hmac

from starlette.requests import Request
from starlette.responses import JSONResponse

TOKEN_COOKIE = "desk_token"


class Guard:
    """The token (when set), and same-origin JSON for anything that changes."""

    def __init__(self, app, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        if self.token:
            offered = request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE) or ""
            offered = offered or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(offered.encode(), self.token.encode()):
                response = JSONResponse({"error": "this desk needs its token: open it with ?token=…"}, 401)
                return await response(scope, receive, send)
        if request.method == "POST":
            origin = request.headers.get("origin")
            host = request.headers.get("host", "")
            if origin and origin.split("://", 1)[-1] != host:
                return await JSONResponse({"error": "cross-site requests are refused"}, 403)(scope, receive, send)
            if not request.headers.get("content-type", "").startswith("application/json"):
                return await JSONResponse({"error": "send JSON"}, 415)(scope, receive, send)
        return await self.app(scope, receive, send)
