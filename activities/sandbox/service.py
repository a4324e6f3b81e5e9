"""The sandbox as a service of its own, for deployments where the worker
cannot isolate code itself (a container running as a non-root user):

    python -m activities.sandbox.service --host 0.0.0.0 --port 8090

It runs ``LocalSandbox`` (as root in its own container: namespaces and a uid
per session) and holds no keys; put it on a network with no way out (see
docker-compose.yml). Workers reach it with ``DEEPRESEARCH_SANDBOX=remote`` and
``DEEPRESEARCH_SANDBOX_URL``; ``DEEPRESEARCH_SANDBOX_TOKEN``, when set on
both, must come with every request.

    POST /run    {"session", "code", "previous": [...]} -> {"stdout", "stderr", "error"}
    POST /close  {"session"}
    GET  /health -> what isolates the sessions
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from activities.sandbox.base import SandboxError, SandboxRefused
from activities.sandbox.local import LocalSandbox

TOKEN_ENV = "DEEPRESEARCH_SANDBOX_TOKEN"


def create_app(sandbox: LocalSandbox, token: str | None) -> Starlette:
    def allowed(request: Request) -> bool:
        offered = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return not token or hmac.compare_digest(offered.encode(), token.encode())

    async def run(request: Request) -> JSONResponse:
        if not allowed(request):
            return JSONResponse({"error": "wrong or missing sandbox token"}, 401)
        body = await request.json()
        if not isinstance(body, dict) or not isinstance(body.get("code"), str) or not body.get("session"):
            return JSONResponse({"error": "send {session, code, previous}"}, 400)
        previous = [c for c in body.get("previous") or [] if isinstance(c, str)]
        try:
            cell = await sandbox.run(str(body["session"]), body["code"], previous)
        except SandboxRefused as refused:
            return JSONResponse({"refused": str(refused)}, 503)
        except SandboxError as err:
            return JSONResponse({"error": str(err)}, 500)
        return JSONResponse({"stdout": cell.stdout, "stderr": cell.stderr, "error": cell.error})

    async def close(request: Request) -> JSONResponse:
        if not allowed(request):
            return JSONResponse({"error": "wrong or missing sandbox token"}, 401)
        body = await request.json()
        await sandbox.close(str((body or {}).get("session") or ""))
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


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m activities.sandbox.service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    args = parser.parse_args(argv)
    sandbox = LocalSandbox(allow_unisolated=False)
    token = (os.environ.get(TOKEN_ENV) or "").strip() or None
    isolation = asyncio.run(sandbox.isolation())
    print(f"sandbox service on {args.host}:{args.port}; isolation: {isolation}", flush=True)
    uvicorn.run(create_app(sandbox, token), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
