"""Step 4 of the flow, the human review: the plan waits (durably, for days if
need be) for feedback that starts with ``[ACCEPTED]`` or ``[EDIT_PLAN]
<changes>``; anything else is rejected with the reason and the plan keeps
waiting.

``parse_review`` is the decision, a pure function of the feedback text.
``PlanReview`` is the waiting itself, used by the workflow's review signal,
update and validator. A review names who sent it when its payload is the
object ``{"feedback", "by", "plan_version"}`` (workflows/ownership.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():  # side-effect free
    from workflows.clean import clean_text
    from workflows.ownership import by_problem, review_payload

ACCEPT = "[ACCEPTED]"
EDIT = "[EDIT_PLAN]"


class InvalidReview(ValueError):
    pass


@dataclass(frozen=True)
class Review:
    accepted: bool
    edit: str = ""  # the requested change when not accepted
    by: str | None = None  # who sent it, when the payload said

    def said(self) -> str:
        """The progress event's words for it."""
        said = "plan accepted" if self.accepted else "plan edit requested"
        return f"{said} by {self.by}" if self.by else said


def parse_review(feedback: str) -> Review:
    """``[ACCEPTED]`` or ``[EDIT_PLAN] <text>`` (case-insensitive); anything
    else raises InvalidReview with a message for the user."""
    if not isinstance(feedback, str):
        raise InvalidReview("review feedback must be a string")
    text = feedback.strip()
    upper = text.upper()
    if upper.startswith(ACCEPT):
        return Review(accepted=True)
    if upper.startswith(EDIT):
        change = text[len(EDIT) :].strip()
        if not change:
            raise InvalidReview(f"{EDIT} needs the requested change after it, e.g. '{EDIT} add a step on costs'")
        return Review(accepted=False, edit=change)
    shown = text[:40] + ("…" if len(text) > 40 else "")
    raise InvalidReview(f"feedback must start with {ACCEPT} or {EDIT} <changes>; got {shown!r}")


class PlanReview:
    """A plan waiting for its review: at most one review is taken per plan."""

    def __init__(self) -> None:
        self.pending = False
        self.feedback: str | None = None  # set by a review while one is pending
        self.by: str | None = None  # who sent it

    @staticmethod
    def unpack(payload: Any, plan_version: Any = None) -> tuple[Any, Any]:
        """The feedback and plan version of a review's payload (a string or
        the object form); ApplicationError when its acting user is no name."""
        if problem := by_problem(payload):
            raise ApplicationError(problem)
        feedback, version, _ = review_payload(payload, plan_version)
        return feedback, version

    def take(self, payload: Any) -> str:
        """Takes a validated review; returns its feedback."""
        feedback, _, self.by = review_payload(payload)
        self.feedback = clean_text(feedback)
        return self.feedback

    def check(self, feedback: str, phase: str) -> None:
        """Raise ApplicationError (the update's rejection) unless ``feedback``
        can be taken now."""
        if self.pending and self.feedback is not None:
            raise ApplicationError("the plan has already been reviewed; its review is being processed")
        if not self.pending:
            raise ApplicationError(f"no plan is waiting for review (phase: {phase})")
        try:
            parse_review(feedback)
        except InvalidReview as err:
            raise ApplicationError(str(err)) from None

    async def wait(self, timeout: timedelta | None) -> Review | None:
        """The review, or None when ``timeout`` passes first."""
        self.feedback, self.by, self.pending = None, None, True
        try:
            await workflow.wait_condition(lambda: self.feedback is not None, timeout=timeout)
        except TimeoutError:
            return None
        finally:
            self.pending = False
        review = parse_review(self.feedback or "")
        return Review(review.accepted, review.edit, self.by) if self.by else review
