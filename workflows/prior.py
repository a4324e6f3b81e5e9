"""What a run that builds on an earlier one is given: the earlier run's
report, findings and sources (``PriorRun``), and the pure functions that
build what the planner and the reporter are shown. The conductor's side is
``workflows/continuation.py``."""

from __future__ import annotations

from pydantic import Field

from workflows.models import Citation, Model, PageRead, SearchRun

MAX_PRIOR_REPORT = 40_000  # characters of the earlier report carried (the window fitting trims further)
MAX_PRIOR_FINDINGS = 40_000
CHANGES_HEADING = "What changed since"


class PriorRequest(Model):
    run_id: str | None = None  # a named run (--continue-from)
    schedule: str | None = None  # or: the schedule's last completed run
    current_id: str = ""  # the asking workflow, never its own prior


class PriorRun(Model):
    run_id: str
    question: str
    locale: str = ""
    finished_at: str = ""  # ISO 8601
    report: str = ""
    report_cut: bool = False  # longer than MAX_PRIOR_REPORT: ``report`` is its start
    findings: str = ""
    citations: list[Citation] = Field(default_factory=list)
    # What a re-check compares with (workflows/recheck.py); None: the run
    # ended before runs kept them.
    pages: list[PageRead] | None = None
    searches: list[SearchRun] | None = None

    @property
    def date(self) -> str:
        return self.finished_at[:10] or "the earlier run"


def planner_context(prior: PriorRun) -> str:
    sources = "\n".join(f"- [{c.title or c.url}]({c.url})" for c in prior.citations)
    return (
        f"# What an earlier run found ({prior.date}, run {prior.run_id})\n"
        f"Its question: {prior.question}\n\n{prior.findings or prior.report}\n\n"
        f"Its sources:\n{sources or '(none)'}\n\n"
        "Plan only what is missing from these findings, or what may have changed since then; "
        "do not research again what they already answer."
    )


def reporter_context(prior: PriorRun) -> str:
    return f"# The earlier report ({prior.date}, run {prior.run_id})\n{prior.report or prior.findings}"


def has_changes_section(report: str) -> bool:
    """Whether the report opens with (has near its start) the section on what changed."""
    return CHANGES_HEADING.lower() in report[:3000].lower()


def with_changes(report: str, section: str) -> str:
    """The report opening with ``section``: right after its title (a first
    line ``# …``) when it has one, so the title stays the report's title."""
    head, _, rest = report.lstrip("\n").partition("\n")
    if head.startswith("# "):
        return f"{head}\n\n{section.strip()}\n\n{rest.lstrip()}"
    return f"{section.strip()}\n\n{report}"


def merge_sources(sources: dict[str, Citation], prior: PriorRun) -> None:
    """The earlier run's sources stay citable (they were retrieved, by it)."""
    for citation in prior.citations:
        sources.setdefault(citation.url, citation)
