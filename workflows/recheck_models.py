"""The data shapes of the re-check a scheduled run (or ``--continue-from ID
--recheck``) makes before it plans: what the ``recheck_page`` activity is
asked and answers, and what the run keeps of it (``RunState.recheck``).
The box is ``workflows/recheck.py``, the activity ``activities/recheck.py``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workflows.models import Citation, Model, PageRead

# Bounds on what one page's comparison carries into history and prompts.
MAX_PASSAGES = 12  # changed passages listed per page (the rest are counted)
MAX_PASSAGE_CHARS = 600  # characters of one passage, old or new
MAX_FIGURES = 6  # changed figures named per passage


class RecheckRequest(Model):
    url: str  # the page as the earlier run cited it
    title: str = ""
    blob: str | None = None  # the text the earlier run read, if it kept it
    etag: str | None = None
    last_modified: str | None = None


class FigureChange(Model):
    """A changed value inside a passage: "4417" became "5120"."""

    old: str
    new: str


class PassageChange(Model):
    """One passage that differs: ``old`` empty when it is new on the page,
    ``new`` empty when it is no longer there."""

    old: str = ""
    new: str = ""
    figures: list[FigureChange] = Field(default_factory=list)


PageOutcome = Literal["unchanged", "changed", "gone", "not_compared", "unreadable"]


class PageCheck(Model):
    """One page re-read: how it compares with the text the earlier run read."""

    url: str  # as the earlier run cited it
    title: str = ""
    outcome: PageOutcome
    moved_to: str | None = None  # it now redirects elsewhere
    status: int | None = None  # HTTP status, when gone
    note: str = ""  # why it was not compared, or could not be read
    page: PageRead | None = None  # the page as read now (for the next run)
    changes: list[PassageChange] = Field(default_factory=list)
    more_changes: int = 0  # changed passages beyond those listed
    not_modified: bool = False  # the server answered 304 to the conditional request


class SearchCheck(Model):
    """One of the earlier run's searches, run again."""

    query: str
    new: list[Citation] = Field(default_factory=list)  # results it did not have then
    error: str = ""  # the search failed now


class Recheck(Model):
    since: str  # the earlier run's date
    run_id: str  # the earlier run
    today: str  # the date of the re-check
    pages: list[PageCheck] = Field(default_factory=list)
    searches: list[SearchCheck] = Field(default_factory=list)
    pages_left: int = 0  # pages beyond the bound, not read again
    kept_nothing: bool = False  # the earlier run kept no pages or searches (it ran before they were kept)
