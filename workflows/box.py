"""What each box of the flow (coordinator, investigation, planner, research
team, reporter) works with: the run's settings, its state, the activity
calls, and two small services of the conductor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workflows.activity_calls import ActivityCalls
from workflows.models import ResearchInput
from workflows.state import RunState


@dataclass
class Box:
    request: ResearchInput
    state: RunState
    calls: ActivityCalls
    variables: Callable[..., dict]  # prompt variables: locale, current time, and extras
    emit: Callable[..., None]  # publish a progress event: emit(kind, text, step=None)

    def out_of_budget(self) -> bool:
        """Whether the run's token budget, or what its owner's daily budget
        leaves it (workflows/owner_limits.py), is spent (no new research turn
        may start); remembered in the state for the result."""
        used = self.state.usage.prompt_tokens + self.state.usage.completion_tokens
        budget = self.request.token_budget
        if budget and used >= budget:
            if not self.state.budget_exhausted:
                self.state.budget_exhausted = True
                self.emit("notice", f"token budget of {budget:,} reached: no new research starts")
            return True
        left = self.state.owner_allowance
        if left is not None and used >= left:
            if not self.state.budget_exhausted:
                self.state.budget_exhausted = True
                owner = self.request.owner
                self.state.budget_note = f"{owner}'s daily token budget was reached"
                self.emit("notice", f"{self.state.budget_note}: no new research starts")
            return True
        return False

    def budget_reason(self) -> str:
        """Why the research stopped early for a budget ("" when it did not)."""
        if not self.state.budget_exhausted:
            return ""
        budget = self.request.token_budget
        return self.state.budget_note or f"the token budget of {budget or 0:,} tokens was reached"

    def warn(self, text: str) -> None:
        """A warning the result and ``status`` carry (once each), also shown
        as a notice on the progress stream."""
        if text not in self.state.warnings:
            self.state.warnings.append(text)
            self.emit("notice", f"warning: {text}")
