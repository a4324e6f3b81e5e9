"""Who may use the desk. ASGI middleware, in this order:

- the Host header must name the desk itself: a loopback name (``localhost``,
  ``127.0.0.1``, ``[::1]``) with the port it listens on, the address it is
  bound to, or a name the operator configured (``DEEPRESEARCH_UI_HOSTS``), so
  a page whose own name was rebound to 127.0.0.1 (DNS rebinding) is refused;
- who is asking (client/desk/users.py): a trusted proxy's header, a token
  (bearer header, query or cookie: any one that matches lets the request
  in, so a stale cookie cannot shadow a good token), or the desk's own user
  when nothing is configured;
- anything that changes a run is JSON, and when the browser says where it
  comes from (Origin), that is one of the same allowed hosts, so another site
  cannot drive the desk from a visitor's browser."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse

from client.desk.users import TOKEN_COOKIE, Refusal, Who  # noqa: F401 - TOKEN_COOKIE: where it was

HOSTS_ENV = "DEEPRESEARCH_UI_HOSTS"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6][:port]`` -> (lower-case name without brackets,
    port or None); None when it is not a host name at all."""
    value = value.strip().lower()
    try:
        parts = urlsplit(f"//{value}")
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not name or parts.username is not None or parts.password is not None or parts.path or parts.query:
        return None
    return name, port


class AllowedHosts:
    """The names the desk answers to. Loopback names and the bound address
    count only with the desk's own port; a configured name without a port
    counts with any (a TLS proxy in front serves it on its own port)."""

    def __init__(self, bind_host: str = "127.0.0.1", extra: Iterable[str] = ()) -> None:
        self.local: set[str] = set(LOOPBACK_NAMES)
        bound = bind_host.strip().strip("[]").lower()
        if bound and not _wildcard(bound):
            self.local.add(bound)
        self.named: set[tuple[str, int | None]] = set()
        for entry in extra:
            parsed = split_host(entry) if entry.strip() else None
            if parsed is None:
                if entry.strip():
                    raise ValueError(f"{HOSTS_ENV}: {entry.strip()!r} is not a host name (name or name:port)")
                continue
            self.named.add(parsed)

    @classmethod
    def from_setting(cls, bind_host: str, setting: str | None) -> AllowedHosts:
        return cls(bind_host, (setting or "").replace(",", " ").split())

    def allows(self, value: str, own_port: int | None) -> bool:
        parsed = split_host(value)
        if parsed is None:
            return False
        name, port = parsed
        if (name, port) in self.named or (name, None) in self.named:
            return True
        return name in self.local and (port or 80) == own_port

    def describe(self, own_port: int | None) -> str:
        names = [f"{n}:{own_port}" if ":" not in n else f"[{n}]:{own_port}" for n in sorted(self.local)]
        names += [n if p is None else f"{n}:{p}" for n, p in sorted(self.named, key=str)]
        return ", ".join(names)


def _wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _refuse(message: str, status: int):
    return JSONResponse({"error": message}, status)


class Guard:
    """Host, then who is asking (``client/desk/users.py``: a trusted proxy's
    header, a token, or the desk's own user when nothing is configured), then
    same-origin JSON for anything that changes. The user goes to the routes
    as ``request.state.user``."""

    def __init__(self, app, who: Who, hosts: AllowedHosts | None = None) -> None:
        self.app, self.who = app, who
        self.hosts = hosts or AllowedHosts()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        own_port = (scope.get("server") or (None, None))[1]
        refusal = self.host_refusal(request, own_port)
        if refusal is None:
            user = await self.who.identify(request)
            if isinstance(user, Refusal):
                refusal = _refuse(user.message, user.status)
            else:
                scope.setdefault("state", {})["user"] = user
                refusal = self.change_refusal(request, own_port)
        if refusal is not None:
            return await refusal(scope, receive, send)
        return await self.app(scope, receive, send)

    def host_refusal(self, request: Request, own_port: int | None):
        host = request.headers.get("host", "")
        if not self.hosts.allows(host, own_port):
            return _refuse(
                f"this desk answers only to {self.hosts.describe(own_port)}, not to {host[:100]!r}: "
                f"to reach it by another name, list that name in {HOSTS_ENV}",
                421,
            )
        return None

    def change_refusal(self, request: Request, own_port: int | None):
        origin = request.headers.get("origin")
        if origin is not None and not self._same_site(origin, own_port):
            return _refuse("cross-site requests are refused", 403)
        if request.method == "POST" and not request.headers.get("content-type", "").startswith("application/json"):
            return _refuse("send JSON", 415)
        return None

    def _same_site(self, origin: str, own_port: int | None) -> bool:
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            return False
        netloc = parts.netloc
        if port is None:  # the scheme's port, said out loud
            netloc += ":443" if parts.scheme == "https" else ":80"
        return self.hosts.allows(netloc, own_port)
