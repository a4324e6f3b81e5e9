"""The re-check's decisions and the section the workflow writes from it
(workflows/recheck.py, workflows/changes.py): pure functions, no Temporal.
What to read again, when nothing changed, what a run keeps for the next,
and "What changed since <date>" for every kind of change, including an
earlier run that kept nothing to compare with."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import CliError
from client.options import research_input
from workflows import changes, recheck, reporter
from workflows.models import Citation, PageRead, ResearchInput, SearchRun
from workflows.prior import PriorRun, with_changes
from workflows.recheck_models import FigureChange, PageCheck, PassageChange, Recheck, SearchCheck
from workflows.state import RunState
from workflows.tool_models import ToolResult

A, B = "http://news.example/a", "http://news.example/b"


def prior(**fields) -> PriorRun:
    base = dict(run_id="run-1", question="Q?", finished_at="2026-01-05T10:00:00", report="# R\n\n## Key Points\n- x\n")
    return PriorRun(**(base | fields))


def checked(*pages: PageCheck, searches: tuple[SearchCheck, ...] = (), **fields) -> Recheck:
    return Recheck(since="2026-01-05", run_id="run-1", today="2026-01-12", pages=list(pages), searches=list(searches),
                   **fields)  # fmt: skip


def same(url: str = A) -> PageCheck:
    return PageCheck(url=url, title="Page A", outcome="unchanged", page=PageRead(url=url, blob="sha256:" + "1" * 64))


# --- what is read again --------------------------------------------------------------


def test_the_cited_pages_then_the_others_read_are_read_again_with_what_the_run_kept_of_them():
    kept = PageRead(url=A, title="A", blob="sha256:" + "a" * 64, etag='"e1"', last_modified="Mon, 05 Jan 2026")
    earlier = prior(
        citations=[Citation(title="Page A", url=A + "/"), Citation(title="B", url=B), Citation(url="file:///doc.pdf")],
        pages=[kept, PageRead(url="http://news.example/uncited", blob="sha256:" + "c" * 64)],
    )
    requests, left = recheck.pages_to_check(earlier)
    assert [(r.url, r.title, r.blob, r.etag, r.last_modified) for r in requests] == [
        (A + "/", "Page A", kept.blob, '"e1"', "Mon, 05 Jan 2026"),  # a trailing slash is the same page
        (B, "B", None, None, None),  # cited, never read: read now, nothing to compare with
        (
            "http://news.example/uncited",
            "",
            "sha256:" + "c" * 64,
            None,
            None,
        ),  # read, not cited: a finding may rest on it
    ]  # a local document is not a web page
    assert left == 0


def test_a_run_that_cited_nothing_has_its_pages_read_again_and_many_are_bounded():
    earlier = prior(pages=[PageRead(url=f"http://x.example/{n}") for n in range(recheck.MAX_PAGES + 5)])
    requests, left = recheck.pages_to_check(earlier)
    assert len(requests) == recheck.MAX_PAGES and left == 5


def test_new_search_results_are_those_neither_run_had():
    result = ToolResult(content="", sources=[Citation(url=A), Citation(url=B + "/"), Citation(url=B)])
    assert recheck.new_results(result, {A}) == [Citation(url=B + "/")]


def test_the_schedules_own_question_needs_no_coordinator():
    earlier = prior(question="What is  the price of X?", locale="de-DE")
    handed = recheck.handed_on(ResearchInput(question="what is the price of x?", schedule="s"), earlier)
    assert handed and handed.kind == "handoff" and handed.locale == "de-DE"
    assert recheck.handed_on(ResearchInput(question="Something else?", schedule="s"), earlier) is None
    asked = ResearchInput(question="What is the price of X?", schedule="s", enable_clarification=True)
    assert recheck.handed_on(asked, earlier) is None  # the user asked to be asked


def test_who_rechecks():
    assert recheck.wanted(ResearchInput(question="q", schedule="s"))
    assert recheck.wanted(ResearchInput(question="q", continue_from="r", recheck=True))
    assert not recheck.wanted(ResearchInput(question="q", continue_from="r"))


# --- when nothing changed --------------------------------------------------------------


def test_nothing_changed_only_when_every_page_is_the_same_and_no_search_found_more():
    earlier = prior(pages=[], searches=[])
    assert recheck.nothing_changed(checked(same(), searches=(SearchCheck(query="q"),)), earlier)
    changed = same().model_copy(update={"outcome": "changed"})
    moved = same().model_copy(update={"moved_to": B})
    for page in (changed, moved, same().model_copy(update={"outcome": "gone"})):
        assert not recheck.nothing_changed(checked(page), earlier)
    for search in (SearchCheck(query="q", new=[Citation(url=B)]), SearchCheck(query="q", error="down")):
        assert not recheck.nothing_changed(checked(same(), searches=(search,)), earlier)
    not_compared = same().model_copy(update={"outcome": "not_compared"})
    assert not recheck.nothing_changed(checked(not_compared), earlier)  # unknown is not unchanged
    assert not recheck.nothing_changed(checked(), earlier)  # nothing to check: nothing to claim
    assert not recheck.nothing_changed(checked(same(), kept_nothing=True), earlier)
    assert not recheck.nothing_changed(checked(same()), prior(report_cut=True))  # cannot stand: not whole


# --- the section ---------------------------------------------------------------------


def test_the_section_lists_old_and_new_each_cited_and_names_what_is_gone_or_moved():
    change = PassageChange(old="It logged 4417 ships.", new="It logged 5120 ships.",
                           figures=[FigureChange(old="4417", new="5120")])  # fmt: skip
    page = PageCheck(url=A, title="Page [A]", outcome="changed", page=PageRead(url=A), changes=[change],
                     more_changes=2)  # fmt: skip
    added = PageCheck(url=B, title="B", outcome="changed", changes=[PassageChange(new="A new line.")],
                      page=PageRead(url=B))  # fmt: skip
    gone = PageCheck(url="http://x.example/g", title="G", outcome="gone", status=410)
    moved = same("http://x.example/m").model_copy(update={"title": "M", "moved_to": "http://y.example/m"})
    old = PageCheck(url="http://x.example/o", title="O", outcome="not_compared",
                    note="the earlier run kept no copy of this page")  # fmt: skip
    new = (SearchCheck(query="q1", new=[Citation(title="N", url="http://n.example/")]),
           SearchCheck(query="q2", new=[Citation(title="N", url="http://n.example/")]),
           SearchCheck(query="q3", error="the search failed"))  # fmt: skip
    text = changes.changes_section(checked(page, added, gone, moved, old, same(), searches=new))
    assert text.startswith("## What changed since 2026-01-05\n\n")
    assert (
        "- **4417 → 5120**: was “It logged 4417 ships.” ([Page (A)](http://news.example/a), read 2026-01-05); "
        "now “It logged 5120 ships.” ([Page (A)](http://news.example/a), read 2026-01-12)"
    ) in text
    assert "- New on the page: “A new line.” ([B](http://news.example/b), read 2026-01-12)" in text
    assert "- … and 2 more changed passage(s) on these pages." in text
    assert "**No longer available**\n\n- [G](http://x.example/g): gone (HTTP 410)" in text
    assert "**Moved**\n\n- [M](http://x.example/m) now leads to [M](http://y.example/m)" in text
    assert "- [N](http://n.example/) (searches “q1”, “q2”)" in text  # once, however many searches found it
    assert "- [O](http://x.example/o): the earlier run kept no copy of this page" in text
    assert "- the search “q3” failed now: the search failed" in text
    assert text.endswith("The other 1 source(s) read the same as then.")
    summary = recheck.summarise(checked(page, added, gone, moved, old, same(), searches=new))
    assert (summary.changed, summary.gone, summary.moved, summary.not_compared, summary.new_results) == (2, 1, 1, 1, 1)
    assert recheck.memo_line(summary) == (
        "changes since 2026-01-05: 2 source(s) changed, 1 source(s) gone, 1 source(s) moved, "
        "1 new search result(s) (1 not compared)"
    )


@pytest.mark.parametrize(
    "passage, after",
    [
        ("Data: https://stats.example/t1", "”"),  # the section's own closing quote
        ("The table is at «https://stats.example/t1» now", "» now”"),
        ("数据见https://stats.example/t1」。其余照旧", "」。其余照旧”"),  # CJK: no blank ends the passage
        ("(see https://stats.example/t1)", ")”"),
    ],
)
def test_a_passage_that_ends_in_a_url_keeps_its_closing_quote_and_the_rest(passage, after):
    """Issue 36, item 7c: the unverified-URL remover took a closing ” (and
    in CJK text the rest of the passage, up to the next blank) for part of
    the URL, and removed them with it."""
    page = PageCheck(url=A, title="A", outcome="changed", page=PageRead(url=A),
                     changes=[PassageChange(old="Data: none.", new=passage)])  # fmt: skip
    section = changes.changes_section(checked(page))
    shown = reporter.verify_citations(section, [Citation(url=A)])  # as the workflow checks it (recheck.py)
    assert f"“{passage.split('https://')[0]}{reporter.UNVERIFIED}{after} ([A]({A}), read 2026-01-12)" in shown
    kept = reporter.verify_citations(section, [Citation(url=A), Citation(url="https://stats.example/t1")])
    assert kept == section  # a URL the run read: nothing removed
    assert [c.url for c in reporter.cited(section, [Citation(url="https://stats.example/t1")])] == [
        "https://stats.example/t1"
    ]


def test_nothing_changed_is_one_line():
    text = changes.changes_section(checked(same(), same(B), searches=(SearchCheck(query="q"),)))
    assert text == (
        "## What changed since 2026-01-05\n\nNothing changed: the 2 source(s) behind the report of 2026-01-05 "
        "say the same on 2026-01-12, and its 1 search(es) found nothing new."
    )
    assert recheck.memo_line(recheck.summarise(checked(same()))) == "no changes since 2026-01-05"


def test_a_report_keeps_one_changes_section_under_its_title():
    earlier = (
        "# Title\n\n## What changed since 2025-12-29\n\nold news\n\n### detail\n\nmore old news\n\n"
        "## Key Points\n- x\n\n## Key Citations\n- [A](http://a)\n"
    )
    stripped = changes.without_changes(earlier)
    assert stripped == "# Title\n\n## Key Points\n- x\n\n## Key Citations\n- [A](http://a)\n"
    again = with_changes(stripped, changes.changes_section(checked(same())))
    assert again.startswith("# Title\n\n## What changed since 2026-01-05\n\nNothing changed")
    assert again.count("## Key Points") == 1 and again.count("What changed since") == 1
    assert changes.without_changes("# T\n\n### What changed since x\nold\n### Kept\nyes\n") == "# T\n\n### Kept\nyes\n"


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.lists(
        st.sampled_from(["#", "##", "###", "####", " ", "\n", "What changed since", "Key", "a", "]"]), max_size=400
    )
)
def test_any_report_loses_its_changes_sections_and_nothing_else_raises(pieces):
    stripped = changes.without_changes("".join(pieces))
    for line in stripped.split("\n"):
        head = line.lstrip()
        level = len(head) - len(head.lstrip("#"))
        assert not (head.startswith("#") and level <= 3 and head[level:].strip().startswith("What changed since"))


def test_a_link_title_cannot_break_its_link():
    assert changes.link("a [b]\n(c)", A) == f"[a (b) (c)]({A})"
    assert changes.link("", A) == f"[{A}]({A})"


# --- what a run keeps for the next ---------------------------------------------------


def test_a_run_keeps_the_pages_it_read_and_carries_the_earlier_ones_it_did_not():
    state = RunState(topic="t", locale="en-US")
    state.prior = prior(
        pages=[PageRead(url=A, blob="sha256:" + "0" * 64), PageRead(url=B, blob="sha256:" + "b" * 64)],
        searches=[SearchRun(query="old", urls=[A]), SearchRun(query="q", urls=[])],
    )
    state.crawled[A] = ToolResult(content="", blob="sha256:" + "1" * 64, sources=[Citation(title="A", url=A)],
                                  etag='"2"')  # fmt: skip
    state.crawled["http://bad.example"] = ToolResult(content="Error: gone", error=True)
    state.searched["q"] = ToolResult(content="", sources=[Citation(url=B)])
    state.searched["failed"] = ToolResult(content="Error", error=True)
    kept = recheck.kept(state)
    assert [(p.url, p.blob, p.etag) for p in kept["pages"]] == [
        (A, "sha256:" + "1" * 64, '"2"'),  # read again now: the new reading
        (B, "sha256:" + "b" * 64, None),  # not read again: the earlier copy stays comparable
    ]
    assert [(s.query, s.urls) for s in kept["searches"]] == [("q", [B]), ("old", [A])]
    assert kept["recheck"] is None


def test_recheck_without_a_run_to_build_on_is_one_line():
    with pytest.raises(CliError, match=r"^invalid run options: --recheck: .*give --continue-from ID$"):
        research_input(argparse.Namespace(question="q", recheck=True))
    given = research_input(argparse.Namespace(question="q", recheck=True, continue_from="research-1"))
    assert given.recheck and given.continue_from == "research-1"
