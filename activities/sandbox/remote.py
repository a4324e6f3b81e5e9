"""``RemoteSandbox``: the worker's side of the sandbox service
(``activities/sandbox/service.py``). Sessions live in the service; a session
the service lost (restart) is rebuilt there from the cells the workflow
recorded, as the local sandbox does."""

from __future__ import annotations

import os
from collections.abc import Sequence

import httpx

from activities.sandbox.base import CellResult, SandboxError, SandboxRefused
from activities.sandbox.service import TOKEN_ENV


class RemoteSandbox:
    def __init__(self, url: str, token: str | None = None, timeout: float = 120.0) -> None:
        self.url = url.rstrip("/")
        token = token if token is not None else (os.environ.get(TOKEN_ENV) or "").strip() or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout, connect=10.0), trust_env=False)
        self.sessions: set[str] = set()

    async def run(self, session: str, code: str, previous: Sequence[str] = ()) -> CellResult:
        body = {"session": session, "code": code, "previous": list(previous)}
        try:
            response = await self.http.post(f"{self.url}/run", json=body)
        except httpx.HTTPError as err:
            raise SandboxError(f"the sandbox service at {self.url} cannot be reached: {err}") from None
        answer = _json(response)
        if response.status_code == 503 and "refused" in answer:
            raise SandboxRefused(answer["refused"])
        if response.status_code == 429:  # at its session limit: one line, and the activity tries again later
            raise SandboxError(answer.get("error") or f"the sandbox service at {self.url} is busy")
        if response.status_code != 200:
            raise SandboxError(f"the sandbox service answered HTTP {response.status_code}: {answer.get('error', '')}")
        self.sessions.add(session)
        return CellResult(stdout=answer.get("stdout", ""), stderr=answer.get("stderr", ""), error=answer.get("error"))

    async def close(self, session: str) -> None:
        self.sessions.discard(session)
        try:
            await self.http.post(f"{self.url}/close", json={"session": session})
        except httpx.HTTPError:
            pass  # the service closes idle sessions itself

    async def close_all(self) -> None:
        for session in list(self.sessions):
            await self.close(session)
        await self.http.aclose()


def _json(response: httpx.Response) -> dict:
    try:
        value = response.json()
    except ValueError:
        return {"error": response.text[:300]}
    return value if isinstance(value, dict) else {}
