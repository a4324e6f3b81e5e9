"""The sandbox as a service of its own, for deployments where the worker
cannot isolate code itself (a container running as a non-root user):

    python -m activities.sandbox.service --host 0.0.0.0 --port 8090

It runs ``LocalSandbox`` (as root in its own container: namespaces and a uid
per session) and holds no keys; put it on a network with no way out (see
docker-compose.yml). Workers reach it with ``DEEPRESEARCH_SANDBOX=remote`` and
``DEEPRESEARCH_SANDBOX_URL``; ``DEEPRESEARCH_SANDBOX_TOKEN``, set on both, must
come with every request. Without a token it refuses to start, unless told
``--no-token``: then it serves loopback only (and says that any local user
can run code there), and only to loopback host names (a page in a browser that rebinds its
own name to 127.0.0.1 is refused). A POST must say ``Content-Type:
application/json``: a browser sends that cross-site only after a preflight
this service never grants, so no web page can run code here through a
plain form or ``text/plain`` request. At most ``DEEPRESEARCH_SANDBOX_MAX_SESSIONS`` sessions (default 4) are
open at once; a new one past that is answered 429.

    POST /run    {"session", "code", "previous": [...]} -> {"stdout", "stderr", "error"}
    POST /close  {"session"}
    GET  /health -> what isolates the sessions
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import ipaddress
import os
import sys
from collections import Counter
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from activities.sandbox.base import SandboxError, SandboxRefused
from activities.sandbox.local import LocalSandbox

TOKEN_ENV = "DEEPRESEARCH_SANDBOX_TOKEN"
MAX_SESSIONS_ENV = "DEEPRESEARCH_SANDBOX_MAX_SESSIONS"
DEFAULT_MAX_SESSIONS = 4


class BadRequest(ValueError):
    """The request cannot be read: answered 400 with this line."""


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError) as err:
        raise BadRequest(f"the request body is not JSON ({str(err)[:100]})") from None
    if not isinstance(body, dict):
        raise BadRequest("send a JSON object")
    return body


def create_app(sandbox: LocalSandbox, token: str | None, max_sessions: int = DEFAULT_MAX_SESSIONS) -> Starlette:
    starting: Counter[str] = Counter()  # new sessions whose first cell is on its way

    def allowed(request: Request) -> bool:
        offered = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return not token or hmac.compare_digest(offered.encode(), token.encode())

    def from_a_page(request: Request) -> JSONResponse | None:
        """Refuses what a web page could send: another host name without a
        token (DNS rebinding), a body not declared JSON (no preflight)."""
        host = request.headers.get("host", "").rpartition(":")[0] or request.headers.get("host", "")
        if not token and not is_loopback(host):
            return JSONResponse({"error": f"this sandbox service answers only to loopback names, not {host!r}"}, 421)
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if request.method == "POST" and kind != "application/json":
            return JSONResponse({"error": "send the request as Content-Type: application/json"}, 415)
        return None

    def busy(session: str) -> str | None:
        open_now = sandbox.open_sessions() | {s for s, n in starting.items() if n}
        if session in open_now or len(open_now) < max_sessions:
            return None
        return (
            f"the sandbox service is busy: {len(open_now)} sessions are open, its limit "
            f"({MAX_SESSIONS_ENV}={max_sessions}); try again when one ends"
        )

    async def run(request: Request) -> JSONResponse:
        if (refused := from_a_page(request)) is not None:
            return refused
        if not allowed(request):
            return JSONResponse({"error": "wrong or missing sandbox token"}, 401)
        try:
            body = await _body(request)
        except BadRequest as err:
            return JSONResponse({"error": str(err)}, 400)
        if not isinstance(body.get("code"), str) or not body.get("session"):
            return JSONResponse({"error": "send {session, code, previous}"}, 400)
        session = str(body["session"])
        previous = [c for c in body.get("previous") or [] if isinstance(c, str)]
        if (why := busy(session)) is not None:
            return JSONResponse({"error": why}, 429)
        starting[session] += 1
        try:
            cell = await sandbox.run(session, body["code"], previous)
        except SandboxRefused as refused:
            return JSONResponse({"refused": str(refused)}, 503)
        except SandboxError as err:
            return JSONResponse({"error": str(err)}, 500)
        finally:
            starting[session] -= 1
            if not starting[session]:
                del starting[session]
        return JSONResponse({"stdout": cell.stdout, "stderr": cell.stderr, "error": cell.error})

    async def close(request: Request) -> JSONResponse:
        if (refused := from_a_page(request)) is not None:
            return refused
        if not allowed(request):
            return JSONResponse({"error": "wrong or missing sandbox token"}, 401)
        try:
            body = await _body(request)
        except BadRequest as err:
            return JSONResponse({"error": str(err)}, 400)
        await sandbox.close(str(body.get("session") or ""))
        return JSONResponse({"closed": True})

    async def health(request: Request) -> JSONResponse:
        isolation = await sandbox.isolation()
        return JSONResponse(
            {
                "network": isolation.network,
                "pid": isolation.pid,
                "user": isolation.user,
                "private_tmp": isolation.private_tmp,
                "cgroup": isolation.cgroup,
                "refusal": isolation.refusal,
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        await sandbox.close_all()

    return Starlette(
        routes=[
            Route("/run", run, methods=["POST"]),
            Route("/close", close, methods=["POST"]),
            Route("/health", health),
        ],
        lifespan=lifespan,
    )


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def max_sessions_setting(value: str | None) -> int:
    text = (value or "").strip()
    if not text:
        return DEFAULT_MAX_SESSIONS
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 1000:
        raise SystemExit(f"sandbox service: {MAX_SESSIONS_ENV} must be a whole number from 1 to 1000, not {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m activities.sandbox.service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--max-sessions", type=int, help=f"sessions open at once ({MAX_SESSIONS_ENV}; default 4)")
    parser.add_argument(
        "--no-token",
        action="store_true",
        help=f"serve loopback without {TOKEN_ENV}: any local user can then run code here",
    )
    args = parser.parse_args(argv)
    token = (os.environ.get(TOKEN_ENV) or "").strip() or None
    if not token and not is_loopback(args.host):
        print(
            f"sandbox service: refusing to serve {args.host} without a token: anyone who reaches it could run "
            f"code; set {TOKEN_ENV} (on the workers too), or bind to 127.0.0.1",
            file=sys.stderr,
        )
        raise SystemExit(2)
    if not token and not args.no_token:
        print(
            f"sandbox service: refusing to serve without a token: any local user could run code here; set "
            f"{TOKEN_ENV} (on the workers too), or give --no-token to allow that on loopback",
            file=sys.stderr,
        )
        raise SystemExit(2)
    cap = args.max_sessions if args.max_sessions is not None else max_sessions_setting(os.environ.get(MAX_SESSIONS_ENV))
    if cap < 1:
        raise SystemExit("sandbox service: --max-sessions must be at least 1")
    sandbox = LocalSandbox(allow_unisolated=False)
    isolation = asyncio.run(sandbox.isolation())
    print(f"sandbox service on {args.host}:{args.port}; at most {cap} sessions; isolation: {isolation}", flush=True)
    if not token:
        print(
            f"no {TOKEN_ENV}: serving loopback only, where any local user can run code here; set it to require a token",
            flush=True,
        )
    uvicorn.run(create_app(sandbox, token, cap), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
