"""Who may use the desk. ASGI middleware, in this order:

- the Host header must name the desk itself: a loopback name (``localhost``,
  ``127.0.0.1``, ``[::1]``) with the port it listens on, the address it is
  bound to, or a name the operator configured (``DEEPRESEARCH_UI_HOSTS``), so
  a page whose own name was rebound to 127.0.0.1 (DNS rebinding) is refused;
- the token when one is set (bearer header, query or cookie: any one that
  matches lets the request in, so a stale cookie cannot shadow a good token);
- anything that changes a run is JSON, and when the browser says where it
  comes from (Origin), that is one of the same allowed hosts, so another site
  cannot drive the desk from a visitor's browser."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse

TOKEN_COOKIE = "desk_token"
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
    """Host, then the token (when set), then same-origin JSON for anything that changes."""

    def __init__(self, app, token: str | None, hosts: AllowedHosts | None = None) -> None:
        self.app, self.token = app, token
        self.hosts = hosts or AllowedHosts()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        refusal = self.refusal(request, (scope.get("server") or (None, None))[1])
        if refusal is not None:
            return await refusal(scope, receive, send)
        return await self.app(scope, receive, send)

    def refusal(self, request: Request, own_port: int | None):
        host = request.headers.get("host", "")
        if not self.hosts.allows(host, own_port):
            return _refuse(
                f"this desk answers only to {self.hosts.describe(own_port)}, not to {host[:100]!r}: "
                f"to reach it by another name, list that name in {HOSTS_ENV}",
                421,
            )
        if self.token and not self._token_offered(request):
            return _refuse("this desk needs its token: open it with ?token=…", 401)
        origin = request.headers.get("origin")
        if origin is not None and not self._same_site(origin, own_port):
            return _refuse("cross-site requests are refused", 403)
        if request.method == "POST" and not request.headers.get("content-type", "").startswith("application/json"):
            return _refuse("send JSON", 415)
        return None

    def _token_offered(self, request: Request) -> bool:
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        offered = [
            bearer.strip() if scheme.lower() == "bearer" else "",
            request.query_params.get("token") or "",
            request.cookies.get(TOKEN_COOKIE) or "",
        ]
        expected = self.token.encode() if self.token else b""
        return any(o and hmac.compare_digest(o.encode(), expected) for o in offered)

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
