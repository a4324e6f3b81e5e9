"""Step 6 of the flow, the reporter: one model call writes the markdown
report from the plan and the findings, in the run's locale and report style.

``verify_citations`` and ``cited`` are pure functions: the report may cite
only sources the run actually retrieved.
"""

from __future__ import annotations

import re

from temporalio import workflow

from workflows.box import Box

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.models import Citation, Message, ModelRequest

_URL = re.compile(r"(?:https?|file)://[^\s)\]>\"'<]+")
_LINK = re.compile(r"\[([^\]]*)\]\(((?:https?|file)://[^\s)]+)\)")
UNVERIFIED = "[unverified source removed]"


async def write_report(box: Box, partial: str = "") -> str:
    """The report; ``partial`` says why the research stopped early (the report
    then says it is partial)."""
    state = box.state
    sources = "\n".join(f"- [{c.title or c.url}]({c.url})" for c in state.sources.values())
    parts = [f"# Research question\n{state.topic}"]
    if partial:
        parts.append(
            f"# Note\nThe research stopped early ({partial}). Write the report from what was found, "
            "and say at its start that it is partial."
        )
    if state.plan:
        parts.append(f"# Plan: {state.plan.title}\n{state.plan.thought}")
    parts.append(f"# Findings\n{state.findings() or state.background or '(none)'}")
    parts.append(f"# Sources you may cite\n{sources or '(none)'}")
    reply = await box.calls.chat_said(
        ModelRequest(
            role="reporter",
            prompt="reporter",
            variables=box.variables(report_style=box.request.report_style),
            messages=[Message(role="user", content="\n\n".join(parts))],
        ),
        "reporter",
    )
    report = verify_citations(reply.content, list(state.sources.values()))
    if partial and "partial" not in report[:500].lower():
        report = f"> **Partial report:** {partial}; it covers only what was found before.\n\n{report}"
    return report


def _key(url: str) -> str:
    return url.rstrip(".,;:").rstrip("/")


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
