"""Which runs each user of the desk sees and may act on
(``workflows.ownership.access`` decides, from the run's ``ResearchOwner``
and ``ResearchShared`` search attributes):

- a run the user may not see, and a run that does not exist, answer the same
  404 ("there is no run with id …"): ids guessed or enumerated reveal nothing;
- a run the user may read but not act on (shared with them, or they are a
  reader) answers 403 with one line to review, steer, cancel, answer, ask and
  making its podcast or slides; reading it (status, the event stream,
  downloads) is allowed;
- lists show the user's own runs and those shared with them or their teams
  (an admin's: all), and only the schedules whose runs they would see.

Side outputs and follow-up threads are checked as the run they belong to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio.service import RPCError, RPCStatusCode

from client.desk.problem import Problem
from client.desk.users import User
from workflows.models import OWNER_ATTRIBUTE, SHARED_ATTRIBUTE
from workflows.ownership import access, visible_query

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowExecutionDescription

# What each acting route does to a run, in the refusal's words.
VERBS = {
    "review": "review",
    "answer": "answer",
    "cancel": "cancel",
    "ask": "ask about",
    "podcast": "make a podcast of",
    "slides": "make slides of",
    "steer": "steer",
}


def no_run(run_id: str) -> Problem:
    return Problem(f"there is no run with id {run_id!r}", 404)


def owner_of(described: Any) -> tuple[str | None, list[str]]:
    """A run's owner and who it is shared with, from its search attributes."""
    attributes = described.typed_search_attributes
    return attributes.get(OWNER_ATTRIBUTE), list(attributes.get(SHARED_ATTRIBUTE) or [])


def level(user: User, described: Any) -> str:
    owner, shared = owner_of(described)
    return access(owner, shared, user.name, user.role, user.teams)


async def describe(client: Client, workflow_id: str) -> WorkflowExecutionDescription:
    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise no_run(workflow_id) from None
        raise


async def check(client: Client, run_id: str, user: User, act: str | None = None) -> WorkflowExecutionDescription:
    """The run's description when ``user`` may see it (and, with ``act``, do
    that to it); Problem 404 or 403 otherwise."""
    described = await describe(client, run_id)
    allowed = level(user, described)
    if allowed == "none":
        raise no_run(run_id)
    if act and allowed != "act":
        owner, _ = owner_of(described)
        whose = f"{owner}'s" if owner else "an admin's"
        raise Problem(
            f"run {run_id} is {whose}: {user.name} ({user.role}) may read it but not "
            f"{VERBS.get(act, act)} it (only its owner, as a researcher, or an admin may)",
            403,
        )
    return described


def start_problem(user: User) -> Problem | None:
    if user.role == "reader":
        return Problem(f"{user.name} is a reader: readers read runs shared with them but cannot start runs", 403)
    return None


def list_filter(user: User) -> str:
    """The visibility-query clause that keeps ``user``'s runs ("" for an admin)."""
    return "" if user.role == "admin" else f" AND {visible_query(user.name, user.teams)}"


def may_see_schedule(user: User, row: dict) -> bool:
    return access(row.get("owner"), row.get("shared_with") or [], user.name, user.role, user.teams) != "none"
