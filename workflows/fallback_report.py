"""The report a run ends with when its reporter fails after the research has
finished (its model call failed after all retries, it replied nothing, or it
repeated its instructions twice): no model needed, the research steps'
findings as they were written and the sources the run read, saying plainly
at the top that the reporter failed and why. A pure function."""

from __future__ import annotations

from workflows.models import Citation

MAX_SOURCES = 100  # sources listed at most


def fallback_report(
    topic: str,
    findings: list[tuple[str, str]],
    sources: list[Citation],
    why: str,
    partial: str = "",
    background: str = "",
    passages: str = "",
) -> str:
    """Markdown: a title, a note saying the reporter failed (``why``) and,
    when the research stopped early too, why (``partial``); each step's
    findings under its title (the background investigation's results when no
    step has any); the passages of the pages the findings rest on, each after
    a link to its page (``passages``); the sources the run read."""
    first = " ".join(topic.split())
    title = first if len(first) <= 120 else first[:119] + "…"
    early = f" The research also stopped early: {partial}." if partial else ""
    parts = [
        f"# {title or 'Research report'}",
        f"> **Partial report:** the reporter failed ({' '.join(why.split())[:500]}), so no report was written. "
        f"Below are the research steps' findings as the researchers wrote them, and the sources the run read; "
        f"nothing here was checked or summarised by the reporter.{early}",
    ]
    if findings:
        parts.append("## Findings")
        parts += [f"### {' '.join(step.split())}\n\n{text.strip()}" for step, text in findings]
    elif background.strip():
        parts.append(f"## What the background search found\n\n{background.strip()}")
    else:
        parts.append("## Findings\n\nNo research step finished, so there are no findings.")
    if passages.strip():
        parts.append(
            f"## What the pages say\n\nThe passages of the pages read that the findings rest on:\n\n{passages.strip()}"
        )
    listed = sources[:MAX_SOURCES]
    if listed:
        parts.append("## Sources the run read")
        parts.append("\n".join(f"- [{_link_text(c.title or c.url)}]({c.url})" for c in listed))
        if len(sources) > len(listed):
            parts.append(f"({len(sources) - len(listed)} more not listed.)")
    return "\n\n".join(parts) + "\n"


def _link_text(text: str) -> str:
    return " ".join(text.replace("[", "(").replace("]", ")").split())[:200]
