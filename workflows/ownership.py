"""Who a run belongs to and who did what to it: pure functions and shapes,
shared by the workflow (payloads it takes, the note it writes, the limits it
keeps) and by every client (the desk's access rule, the CLI's user).

A run's ``owner`` is a user name; ``shared_with`` lists users and teams
(``team:NAME``) who may read it. Roles: ``reader`` reads what is shared with
them, ``researcher`` also starts runs and acts on their own, ``admin`` reads
and acts on every run.

The acting user travels in a message's payload, the same way for every
message: a payload that is a JSON object may hold ``"by": "<user>"``
(``acting_user``; ``by_problem`` is the validator's check). The plan review
also takes its object form ``{"feedback": …, "by": …, "plan_version": n}``
beside the plain string the stock CLI sends.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from workflows.models import Model
from workflows.user_names import (  # noqa: F401 - re-exported: one place to import ownership from
    MAX_SHARES,
    NAME_RULE,
    ROLES,
    TEAM,
    Role,
    name_problem,
    share_problem,
    split_shares,
)

Access = Literal["none", "read", "act"]


# --- who did what ------------------------------------------------------------


def acting_user(payload: Any) -> str | None:
    """The acting user a message's payload names (``{"by": …}``), or None."""
    if isinstance(payload, dict) and isinstance(payload.get("by"), str):
        return payload["by"]
    return None


def by_problem(payload: Any) -> str | None:
    """A validator's check of a payload's ``by``: None when absent or a user name."""
    if isinstance(payload, dict) and payload.get("by") is not None:
        return name_problem(payload["by"], "the acting user")
    return None


def review_payload(payload: Any, plan_version: Any = None) -> tuple[Any, Any, str | None]:
    """(feedback, plan_version, by) of a review: the plain feedback string
    (the stock CLI's), or the object ``{"feedback", "by", "plan_version"}``;
    a version given as the update's second argument wins."""
    if not isinstance(payload, dict):
        return payload, plan_version, None
    version = plan_version if plan_version is not None else payload.get("plan_version")
    return payload.get("feedback"), version, acting_user(payload)


def closing_note(accepted_by: str | None, steered_by: list[str] | tuple[str, ...] = ()) -> str:
    """The report's closing note on who accepted its plan and who steered the
    run ("" when nobody named did)."""
    parts = []
    if accepted_by:
        parts.append(f"plan accepted by {accepted_by}")
    named = list(dict.fromkeys(n for n in steered_by if n))
    if named:
        parts.append(f"steered by {', '.join(named)}")
    return f"\n\n---\n*Research run: {'; '.join(parts)}.*" if parts else ""


def details(phase: str, owner: str | None, accepted_by: str | None) -> str:
    """The Temporal UI's current details: the phase, whose run, who accepted the plan."""
    lines = [f"Phase: {phase}"]
    if owner:
        lines.append(f"Owner: {owner}")
    if accepted_by:
        lines.append(f"Plan accepted by: {accepted_by}")
    return "\n".join(lines)


# --- who may see and do what -------------------------------------------------


def access(
    owner: str | None, shared_with: list[str] | tuple[str, ...], user: str, role: str, teams: tuple[str, ...] = ()
) -> Access:
    """What ``user`` (with ``role``, member of ``teams``) may do with a run:
    ``act`` (review, steer, cancel, ask, make its side outputs), ``read``
    (see it, follow it, download it) or ``none`` (it is not there for them).
    A run without an owner (started before owners existed) is an admin's."""
    if role == "admin":
        return "act"
    if owner is not None and owner == user:
        return "act" if role == "researcher" else "read"
    shared = set(shared_with or ())
    if user in shared or any(f"{TEAM}{team}" in shared for team in teams):
        return "read"
    return "none"


def visible_query(user: str, teams: tuple[str, ...] = ()) -> str:
    """The visibility-query clause for the runs ``user`` may see (owned, or
    shared with them or a team of theirs). Names are checked to hold no quote."""
    names = [user, *(f"{TEAM}{t}" for t in teams)]
    for name in names:
        if '"' in name or "\\" in name:
            raise ValueError(f"{name!r} cannot be used in a query")
    listed = ", ".join(f'"{n}"' for n in names)
    return f'(ResearchOwner = "{user}" OR ResearchShared IN ({listed}))'


# --- per-user limits -----------------------------------------------------------


class OwnerQuery(Model):
    """What the ``owner_usage`` activity is asked: the owner's usage as seen
    by this run (its own runs excluded by workflow id)."""

    owner: str
    workflow_id: str


class OwnerUsage(Model):
    """The worker's per-user limits (None: off) and the owner's use of them."""

    max_runs: int | None = None
    runs_before: int = 0  # the owner's other running runs that started before this one
    daily_tokens: int | None = None
    tokens_today: int = 0  # tokens of the owner's other runs started since 00:00 UTC
    resets_at: str | None = None  # ISO 8601: the next 00:00 UTC
    checked: bool = True  # False: the activity could not look (the run goes on, with a warning)
    problem: str = ""


FIRST_LOOK = 15  # seconds before a run held back by the concurrency limit looks again
LONGEST_LOOK = 300  # its waits double up to this


def start_wait(usage: OwnerUsage, owner: str, now: datetime, waited: int) -> tuple[float, str] | None:
    """Whether a run may start: None, or (seconds to wait before looking
    again, why, in one line). ``waited``: looks so far (the wait doubles)."""
    if usage.max_runs and usage.runs_before >= usage.max_runs:
        seconds = min(FIRST_LOOK * 2 ** min(waited, 8), LONGEST_LOOK)
        return float(seconds), (
            f"{owner} has {usage.runs_before} run(s) going and the limit is {usage.max_runs} per user: "
            "this run starts when one of them ends"
        )
    if usage.daily_tokens and usage.tokens_today >= usage.daily_tokens and usage.resets_at:
        resets = datetime.fromisoformat(usage.resets_at)
        seconds = max((resets - now).total_seconds(), 1.0) + 1.0
        return seconds, (
            f"{owner} has used {usage.tokens_today:,} tokens today and the limit is {usage.daily_tokens:,} "
            f"per user a day: this run starts after {resets.strftime('%Y-%m-%d %H:%M')} UTC"
        )
    return None


def allowance(usage: OwnerUsage) -> int | None:
    """The tokens this run may still use under its owner's daily budget (the
    budget less what the owner's other runs used today), None when off."""
    if not usage.daily_tokens:
        return None
    return max(usage.daily_tokens - usage.tokens_today, 0)


def day_start(now: datetime) -> datetime:
    """00:00 UTC of ``now``'s day (``now`` aware, in UTC)."""
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def next_day(now: datetime) -> datetime:
    return day_start(now) + timedelta(days=1)


def shares(request: Any, state: Any) -> dict[str, Any]:
    """Owner, sharing and who accepted the plan, as the result and the status
    query show them (``request``: the run's input, ``state``: its RunState)."""
    return {"owner": request.owner, "shared_with": request.shared_with, "plan_accepted_by": state.plan_accepted_by}
