"""The data shapes of a follow-up thread (``workflows/follow_up.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workflows.models import Citation, Model, Usage
from workflows.prior import PriorRun

ThreadPhase = Literal["loading", "waiting", "answering", "researching", "ended"]
MAX_QUESTION = 4000  # characters of a follow-up question; a longer one is refused


class FollowUpInput(Model):
    run_id: str = Field(min_length=1, max_length=1000)
    # the server knows ResearchPhase/ResearchTitle: research runs of the thread show them (`list`, Temporal UI)
    search_attributes: bool = False
    # The run's owner and sharing: the thread's, and its research runs' (they inherit them);
    # ``owner_attributes``: the server knows ResearchOwner/ResearchShared.
    owner: str | None = None
    shared_with: list[str] = Field(default_factory=list)
    owner_attributes: bool = False


class ThreadTurn(Model):
    question: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    researched: bool = False
    research_run: str | None = None  # the run that researched more for this answer


class ThreadState(Model):
    """Everything a thread knows; continue-as-new carries it whole."""

    prior: PriorRun | None = None  # the run's report, findings and sources (loaded once)
    sources: dict[str, Citation] = Field(default_factory=dict)  # citable: the run's and those found since
    found_since: list[str] = Field(default_factory=list)  # findings of research made for follow-ups
    turns: list[ThreadTurn] = Field(default_factory=list)  # the newest MAX_TURNS_KEPT
    asked: int = 0  # questions taken in all (ids of the asks)
    researched: int = 0  # research runs started (their ids)
    usage: Usage = Field(default_factory=Usage)


class FollowUpAnswer(Model):
    workflow_id: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    researched: bool = False
    research_run: str | None = None


class ThreadStatus(Model):
    run_id: str
    phase: ThreadPhase
    questions: int
    turns: list[ThreadTurn] = Field(default_factory=list)
    waiting: list[str] = Field(default_factory=list)  # questions not answered yet
    research_run: str | None = None  # researching now for a question
    usage: Usage = Field(default_factory=Usage)
    rate_limited_since: str | None = None  # as in RunStatus
