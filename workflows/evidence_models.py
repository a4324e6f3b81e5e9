"""The data shapes of evidence gathering (workflows/evidence.py and the
activities of activities/evidence.py): what a research step read before its
first model turn, and the passages its findings rest on. Pure pydantic."""

from __future__ import annotations

from pydantic import Field

from workflows.models import Citation, EvidencePage, Model  # noqa: F401 (EvidencePage re-exported)
from workflows.support_models import SupportCounts


class GatherRequest(Model):
    """``rank_evidence``: the passages of ``pages`` most relevant to ``focus``,
    within ``budget`` tokens, rendered as the evidence set of a step."""

    focus: str  # what the step is about: the topic, its title and description
    pages: list[EvidencePage] = Field(default_factory=list)
    local: str = ""  # what the step's local_search found (text), if anything
    queries: list[str] = Field(default_factory=list)  # what was searched, named in the set
    budget: int = 3_000


class EvidenceSet(Model):
    blob: str | None = None  # the rendered passages; None when nothing was readable
    pages: list[Citation] = Field(default_factory=list)  # the pages that gave passages
    passages: int = 0
    tokens: int = 0
    lead: str = ""  # a search for what the best passages point to (activities/leads.py); "": none


class Gathered(Model):
    """What a step read before its first turn (kept in a paused agent's
    checkpoint, so the step's findings can still be traced to it)."""

    queries: list[str] = Field(default_factory=list)
    pages: list[EvidencePage] = Field(default_factory=list)
    local: str = ""  # what the step's local search found
    evidence: EvidenceSet | None = None
    searched: bool = False  # a search found something
    problem: str = ""  # why nothing was read, when nothing was


class SupportRequest(Model):
    """``support_findings``: which passages of what a step read its findings
    rest on."""

    findings: str
    focus: str
    history: str | None = None  # the agent's conversation (a blob): the pages it read itself
    pages: list[EvidencePage] = Field(default_factory=list)  # the pages gathered before it
    local: str = ""
    budget: int = 3_000


class Support(Model):
    findings: str  # the findings, each claim that a passage holds followed by its page
    blob: str | None = None  # the passages the findings rest on, rendered (best first fill)
    read: int = 0  # pages (and local results) the step had text of
    searched: bool = False  # a search of the step's found something
    passages: int = 0
    # how the findings' statements are supported by what the step read (activities/support.py)
    statements: SupportCounts | None = None


class StepEvidence(Model):
    """What a finished research step leaves for the reporter."""

    title: str
    support: str | None = None  # blob of its supporting passages
    read: int = 0
    statements: SupportCounts | None = None  # how its findings' statements are supported


class EvidenceJoin(Model):
    """``join_evidence``: the steps' supporting passages in one set for the
    reporter, taking from each step in turn, within ``budget`` tokens."""

    steps: list[StepEvidence] = Field(default_factory=list)
    budget: int = 3_000


# The notes of a step's findings when the passages it read stand for them
# (activities/evidence.support_of); the reporter's condensing tells them by these.
NOT_FOUND = (
    "The researcher's findings for this step were not found in the pages it read (figures or names that appear "
    "nowhere in them), so they are left out. These are the passages read for this step that bear on it, each "
    "after a link to its page:"
)
NOTHING_WRITTEN = (
    "The researcher wrote no findings of its own. These are the passages read for this step that bear on it, "
    "each after a link to its page:"
)
