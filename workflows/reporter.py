"""Step 6 of the flow, the reporter: one model call writes the markdown
report from the plan and the findings, in the run's locale and report style.

``verify_citations`` and ``cited`` are pure functions: the report may cite
only sources the run actually retrieved.
"""

from __future__ import annotations

import re

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows import condense, evidence, statements
from workflows.box import Box
from workflows.reply_checks import checked_report, grounded_report, supported_report

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.changes import changes_section, for_reporter, without_changes
    from workflows.fallback_report import fallback_report
    from workflows.models import Citation, Message, ModelRequest
    from workflows.prior import CHANGES_HEADING, has_changes_section, reporter_context, with_changes
    from workflows.state import RunState
    from workflows.steer_models import reporter_guidance

# A bare URL ends at a blank, a closing bracket or a quote, typographic and
# CJK ones too (“…https://a.org/x” or 「…https://a.org/x」 in a quoted
# passage, where no blank follows in CJK text): before, the remover took a
# closing ” and the rest of the passage up to the next blank for the URL's.
# One character class: linear.
_URL_ENDS = "\"'<>)\\]“”‘’„‚«»‹›「」『』【】〔〕〖〗〘〙〈〉《》（）［］｛｝。，、；：！？"
_URL = re.compile(rf"(?:https?|file)://[^\s{_URL_ENDS}]+")
# Linear: a link's text stops at a bracket and its URL at a bracket, a blank
# or an unbalanced parenthesis, so no two tries scan the same text (the
# pattern this replaces was quadratic on a report of "[" or "[a](http://").
_LINK = re.compile(r"\[([^\[\]]*)\]\(((?:https?|file)://(?:[^\s()\[\]]|\([^\s()\[\]]*\))+)\)")
UNVERIFIED = "[unverified source removed]"


async def write_report(box: Box, partial: str = "") -> str:
    """The report; ``partial`` says why the research stopped early (the report
    then says it is partial). When the findings do not fit the reporter's
    context window, each step's findings are condensed first (and again, up
    to ``condense.CONDENSE_ROUNDS`` times): never cut off at the end."""
    state = box.state
    every_plan = workflow.patched("reporter-reads-evidence")
    steps = state.finished() if every_plan else state.plan.steps if state.plan else []
    findings = [(s.title, s.execution_res) for s in steps if s.execution_res]
    passages = await evidence.for_report(box, state.evidence) if every_plan else None
    for round_ in range(condense.CONDENSE_ROUNDS + 1):
        last = round_ == condense.CONDENSE_ROUNDS
        request = _report_request(box, findings, partial, trim=last, passages=passages if every_plan else False)
        try:
            reply = await box.calls.chat_said(request, "reporter")
            break
        except ActivityError as err:
            oversized = condense.oversized(err)
            if oversized is None or not findings:
                raise
            box.emit(
                "notice", f"the findings do not fit the reporter's context window: condensing ({oversized[0]:,} tokens)"
            )
            findings = await condense.condense_all(box, findings, *oversized)
    state.reporter_input = reply.shown
    reply = await checked_report(box, request, reply)  # an echo, the wrong language: asked again
    traced = every_plan and workflow.patched(statements.PATCH)
    if traced:  # invention, or none of the findings used: asked again, then the findings are the report
        reply = await statements.traced_report(box, request, reply, [text for _, text in findings])
    elif every_plan:  # recorded runs: judged by the share of statements held
        first = reply
        reply = await grounded_report(box, request, reply, [text for _, text in findings])
        reply = await supported_report(box, request, reply, first)  # stating what it was not shown: the same
    report = reply.content
    if traced:
        state.statements = reply.statements
        if statements.invented_too_much(reply.support, workflow.patched(statements.MANY_PATCH)):  # kept, not silently
            report = statements.marked(report, reply.statements)
        elif statements.contradicted(reply.statements) and workflow.patched(statements.CONTRADICTED_PATCH):
            box.warn(statements.contradicted_warning(reply.statements))
            report = statements.marked(report, statements.contradicted(reply.statements))
    if state.recheck:  # re-checked: the workflow writes what changed, from its own comparison
        report = with_changes(without_changes(report), changes_section(state.recheck))
    elif state.prior and not has_changes_section(report):
        report = with_changes(report, await _what_changed(box, report))
    report = verify_citations(report, list(state.sources.values()))
    if every_plan:
        report += sources_of_findings(report, findings, list(state.sources.values()), read_this_run(state))
    if partial and "partial" not in report[:500].lower():
        report = f"> **Partial report:** {partial}; it covers only what was found before.\n\n{report}"
    if every_plan and not state.sources:
        box.warn(NO_SOURCE)
        report = f"> **Warning:** {NO_SOURCE}\n\n{report}"
    if traced:
        report += statements.support_note(reply.support, reply.statements)
    return report


async def findings_report(box: Box, why: str, partial: str) -> str:
    """The report when the reporter failed (``why``): the research steps'
    findings, the passages they rest on and the run's sources, saying so
    (``workflows/fallback_report.py``; no model), with a warning."""
    s = box.state
    box.warn(
        f"the reporter failed ({why}): the report is the research steps' findings and the run's sources, "
        "not a report written by the model"
    )
    findings = [(step.title, step.execution_res) for step in s.finished() if step.execution_res]
    # What the pages say, beside what a weak researcher made of it (recorded runs: the findings only).
    passages = await evidence.passages_text(box) if workflow.patched("fallback-with-passages") else ""
    text = fallback_report(s.topic, findings, list(s.sources.values()), why, partial, s.background, passages)
    return verify_citations(text, list(s.sources.values()))


NO_SOURCE = (
    "this report rests on no source: no search result and no page was read in this run, "
    "so everything in it is the model's own text, not research"
)


def _report_request(
    box: Box, findings: list[tuple[str, str]], partial: str, trim: bool, passages: str | None | bool = False
) -> ModelRequest:
    """The reporter's request; ``passages`` (a blob of the evidence behind the
    findings) or False for a run recorded before the reporter read evidence
    and background together."""
    state = box.state
    sources = "\n".join(f"- [{c.title or c.url}]({c.url})" for c in state.sources.values())
    parts = [f"# Research question\n{state.topic}"]
    if partial:
        parts.append(
            f"# Note\nThe research stopped early ({partial}). Write the report from what was found, "
            "and say at its start that it is partial."
        )
    if told := [s for s in state.steers if s.reported]:  # notes the user sent while it ran (workflows/steering.py)
        parts.append(reporter_guidance(told))
    if state.plan:
        parts.append(f"# Plan: {state.plan.title}\n{state.plan.thought}")
    found = "\n\n".join(f"## {title}\n{text}" for title, text in findings)
    if passages is False:  # recorded before: the background only when nothing else was found
        parts.append(f"# Findings\n{found or state.background or '(none)'}")
    else:
        parts.append(f"# Findings\n{found or '(none)'}")
        if state.background:
            parts.append(f"# Background investigation (a first search on the question)\n{state.background}")
    parts.append(f"# Sources you may cite\n{sources or '(none)'}")
    if passages:
        parts.append(EVIDENCE_HEADING)
    changes: dict[str, str] = {}
    if state.prior:  # building on an earlier run: its report, and what changed since
        parts.insert(1, reporter_context(state.prior))
        changes = {"changes_since": state.prior.date}
        if state.recheck:  # what re-reading its sources found; the section is written for the model
            parts.insert(2, for_reporter(state.recheck))
            changes = {"recheck_since": state.prior.date}
    budget = box.request.evidence_tokens if passages else None
    pages = (
        statements.support_pages(state) if passages is not False and workflow.patched(statements.PAGES_PATCH) else []
    )
    return ModelRequest(
        role="reporter",
        prompt="reporter",
        variables=box.variables(report_style=box.request.report_style, **changes),
        messages=[
            Message(
                role="user",
                content="\n\n".join(parts) + ("\n\n" if passages else ""),
                blob=passages or None,
                budget=budget,
            )
        ],
        on_overflow="trim" if trim else "refuse",
        keep_shown=passages is not False,
        support_pages=pages,  # the pages read: a statement they state is stated (workflows/statements.py)
        topic=state.topic,  # what the report states beyond it is measured (ModelReply.held)
    )


EVIDENCE_HEADING = "# Evidence: passages of the pages the findings rest on, each after a link to its page"


async def _what_changed(box: Box, report: str) -> str:
    """The opening section on what changed since the earlier run, when the
    reporter did not write one: one more call with both reports."""
    prior = box.state.prior
    assert prior is not None
    request = ModelRequest(
        role="reporter",
        prompt="what_changed",
        variables=box.variables(changes_since=prior.date),
        messages=[Message(role="user", content=f"{reporter_context(prior)}\n\n# The new report\n{report}")],
    )
    reply = await box.calls.chat(request, "reporter · what changed")
    section = reply.content.strip()
    heading = f"## {CHANGES_HEADING} {prior.date}"
    return section if has_changes_section(section[:200]) else f"{heading}\n\n{section or 'Nothing was compared.'}"


def _key(url: str) -> str:
    return url.rstrip(".,;:").rstrip("/")


def sources_of_findings(
    report: str, findings: list[tuple[str, str]], seen: list[Citation], read: list[Citation] = ()
) -> str:
    """A report that cites no source the run retrieved ends with the sources
    its findings name (each traced claim names the page that holds it), or
    when they name none, with the pages the run read (what its findings were
    written from): a reporter that wrote no links still leaves the reader the
    pages. "" when the report cites some, or nothing was read."""
    if cited(report, seen):
        return ""
    named = cited("\n".join(text for _, text in findings), seen)
    if named:
        return f"\n\n## Sources of the findings\n\n{_listed(named)}\n"
    if read:
        return f"\n\n## Pages this research read\n\n{READ_NOTE}\n\n{_listed(read)}\n"
    return ""


READ_NOTE = "The report cites none of them; its findings were written from these pages."
MAX_LISTED = 12


def _listed(sources: list[Citation]) -> str:
    return "\n".join(f"- [{c.title or c.url}]({c.url})" for c in sources[:MAX_LISTED])


def read_this_run(state: RunState) -> list[Citation]:
    """The pages this run read (crawled with text), each once, in order."""
    pages: dict[str, Citation] = {}
    for result in state.pages_with_text():
        pages.setdefault(_key(result.sources[0].url), result.sources[0])
    return list(pages.values())


def cited(report: str, seen: list[Citation]) -> list[Citation]:
    """Sources the run actually retrieved and the report cites, in report order."""
    by_url = {_key(c.url): c for c in seen}
    out: list[Citation] = []
    for url in _URL.findall(report):
        source = by_url.pop(_key(url), None)
        if source:
            out.append(source)
    return out


def verify_citations(report: str, seen: list[Citation]) -> str:
    """Remove every URL the run never retrieved: a markdown link keeps its
    text and is marked unverified, a bare URL is replaced by a marker."""
    known = {_key(c.url) for c in seen}

    def link(match: re.Match) -> str:
        text, url = match.group(1), match.group(2)
        return match.group(0) if _key(url) in known else f"{text} {UNVERIFIED}"

    def bare(match: re.Match) -> str:
        url = match.group(0)
        trailing = url[len(url.rstrip(".,;:")) :]
        return url if _key(url) in known else UNVERIFIED + trailing

    return _URL.sub(bare, _LINK.sub(link, report))
