"""Who is asking the desk, and with which role (reader, researcher, admin).

In the order tried for each request:

1. A trusted reverse proxy's header (``DEEPRESEARCH_UI_USER_HEADER``, e.g.
   ``X-Forwarded-User`` from oauth2-proxy), taken only from the addresses in
   ``DEEPRESEARCH_UI_TRUSTED_PROXIES`` (addresses or networks). The same
   header from anywhere else is refused (403), and a request from the proxy
   without it too (401). The role is the users file's for that name, else
   ``DEEPRESEARCH_UI_DEFAULT_ROLE`` (researcher); teams come from
   ``DEEPRESEARCH_UI_GROUPS_HEADER`` when set (from the proxy only), else from
   the users file.
2. A token (bearer header, ``?token=`` or the cookie the page sets): the
   shared ``DEEPRESEARCH_UI_TOKEN`` (an admin: whoever holds it acts as the
   desk's own user, ``DEEPRESEARCH_USER``), or a user's own token from the
   users file ``DEEPRESEARCH_UI_USERS``.
3. Nothing configured (a desk on loopback for its own user): that user, as
   admin. Otherwise 401.

The users file: one user a line, ``NAME ROLE HASH [TEAM,TEAM…]``, ``#``
comments; HASH is ``scrypt$N$r$p$salt$digest`` (base64) of the user's token,
or ``-`` for a user who signs in only through the proxy (the line gives the
role). It is read again when it changes. `deepresearch ui --new-user NAME`
makes a token and its line. A token is ``NAME.SECRET``, so a request costs
one scrypt at most (verified tokens are remembered by their SHA-256 while
the process runs)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request

from workflows.ownership import ROLES, TEAM, name_problem

USERS_ENV = "DEEPRESEARCH_UI_USERS"
HEADER_ENV = "DEEPRESEARCH_UI_USER_HEADER"
PROXIES_ENV = "DEEPRESEARCH_UI_TRUSTED_PROXIES"
GROUPS_ENV = "DEEPRESEARCH_UI_GROUPS_HEADER"
DEFAULT_ROLE_ENV = "DEEPRESEARCH_UI_DEFAULT_ROLE"
TOKEN_COOKIE = "desk_token"
SCRYPT = (2**14, 8, 1)  # N, r, p: 16 MiB and some 40 ms a hash
MAX_REMEMBERED = 10_000


@dataclass(frozen=True)
class User:
    name: str
    role: str  # reader | researcher | admin
    teams: tuple[str, ...] = ()
    token: str | None = None  # the token it signed in with (the page keeps it in a cookie)


@dataclass(frozen=True)
class Refusal:
    message: str
    status: int


@dataclass(frozen=True)
class Entry:
    role: str
    hashed: str | None  # None: signs in through the proxy only
    teams: tuple[str, ...] = ()


# --- tokens and their hashes ------------------------------------------------------


def new_token(name: str) -> str:
    return f"{name}.{secrets.token_urlsafe(24)}"


def hash_token(token: str, salt: bytes | None = None) -> str:
    n, r, p = SCRYPT
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(token.encode(), salt=salt, n=n, r=r, p=p, dklen=32)
    return f"scrypt${n}${r}${p}${_b64(salt)}${_b64(digest)}"


def token_matches(token: str, hashed: str) -> bool:
    """Whether ``token`` is the one ``hashed`` was made from (constant time)."""
    try:
        kind, n, r, p, salt, digest = hashed.split("$")
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(
            token.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p), dklen=len(expected)
        )
    except (ValueError, TypeError):
        return False
    return kind == "scrypt" and hmac.compare_digest(got, expected)


def user_line(name: str, role: str, token: str | None, teams: tuple[str, ...] = ()) -> str:
    """The users file's line for a user (``token`` None: proxy sign-in only)."""
    line = f"{name} {role} {hash_token(token) if token else '-'}"
    return f"{line} {','.join(teams)}" if teams else line


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# --- the users file -------------------------------------------------------------------


def parse_users(text: str, where: str = USERS_ENV) -> dict[str, Entry]:
    """The users file's entries by name; ValueError naming the line otherwise."""
    users: dict[str, Entry] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) not in (3, 4):
            raise ValueError(f"{where} line {number}: write NAME ROLE HASH [TEAMS], not {len(fields)} fields")
        name, role, hashed = fields[:3]
        teams = tuple(t for t in (fields[3].split(",") if len(fields) == 4 else ()) if t)
        problem = name_problem(name) or next((name_problem(t, "team name") for t in teams if name_problem(t)), None)
        if problem:
            raise ValueError(f"{where} line {number}: {problem}")
        if role not in ROLES:
            raise ValueError(f"{where} line {number}: role {role!r} is not one of {', '.join(ROLES)}")
        if hashed != "-" and not (hashed.startswith("scrypt$") and hashed.count("$") == 5):
            raise ValueError(f"{where} line {number}: the hash must be scrypt$… (deepresearch ui --new-user) or -")
        if name in users:
            raise ValueError(f"{where} line {number}: {name} is listed twice")
        users[name] = Entry(role, None if hashed == "-" else hashed, teams)
    return users


class UsersFile:
    """The users file, read again whenever it changes on disk; a file that
    turns unreadable keeps the last good list (and says so on stderr)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stamp: tuple[int, int] | None = None
        self.users: dict[str, Entry] = {}
        self.load(strict=True)

    def load(self, strict: bool = False) -> None:
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp == self.stamp:
                return
            self.users, self.stamp = parse_users(self.path.read_text(encoding="utf-8")), stamp
        except (OSError, ValueError, UnicodeDecodeError) as err:
            if strict:
                raise ValueError(f"{USERS_ENV}: {err}") from None
            print(f"research desk: {USERS_ENV} not read again, the last good list stays: {err}", flush=True)

    def get(self, name: str) -> Entry | None:
        self.load()
        return self.users.get(name)


# --- who is asking ---------------------------------------------------------------------


class Who:
    def __init__(
        self,
        *,
        local_user: str,
        shared_token: str | None = None,
        users: UsersFile | None = None,
        header: str | None = None,
        proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = (),
        groups_header: str | None = None,
        default_role: str = "researcher",
    ) -> None:
        self.local_user, self.shared_token, self.users = local_user, shared_token, users
        self.header, self.proxies, self.groups_header = header, proxies, groups_header
        self.default_role = default_role
        self.verified: dict[bytes, str] = {}  # sha256 of a good token -> its user

    @classmethod
    def from_env(cls, env: Mapping[str, str], local_user: str, shared_token: str | None) -> Who:
        """ValueError (one line) for a setting that cannot be used."""
        header = (env.get(HEADER_ENV) or "").strip() or None
        proxies = trusted_proxies(env.get(PROXIES_ENV) or "")
        if header and not proxies:
            raise ValueError(f"{HEADER_ENV} needs {PROXIES_ENV}: the addresses the proxy connects from")
        role = (env.get(DEFAULT_ROLE_ENV) or "researcher").strip()
        if role not in ROLES:
            raise ValueError(f"{DEFAULT_ROLE_ENV}={role!r}: use one of {', '.join(ROLES)}")
        path = (env.get(USERS_ENV) or "").strip()
        return cls(
            local_user=local_user,
            shared_token=shared_token,
            users=UsersFile(Path(path).expanduser()) if path else None,
            header=header,
            proxies=proxies,
            groups_header=(env.get(GROUPS_ENV) or "").strip() or None,
            default_role=role,
        )

    @property
    def open(self) -> bool:
        """Nothing configured: every request is the desk's own user (loopback only)."""
        return not (self.shared_token or self.users or self.header)

    async def identify(self, request: Request) -> User | Refusal:
        peer = request.client.host if request.client else ""
        if self.header:
            from_proxy = _in(peer, self.proxies)
            named = request.headers.get(self.header)
            if named is not None:
                if not from_proxy:
                    return Refusal(f"the {self.header} header is taken only from the desk's trusted proxies", 403)
                return self.proxy_user(named.strip(), request)
            if from_proxy:
                return Refusal(f"the proxy in front of the desk did not say who is asking (no {self.header})", 401)
        for token in offered_tokens(request):
            if user := await self.token_user(token):
                return user
        if self.open:
            return User(self.local_user, "admin")
        how = "sign in through the desk's proxy" if self.header and not (self.users or self.shared_token) else ""
        return Refusal(how or "this desk needs your token: open it with ?token=…", 401)

    def proxy_user(self, name: str, request: Request) -> User | Refusal:
        if problem := name_problem(name):
            return Refusal(f"the proxy's {self.header} header: {problem}", 403)
        entry = self.users.get(name) if self.users else None
        teams = entry.teams if entry else ()
        if self.groups_header:
            raw = request.headers.get(self.groups_header) or ""
            teams = tuple(t.strip() for t in raw.split(",") if t.strip() and not name_problem(t.strip()))
        return User(name, entry.role if entry else self.default_role, teams)

    async def token_user(self, token: str) -> User | None:
        if self.shared_token and hmac.compare_digest(token.encode(), self.shared_token.encode()):
            return User(self.local_user, "admin", token=token)
        if not self.users:
            return None
        name = token.rpartition(".")[0]
        entry = self.users.get(name) if name else None
        if entry is None or entry.hashed is None:
            return None
        key = hashlib.sha256(f"{entry.hashed}\n{token}".encode()).digest()  # a changed hash forgets the token
        if self.verified.get(key) != name:
            if not await asyncio.to_thread(token_matches, token, entry.hashed):
                return None
            if len(self.verified) >= MAX_REMEMBERED:
                self.verified.clear()
            self.verified[key] = name
        return User(name, entry.role, entry.teams, token=token)


def offered_tokens(request: Request) -> list[str]:
    """The tokens a request offers: bearer header, ``?token=``, the cookie (any one may be right)."""
    scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
    offered = [
        bearer.strip() if scheme.lower() == "bearer" else "",
        request.query_params.get("token") or "",
        request.cookies.get(TOKEN_COOKIE) or "",
    ]
    return [t for t in offered if t and len(t) <= 1000]


def trusted_proxies(setting: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Addresses or networks (``10.0.0.5``, ``172.18.0.0/16``), comma or space separated."""
    out = []
    for entry in setting.replace(",", " ").split():
        try:
            out.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"{PROXIES_ENV}: {entry!r} is not an address or network") from None
    return tuple(out)


def _in(peer: str, networks: tuple) -> bool:
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


def new_user(name: str, role: str, teams: tuple[str, ...], path: str | None) -> tuple[str, str]:
    """A new user's token and users-file line; with ``path``, the line is
    added to that file (made readable by its owner only). ValueError: one line."""
    if problem := name_problem(name) or next((name_problem(t, "team name") for t in teams if name_problem(t)), None):
        raise ValueError(problem)
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {', '.join(ROLES)}")
    if any(t.startswith(TEAM) for t in teams):
        raise ValueError("give team names without 'team:'")
    token = new_token(name)
    line = user_line(name, role, token, teams)
    if path:
        file = Path(path).expanduser()
        existing = parse_users(file.read_text(encoding="utf-8")) if file.exists() else {}
        if name in existing:
            raise ValueError(f"{name} is already in {file}: remove their line first to give a new token")
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            out.write(line + "\n")
    return token, line
