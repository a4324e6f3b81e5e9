"""User and team names: what a run's owner, its sharing and a message's
acting user may be. No project imports (``workflows/models.py`` checks
its input with it)."""

from __future__ import annotations

import re
from typing import Literal

Role = Literal["reader", "researcher", "admin"]
ROLES: tuple[str, ...] = ("reader", "researcher", "admin")
TEAM = "team:"
MAX_NAME = 128
MAX_SHARES = 50
# A user name: what a login, an e-mail address or a proxy's user header holds; bounded, linear.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._@+-]{0,127}")
NAME_RULE = "letters, digits and . _ @ + - (not first), at most 128"


def name_problem(name: object, what: str = "user name") -> str | None:
    """None when ``name`` is a usable user (or team) name, else one line."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = repr(name)[:60] if isinstance(name, str) else type(name).__name__
        return f"{what} {shown} is not a user name ({NAME_RULE})"
    return None


def share_problem(entry: object) -> str | None:
    """None when ``entry`` names a user or a team (``team:NAME``), else one line."""
    if isinstance(entry, str) and entry.startswith(TEAM):
        return name_problem(entry[len(TEAM) :], "team name")
    return name_problem(entry, "shared with")


def split_shares(values: list[str] | tuple[str, ...] | None) -> list[str]:
    """``--share a,b --share team:x`` as one list, blanks dropped, order kept, no repeats."""
    out: list[str] = []
    for value in values or ():
        for entry in value.replace(",", " ").split():
            if entry not in out:
                out.append(entry)
    return out
