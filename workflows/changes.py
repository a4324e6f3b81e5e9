""" "What changed since <date>", written by the workflow from the re-check's
own comparison (``workflows/recheck.py``), not by the model: each changed
figure or statement with its old and its new text, each cited (the old from
the page the earlier run read, the new from the page as read now); sources
gone or moved named; new search results listed; what could not be compared
said. A weak model cannot get it wrong because no model writes it.

The same material, with an instruction, is what the planner and the
reporter are shown. Pure functions of ``Recheck``; every list is bounded.
"""

from __future__ import annotations

from workflows.models import Citation
from workflows.prior import CHANGES_HEADING
from workflows.recheck_models import PageCheck, PassageChange, Recheck

MAX_LISTED = 30  # changed passages listed in all (the rest are counted)
MAX_NEW_RESULTS = 15  # new search results listed


def link(title: str, url: str) -> str:
    """A markdown link whose text cannot break it (no brackets, one line)."""
    text = " ".join((title or url).replace("[", "(").replace("]", ")").split()) or url
    return f"[{text}]({url})"


def _quote(text: str) -> str:
    return "“" + " ".join(text.replace("“", '"').replace("”", '"').split()) + "”"


def _passage_line(page: PageCheck, change: PassageChange, since: str, today: str) -> str:
    now_url = page.page.url if page.page else page.url
    old = f"{_quote(change.old)} ({link(page.title, page.url)}, read {since})" if change.old else ""
    new = f"{_quote(change.new)} ({link(page.title, now_url)}, read {today})" if change.new else ""
    if old and new:
        values = "; ".join(f"{f.old} → {f.new}" for f in change.figures)
        lead = f"**{values}**: " if values else ""
        return f"- {lead}was {old}; now {new}"
    if new:
        return f"- New on the page: {new}"
    return f"- No longer on the page: {old}"


def _changed_lines(recheck: Recheck) -> list[str]:
    lines: list[str] = []
    left = 0
    for page in recheck.pages:
        if page.outcome != "changed":
            continue
        for change in page.changes:
            if len(lines) < MAX_LISTED:
                lines.append(_passage_line(page, change, recheck.since, recheck.today))
            else:
                left += 1
        left += page.more_changes
    if left:
        lines.append(f"- … and {left} more changed passage(s) on these pages.")
    return lines


def _named(pages: list[PageCheck], why) -> list[str]:
    return [f"- {link(p.title, p.url)}: {why(p)}" for p in pages]


def new_results(recheck: Recheck) -> list[tuple[Citation, list[str]]]:
    """Each new search result once, with the searches that found it."""
    found: dict[str, tuple[Citation, list[str]]] = {}
    for search in recheck.searches:
        for citation in search.new:
            found.setdefault(citation.url, (citation, []))[1].append(search.query)
    return list(found.values())


def _searches(queries: list[str]) -> str:
    shown = ", ".join(f"“{q}”" for q in queries[:3])
    return f"search {shown}" if len(queries) == 1 else f"searches {shown}" + (" …" if len(queries) > 3 else "")


def sections(recheck: Recheck) -> list[tuple[str, list[str]]]:
    """(label, lines) of each kind of change the re-check found, in order."""
    pages = recheck.pages
    gone = [p for p in pages if p.outcome == "gone"]
    moved = [p for p in pages if p.moved_to]
    not_compared = [p for p in pages if p.outcome in ("not_compared", "unreadable")]
    new = new_results(recheck)
    failed = [s for s in recheck.searches if s.error]
    out = [
        ("Changed", _changed_lines(recheck)),
        ("No longer available", _named(gone, lambda p: f"gone (HTTP {p.status})" if p.status else "gone")),
        ("Moved", [f"- {link(p.title, p.url)} now leads to {link(p.title, p.moved_to or '')}" for p in moved]),
        (
            "New in the searches",
            [f"- {link(c.title, c.url)} ({_searches(queries)})" for c, queries in new[:MAX_NEW_RESULTS]]
            + ([f"- … and {len(new) - MAX_NEW_RESULTS} more."] if len(new) > MAX_NEW_RESULTS else []),
        ),
        (
            "Not compared",
            _named(not_compared, lambda p: p.note or "could not be read now")
            + [f"- the search “{s.query}” failed now: {s.error}" for s in failed]
            + ([f"- {recheck.pages_left} more source(s) were not read again"] if recheck.pages_left else []),
        ),
    ]
    return [(label, lines) for label, lines in out if lines]


def nothing_line(recheck: Recheck) -> str:
    pages, searches = len(recheck.pages), len(recheck.searches)
    said = (
        f"Nothing changed: the {pages} source(s) behind the report of {recheck.since} say the same on {recheck.today}"
    )
    if searches:
        said += f", and its {searches} search(es) found nothing new"
    return said + "."


def body(recheck: Recheck) -> str:
    """The section's text under its heading."""
    found = sections(recheck)
    if not found:
        return nothing_line(recheck)
    unchanged = sum(1 for p in recheck.pages if p.outcome == "unchanged" and not p.moved_to)
    parts = [f"The sources behind the report of {recheck.since} were read again on {recheck.today}."]
    parts += [f"**{label}**\n\n" + "\n".join(lines) for label, lines in found]
    if unchanged:
        parts.append(f"The other {unchanged} source(s) read the same as then.")
    return "\n\n".join(parts)


def changes_section(recheck: Recheck) -> str:
    return f"## {CHANGES_HEADING} {recheck.since}\n\n{body(recheck)}"


def for_planner(recheck: Recheck) -> str:
    return (
        f"# What changed in its sources since then (re-checked {recheck.today})\n{body(recheck)}\n\n"
        "These are the changes found. Plan research only for what they leave open (a changed value "
        "that needs confirming, a new result worth reading, a source that is gone); if they settle "
        "the question, set has_enough_context to true."
    )


def for_reporter(recheck: Recheck) -> str:
    return f"# What changed in the earlier report's sources (re-checked {recheck.today})\n{body(recheck)}"


def without_changes(report: str) -> str:
    """The report without a section on what changed (its own heading
    ``## What changed since …`` up to the next heading of its level or above),
    so a report built on it has exactly one."""
    return split_changes(report)[1]


def split_changes(report: str) -> tuple[str, str]:
    """(its sections on what changed, the rest of the report): string
    operations only, linear in the report."""
    kept: list[str] = []
    left_out: list[str] = []
    skipping = 0  # the level of the heading of the section being left out
    for line in report.split("\n"):
        head = line.lstrip()
        if head.startswith("#"):
            level = len(head) - len(head.lstrip("#"))
            title = head[level:].strip().lower()
            if skipping and level <= skipping:
                skipping = 0
            if not skipping and level <= 3 and title.startswith(CHANGES_HEADING.lower()):
                skipping = level
        (left_out if skipping else kept).append(line)
    return "\n".join(left_out).strip(), "\n".join(kept).strip("\n") + "\n"
