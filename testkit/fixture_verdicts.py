"""What a fixture run made of a fixture (``testkit/fixture_model.py``): a
strong output shipped as written, or asked for again, replaced by the
findings' report, changed; a weak one caught or shipped. Shared by
``tests/test_strong_outputs.py`` and ``testkit/guard_probe.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from testkit.fixture_model import Fixture, normal
from testkit.fixture_runs import Ran
from workflows.fallback_report import fallback_report
from workflows.reply_checks import NOTHING_USABLE
from workflows.reporter import UNVERIFIED, verify_citations
from workflows.statements import MARK, OTHERWISE_MARK

FALLBACK_MARK = fallback_report("q", [], [], "x").split("\n\n")[1][:40]  # "> **Partial report:** the reporter failed"


@dataclass
class Outcome:
    fixture: Fixture
    ran: Ran | None
    asked: int  # requests for the fixture in its run
    served: int  # answered from it
    verdict: str  # "as written" / "re-asked" / "replaced" / "changed" / a weak one's "caught" / "shipped"
    why: str = ""


def verdict(f: Fixture, ran: Ran, asked: int, served: int, web: str, weak: bool) -> Outcome:
    """What the run ``ran`` made of fixture ``f`` (asked ``asked`` times,
    answered from it ``served`` times; the corpus web at ``web``): a strong
    one "as written" or "re-asked", "replaced", "changed", "failed"; a weak
    one (``weak``) "caught" or "shipped" (one of its invented replies is the
    report as written)."""
    result = ran.result
    text = f.replies[0].replace("{web}", web)
    if result.status != "completed":
        return Outcome(f, ran, asked, served, "failed", f"run {result.status}")
    if f.role == "reporter":
        shipped = normal(text) in normal(result.final_report)
        if weak:  # caught: none of its invented replies is the report as written, unmarked
            invented = [f.replies[n].replace("{web}", web) for n in f.invented or range(len(f.replies))]
            as_shipped = [normal(verify_citations(t, result.citations))[:2000] for t in invented]  # links checked
            kept = any(t and t in normal(result.final_report) for t in as_shipped)
            marks = (MARK, OTHERWISE_MARK)  # a mark after its last statement leaves it a prefix
            kept = kept and not any(m in result.final_report for m in marks)
            return Outcome(f, ran, asked, served, "shipped" if kept else "caught", said(result, asked))
        if FALLBACK_MARK in result.final_report:
            return Outcome(f, ran, asked, served, "replaced", said(result, asked))
        if asked > 1:
            return Outcome(f, ran, asked, served, "re-asked", said(result, asked))
        if not shipped or UNVERIFIED in result.final_report or result.warnings:
            return Outcome(f, ran, asked, served, "changed", said(result, asked))
        return Outcome(f, ran, asked, served, "as written")
    if f.role == "planner":
        wanted = [s.get("title") for s in json.loads(text).get("steps", [])] if text.lstrip().startswith("{") else []
        used = [s.title for s in result.plan.steps] if result.plan else []
        if weak:
            return Outcome(f, ran, asked, served, "shipped" if used == wanted else "caught", f"plan: {used}")
        ok = used == wanted and served == 1
        return Outcome(f, ran, asked, served, "as written" if ok else "re-asked", f"plan: {used}, served {served}")
    steps = [s for s in (result.plan.steps if result.plan else []) if not f.step or normal(s.title) == normal(f.step)]
    findings = "\n".join(s.execution_res or "" for s in steps)
    if weak:
        kept = normal(text)[:300] in normal(findings)
        return Outcome(f, ran, asked, served, "shipped" if kept else "caught", findings[:200])
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    have = [line.strip() for line in findings.splitlines()]
    missing = [line for line in lines if not any(h.startswith(line) for h in have)]
    ok = served == 1 and not missing and NOTHING_USABLE.split(":")[0] not in findings
    why = f"served {served}; missing {missing[:2]}; findings: {findings[:300]!r}"
    return Outcome(f, ran, asked, served, "as written" if ok else "changed", why)


def said(result, asked: int) -> str:
    """What a verdict says of its run: the reporter's calls, warnings and
    statements not found in the sources, the report's start."""
    unsupported = [s.text[:120] for s in result.statements if s.support == "unsupported"]
    return (
        f"reporter called {asked}x; warnings {result.warnings}; not found in the sources: {unsupported}; "
        f"report starts {result.final_report[:160]!r}"
    )
