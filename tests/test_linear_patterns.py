"""Regular expressions that see model, page, document or user text run in
linear time (issue 20, item 2): each hostile input below kept the worker's
event loop busy for minutes with the patterns they replace, and takes
milliseconds now. Each runs in a child process that is killed after
``BOUND`` seconds, so a catastrophic pattern fails the test instead of
hanging it; the bound is generous, not a measurement.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BOUND = 60  # seconds; the old patterns took from minutes to hours on these inputs


def finishes(code: str, bound: float = BOUND) -> str:
    """Run ``code`` in a child Python; its output, or the test fails (a
    timeout fails it too)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=bound,
            env=env,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {bound} s: a pattern backtracks on this input")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_tool_call_of_a_fence_and_spaces_is_read_at_once():
    out = finishes(
        """
        from workflows.model_output import load_json, repair_arguments
        print(repr(repair_arguments("```" + " " * 20_000 + "a")[:3]))
        print(load_json("```json" + " " * 20_000 + "```")[1])
        print(load_json("```json\\n{\\"a\\": 1}\\n```"))
        """
    )
    assert out.splitlines()[:2] == ["'```'", "the reply is empty"]
    assert out.splitlines()[-1] == "({'a': 1}, None)"


def test_a_json_tool_reply_of_spaces_is_read_at_once():
    out = finishes(
        """
        from activities.text_tools import parse_reply
        text, calls = parse_reply("{" + " " * 100_000 + "a", ["web_search"])
        print(len(text), calls)
        print(parse_reply('```json\\n{"tool_calls": [{"name": "web_search", "arguments": {"query": "q"}}]}\\n```',
                          ["web_search"])[1][0].name)
        """
    )
    assert out.splitlines() == ["100002 []", "web_search"]


@pytest.mark.parametrize(
    "markdown",
    [
        '"# a" + " " * 20_000 + "b"',  # the lazy heading pattern: cubic
        '"#" + " " * 20_000 + "a" + " " * 20_000 + "b"',
        '"# t" + "\\n" * 300_000 + "--x"',  # slide separators spanning blank lines: quadratic
        '"# t\\n" + "<!--" * 100_000',  # notes never closed: quadratic
        '"# t\\n|--" + " " * 100_000 + "x"',  # a table rule: quadratic
        '"# t\\n- " + "[" * 200_000',  # links in a bullet: quadratic
        '"# t\\n- " + "[a](" * 50_000',
    ],
)
def test_slides_markdown_that_backtracked_is_parsed_at_once(markdown):
    out = finishes(
        f"""
        from activities.deck import parse_marp
        slides = parse_marp({markdown})
        print(len(slides))
        """
    )
    assert int(out) >= 1


def test_slides_markdown_still_reads_headings_bullets_tables_and_notes():
    from activities.deck import parse_marp

    slides = parse_marp(
        "---\nmarp: true\n---\n# One ##\n- a [link](https://x.org/a_(b)) and **bold**\n  - sub\n<!-- said -->\n"
        "---\n## Two\n| h | i |\n|:--|--:|\n| 1 | 2 |\n\n---\n\n---\n# C#\ntext"
    )
    assert [(s.title, s.bullets, s.table, s.notes) for s in slides] == [
        ("One", [(0, "a link and bold"), (1, "sub")], [], "said"),
        ("Two", [], [["h", "i"], ["1", "2"]], ""),
        ("C", [(0, "text")], [], ""),
    ]


def test_a_line_separator_inside_a_bullet_keeps_the_whole_bullet():
    """Issue 27: a U+2028 in a slide's bullet split it, and the half without
    its dash was dropped."""
    from activities.deck import parse_marp

    (slide,) = parse_marp("# Tides\n- The barrage\u2028opened in 1966\n- It still runs")
    assert slide.bullets == [(0, "The barrage\u2028opened in 1966"), (0, "It still runs")]


def test_a_report_full_of_brackets_has_its_citations_checked_at_once():
    out = finishes(
        """
        from workflows.reporter import verify_citations
        from workflows.models import Citation
        seen = [Citation(url="https://ok.org/a", title="ok")]
        print(len(verify_citations("[" * 200_000, seen)))
        print(len(verify_citations("[a](http://" * 30_000, seen)))
        print(verify_citations("[ok](https://ok.org/a) [bad](https://bad.org/x)", seen))
        print(len(verify_citations("“https://x.org/a”" * 30_000 + "https://" + "a" * 200_000, seen)))
        """
    )
    lines = out.splitlines()
    assert lines[0] == "200000" and int(lines[1]) > 0
    assert lines[2] == "[ok](https://ok.org/a) bad [unverified source removed]"
    assert int(lines[3]) > 0  # quotes that end URLs (issue 36, item 7c): still one pass


def test_a_page_of_open_tags_is_converted_at_once():
    out = finishes(
        """
        from activities.documents import CONVERTERS
        from activities.search.base import text_of
        html = CONVERTERS["text/html"]
        print(repr(html(b"<title>" * 50_000, None, "http://x")[0]))
        print(repr(html(b"<meta" * 50_000 + b"<title>T</title>", None, "http://x")[0]))
        print(len(text_of("<" * 200_000)), text_of("<b>bold</b> &amp; <i>x</i>"))
        """
    )
    assert out.splitlines() == ["''", "'T'", "200000 bold & x"]


def test_the_title_tag_is_still_found():
    from activities.documents import title_tag

    assert title_tag("<html><TITLE lang=en>The &amp; title</Title>") == "The &amp; title"
    assert title_tag("<title>never closed") == ""


def test_a_meta_charset_followed_by_spaces_is_read_at_once():
    """Whatever the length it is given (the crawler gives it a page's first
    4 KB): 200,000 spaces after ``charset=`` took minutes."""
    out = finishes(
        """
        from activities.documents import _META_CHARSET
        print(_META_CHARSET.search(b"<meta charset=" + b" " * 200_000 + b"!"))
        """
    )
    assert out.strip() == "None"


def test_the_meta_charset_is_still_found():
    from activities.documents import _META_CHARSET

    for tag, name in (
        (b'<META charset="utf-8">', b"utf-8"),
        (b"<meta charset = ' iso-8859-1 '>", b"iso-8859-1"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">', b"windows-1252"),
    ):
        assert _META_CHARSET.search(b"<head>" + tag).group(1) == name


def test_the_demo_reporter_reads_a_long_line_of_brackets_at_once():
    """The demo model's reporter picks "- text [title](url)" lines from the
    findings, which can quote a local document (``demo --resource``): a line
    of 200,000 "[" took minutes; the linked bullets are still found."""
    out = finishes(
        """
        from client.demo.text import report
        findings = "# Findings\\n- " + "[" * 200_000 + "\\n- Keel laid in 1911 [Yard](http://e.x/keel)\\n"
        print("Keel laid in 1911 [Yard](http://e.x/keel)" in report(["# Research Topic\\nkeels", findings]))
        """
    )
    assert out.strip() == "True"


def test_a_local_document_with_a_long_heading_is_split_at_once():
    out = finishes(
        """
        from pathlib import Path
        from activities.local_docs.splitter import read_document, split_sections
        hostile = "# a" + " " * 50_000 + "b\\n\\ntext\\n# " + "[" * 100_000 + "\\nmore"
        print(len(split_sections(hostile)))
        title, sections = read_document(Path("/tmp/x.md"), hostile.encode())
        print(len(title))
        print(read_document(Path("/tmp/y.md"), b"intro\\n# The [title](http://x) ##\\n## Sub\\nbody")[0])
        """
    )
    lines = out.splitlines()
    assert int(lines[0]) >= 2 and lines[1] == "3" and lines[2] == "The title"


def test_a_report_with_a_long_sources_heading_is_exported_at_once():
    out = finishes(
        """
        from client.export import without_own_sources
        print(len(without_own_sources("## Sources" + " " * 50_000 + "x")))
        print(len(without_own_sources("## Sources\\n" * 30_000)))
        print(repr(without_own_sources("# R\\ntext\\n## Sources\\n- a\\n##References\\n- b")))
        print(repr(without_own_sources("# R\\n## Sources\\n- a\\n## Next\\nmore")))
        """
    )
    lines = out.splitlines()
    assert lines[0] == "50011" and lines[1] == str(11 * 29_999)
    assert lines[2] == repr("# R\ntext\n") and lines[3] == repr("# R\n## Sources\n- a\n## Next\nmore")


# --- every module-level pattern, against inputs built to make it backtrack -----------

SCANNED = [
    "workflows.model_output",
    "workflows.grounding",
    "workflows.evidence",
    "activities.evidence",
    "activities.leads",
    "activities.seen",
    "client.demo.reading",
    "workflows.clean",
    "workflows.echoes",
    "infra.eval_score",
    "workflows.languages",
    "workflows.podcast",
    "workflows.reporter",
    "activities.deck",
    "activities.documents",
    "activities.llm",
    "activities.overflow",
    "activities.reading",
    "activities.search.base",
    "activities.text_tools",
    "activities.tokens",
    "activities.sandbox.e2b",
    "activities.mcp.config",
    "activities.mcp.names",
    "activities.local_docs.splitter",
    "activities.local_docs.index",
    "client.export",
    "activities.figures",
    "activities.statement_text",
    "activities.material",
    "activities.expressions",
    "activities.number_words",
    "activities.units",
    "activities.dates",
]


def test_no_module_level_pattern_backtracks_on_a_pumped_input():
    """Each compiled pattern of the modules that see outside text, on a
    prefix, one fragment repeated to 20,000 characters and a character that
    fails the match: the shapes that made the patterns above take minutes.
    (Patterns written inline in functions are single character classes or
    anchored at a line's start; the tests above cover those that were not.)"""
    out = finishes(
        f"""
        import importlib, re
        patterns = []
        for name in {SCANNED!r}:
            for value in vars(importlib.import_module(name)).values():
                items = value if isinstance(value, (list, tuple)) else [value]
                for item in items:
                    item = item[0] if isinstance(item, tuple) and item else item
                    if isinstance(item, re.Pattern):
                        patterns.append((name, item))
        prefixes = ["", "#", "# a", "```", "[", "[a](", "](http://", "|", "-", "<!--", "<title", "<meta", "sk-",
                    "bearer ", "http://", "n_ctx"]
        pumps = [" ", "\\n", "\\t", "#", "`", "-", "[", "<", "|", "a", "0", "(", " \\n", "[a](http://", "<!--",
                 "\\n#", ":", ". ", "--", "a:\\n", "{{"]
        for name, pattern in patterns:
            for prefix in prefixes:
                for pump in pumps:
                    text = prefix + pump * (20_000 // len(pump)) + "\\x00!"
                    if isinstance(pattern.pattern, bytes):
                        text = text.encode()
                    for _ in pattern.finditer(text):
                        pass
                    pattern.match(text)
        print(len(patterns))
        """,
        bound=240,
    )
    assert int(out) >= 30


def test_the_echo_checks_and_the_eval_reader_are_linear_on_cjk_and_digits():
    """Issue 31: words of a reply against its prompt, numbers against CJK
    characters, link-only lines, a text's script."""
    out = finishes(
        """
        from infra.eval_score import link_only, numbers_in, own_text
        from workflows.echoes import echo_share
        from workflows.languages import script_share
        for pump in ("增1.", "1,", "增", "1" * 7 + ".", "[a](http://x" + "(" , "- [", "https://" + "a" * 50):
            text = pump * (200_000 // len(pump))
            numbers_in(text)
            link_only(text)
            own_text(text, "q " * 1000, [text[:20_000]])
            echo_share(text, text)
            script_share(text, "zh-CN")
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_a_lead_is_found_at_once_in_pages_of_capitals():
    """The names a step's best passages introduce (activities/leads.py), on
    pages of capitalised words and of small words between capitals."""
    out = finishes(
        """
        from activities.leads import lead
        for pump in ("A", "Ab ", "Ab of ", "Ab-", "A'", "Ab \t"):
            text = pump * (400_000 // len(pump))
            lead(["the question"], "the question", [text[:2_000]] * 3, text)
        print("ok")
        """
    )
    assert out.strip() == "ok"


SUPPORT_PUMPS = (
    ("A. ", "Aa ", "1 ", "12.", "Tern-4 ", "the of and ", "x" * 50 + " "),
    (
        "The Selm is 12 km. ",
        "1,2,3,4,5,6,7,8 ",
        "[1] ",
        "| 1 | 2.5 | 3,000 |\\n",
        "9" * 40 + " ",
        "about 1,960 t, 36.5 %; ",
    ),
    (  # shown arithmetic, spelled numbers, titles, spaced thousands (activities/expressions.py, number_words.py)
        "(1 × 2 + ",
        "1.5^(1/",
        "= 2 ≈ ",
        "Dr. Ab ",
        "forty-eight hundred and ",
        "一百二十",
        "1 234 ",
        "Table 2.1 ",
        "2021-03-",
    ),
    (  # working in LaTeX, rates per so many (activities/figures.py unlatex, units.py per_scales)
        "\\frac{1}{",
        "\\frac{",
        "{,}",
        "^{",
        "\\left(\\dfrac{2{,}675}{1{,}960}\\right)^{\\frac{1}{4}} ",
        "\\text{",
        "per 1,000 ",
        "per 1,000,",
    ),
)


@pytest.mark.parametrize("pumps", SUPPORT_PUMPS)
def test_how_a_reports_statements_are_supported_is_measured_at_once_on_hostile_text(pumps: tuple[str, ...]):
    """A reply's statements against what it was shown (activities/support.py):
    sentence ends, capitals, digits, separators, footnote markers, table
    rows and paragraphs of 600,000 characters, the report in the material's
    language so that every statement is looked up."""
    out = finishes(
        f"""
        from activities.support import support_of
        said = "The Tern-4 gauge is made in Kelderby. The RP-9 gauge costs 950 pounds. Olvane was founded in 1921.\\n"
        judged = 0
        for pump in {pumps!r}:
            report = said + pump * (100_000 // len(pump))
            material = said * 20 + pump * (600_000 // len(pump))
            judged += support_of(report, material)[0] is not None
            support_of(material, report)
        print(judged)
        """
    )
    assert int(out) == len(pumps)  # each judged (the report states the three sentences), none took minutes


def test_a_passage_full_of_link_openings_is_escaped_at_once():
    """What a passage's text that looks like headers is escaped with (issue 36)."""
    out = finishes(
        """
        from activities.evidence import body, header_url
        for hostile in ("[" * 200_000, "[a](" * 100_000, "[a](b" * 100_000 + ")", "[](" + "(" * 200_000,
                        "[a]((" * 100_000, "\\\\" * 200_000 + "[a]:", "[a] " * 100_000):
            print(len(body(hostile)) >= len(hostile.strip()))
        print(len(header_url("http://x/" + "(" * 200_000)))
        """
    )
    assert out.splitlines() == ["True"] * 7 + ["600009"]
