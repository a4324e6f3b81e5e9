"""Reports as files to share: markdown, a self-contained HTML page, or JSON.

``render(result, fmt)`` turns a run's ``ResearchResult`` into text:

- ``md``: the report's markdown as the reporter wrote it;
- ``json``: the whole result (``ResearchResult`` JSON, loads back with
  ``ResearchResult.model_validate_json``);
- ``html``: one standalone HTML5 document: inline CSS only, no scripts, fonts,
  or external images, so it works offline, prints well and can be mailed
  around. The report is rendered from markdown with markdown-it-py with raw HTML
  disabled (model output is escaped, never executed); only http(s), file and
  in-page ``#`` links become links, and they open with
  ``rel="noopener noreferrer"``. A "Sources" list of the run's citations and a
  footer with the run's usage follow the report.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html import escape
from typing import Literal, get_args

from markdown_it import MarkdownIt
from markdown_it.token import Token

from client.wording import usage_text
from workflows.models import Citation, ResearchResult

Format = Literal["md", "html", "json"]
FORMATS: tuple[str, ...] = get_args(Format)

# What may become a link: absolute http(s) and file URLs, and in-page anchors.
_LINK_URL = re.compile(r"^(?:https?://|file:)", re.IGNORECASE)
# What an <img> may load: only images embedded in the page itself.
_EMBEDDED_IMAGE = re.compile(r"^data:image/(?:png|gif|jpeg|webp);", re.IGNORECASE)
_SAFE_REL = "noopener noreferrer"


def render_text(result: ResearchResult, fmt: Format = "md") -> str:
    """The report as text: md, html or json (``client/report_files.py``
    renders every format, PDF and Word included)."""
    if fmt == "md":
        return result.final_report
    if fmt == "json":
        return result.model_dump_json(indent=2)
    if fmt == "html":
        return render_html(result)
    raise ValueError(f"unknown text format {fmt!r}; expected one of {', '.join(FORMATS)}")


# --- links -----------------------------------------------------------------------


def is_link_url(url: str) -> bool:
    """True for URLs that may become links (http, https, file)."""
    return bool(_LINK_URL.match(url))


def _valid_markdown_url(url: str) -> bool:
    # Anything else stays literal text in the rendered report.
    return is_link_url(url) or url.startswith("#") or bool(_EMBEDDED_IMAGE.match(url))


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.validateLink = _valid_markdown_url  # type: ignore[method-assign]
    return md


def _safe_inline(md: MarkdownIt, children: list[Token]) -> list[Token]:
    """Links get safe attributes; a data: link loses its <a>; images that would
    load something from outside the page become links to it instead."""
    out: list[Token] = []
    unwrap = False
    for token in children:
        if token.type == "link_open":
            href = str(token.attrGet("href") or "")
            if href.startswith("#"):
                out.append(token)
            elif is_link_url(href):
                token.attrSet("rel", _SAFE_REL)
                token.attrSet("target", "_blank")
                out.append(token)
            else:
                unwrap = True
            continue
        if token.type == "link_close" and unwrap:
            unwrap = False
            continue
        if token.type == "image":
            src = str(token.attrGet("src") or "")
            alt = md.renderer.renderInlineAsText(token.children or [], md.options, {}) or src
            if _EMBEDDED_IMAGE.match(src):
                out.append(token)
            elif is_link_url(src) and not unwrap:
                link = Token("link_open", "a", 1)
                link.attrs = {"href": src, "rel": _SAFE_REL, "target": "_blank"}
                out += [link, Token("text", "", 0, content=alt), Token("link_close", "a", -1)]
            else:
                out.append(Token("text", "", 0, content=alt))
            continue
        out.append(token)
    return out


# --- HTML ------------------------------------------------------------------------


def _lang(locale: str) -> str:
    tag = re.sub(r"[^A-Za-z0-9-]", "", (locale or "").replace("_", "-")).strip("-")
    return tag or "en"


def _sources(citations: list[Citation]) -> str:
    seen: set[str] = set()
    items: list[str] = []
    for citation in citations:
        url = citation.url.strip()
        if not url or url in seen:
            continue
        seen.add(url)
        title = escape(citation.title.strip() or url)
        shown = escape(url)
        if is_link_url(url):
            items.append(
                f'<li><a href="{escape(url, quote=True)}" rel="{_SAFE_REL}" target="_blank">{title}</a>'
                f'<br><span class="url">{shown}</span></li>'
            )
        else:  # javascript:, data: and the like stay text
            items.append(f'<li>{title}<br><span class="url">{shown}</span></li>')
    if not items:
        return ""
    return (
        '<section class="sources" id="sources">\n<h2>Sources</h2>\n<ol>\n' + "\n".join(items) + "\n</ol>\n</section>\n"
    )


# Given a table's cells (row by row, as markdown text), the class its <table> gets, if any.
TableClass = Callable[[list[list[str]]], str | None]


def _mark_tables(tokens: list[Token], table_class: TableClass) -> None:
    table: Token | None = None
    rows: list[list[str]] = []
    for token in tokens:
        if token.type == "table_open":
            table, rows = token, []
        elif token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and table is not None and rows:
            rows[-1].append(token.content)
        elif token.type == "table_close" and table is not None:
            if name := table_class(rows):
                table.attrSet("class", name)
            table = None


def report_html(markdown: str, table_class: TableClass | None = None) -> tuple[str, str]:
    """The report's first heading and its body as HTML, with no raw HTML and
    only safe links and images (shared by the HTML export and the desk).
    ``table_class`` names a class for each table (the PDF's wide tables)."""
    md = _markdown()
    env: dict = {}
    tokens = md.parse(markdown, env)
    if table_class is not None:
        _mark_tables(tokens, table_class)
    title = ""
    for index, token in enumerate(tokens):
        if token.type == "inline" and token.children is not None:
            token.children = _safe_inline(md, token.children)
            if not title and index and tokens[index - 1].type == "heading_open":
                title = md.renderer.renderInlineAsText(token.children, md.options, env).strip()
    return title, md.renderer.render(tokens, md.options, env)


def sources_html(citations: list[Citation]) -> str:
    return _sources(citations)


GENERIC_TITLES = {"report", "research report", "final report", "scripted report", "the report"}
# Read line by line from the end: linear whatever the report (a pattern
# that looked ahead to the end of the text from every candidate was not).
_SOURCES_HEADING = re.compile(r"(?i)#{1,6}[ \t]*(?:key[ \t]+)?(?:citations|sources|references)")
_HEADING = re.compile(r"#{1,6}[ \t]")


def without_own_sources(markdown: str) -> str:
    """The report without the model's own list of sources at its end (a
    sources heading with no heading after it; the page lists the run's
    verified sources once, below the report)."""
    lines = markdown.split("\n")
    found = None
    for n in range(len(lines) - 1, -1, -1):
        line = lines[n]
        if _SOURCES_HEADING.fullmatch(line.rstrip(" \t").rstrip("#").rstrip(" \t")):
            found = n
        if _HEADING.match(line):
            break  # a sources heading above this one has a heading after it
    if found is None:
        return markdown
    return "\n".join(lines[:found]).rstrip() + "\n"


def render_html(result: ResearchResult, table_class: TableClass | None = None) -> str:
    markdown = without_own_sources(result.final_report) if result.citations else result.final_report
    title, body = report_html(markdown, table_class)
    if not title or title.strip().lower() in GENERIC_TITLES:
        title = (result.plan.title if result.plan else "") or result.question or title or "Research report"
    status = "" if result.status == "completed" else f" · status: {escape(result.status)}"
    if result.finished_at:
        status += f" · {escape(result.finished_at[:10])}"
    return f"""<!DOCTYPE html>
<html lang="{escape(_lang(result.locale), quote=True)}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="referrer" content="no-referrer">
<meta name="generator" content="deepresearch">
<title>{escape(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<main>
<article class="report">
{body}</article>
{_sources(result.citations)}</main>
<footer>
<p class="question">Question: {escape(result.question)}</p>
<p class="usage">{escape(usage_text(result.usage))}{status}</p>
</footer>
</body>
</html>
"""


_CSS = """
:root { color-scheme: light dark; --fg: #1f2328; --bg: #ffffff; --muted: #59636e;
  --line: #d1d9e0; --soft: #f6f8fa; --link: #0969da; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9198a1; --line: #3d444d;
    --soft: #151b23; --link: #4493f8; }
}
* { box-sizing: border-box; }
html { font-size: 16px; }
body { margin: 0; color: var(--fg); background: var(--bg);
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Helvetica Neue",
    Arial, "PingFang SC", "Microsoft YaHei", sans-serif;
  line-height: 1.6; }
main, footer { max-width: 46rem; margin: 0 auto; padding: 0 1.25rem; }
main { padding-top: 2rem; }
h1, h2, h3, h4, h5, h6 { line-height: 1.25; margin: 1.6em 0 0.6em; }
h1 { font-size: 2rem; margin-top: 0; }
h2 { font-size: 1.5rem; padding-bottom: 0.3em; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.25rem; }
p, ul, ol, table, pre, blockquote { margin: 0 0 1em; }
a { color: var(--link); overflow-wrap: anywhere; }
img { max-width: 100%; }
blockquote { margin-left: 0; padding: 0 1em; color: var(--muted); border-left: 0.25em solid var(--line); }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em;
  background: var(--soft); padding: 0.1em 0.3em; border-radius: 4px; }
pre { background: var(--soft); padding: 1em; overflow-x: auto; border-radius: 6px; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid var(--line); padding: 0.4em 0.75em; text-align: left; vertical-align: top; }
th { background: var(--soft); }
hr { border: 0; border-top: 1px solid var(--line); margin: 2em 0; }
.sources ol { padding-left: 1.5em; }
.sources li { margin-bottom: 0.5em; }
.url { color: var(--muted); font-size: 0.85em; overflow-wrap: anywhere; }
footer { margin-top: 2rem; padding-bottom: 2rem; border-top: 1px solid var(--line);
  color: var(--muted); font-size: 0.85em; }
footer p { margin: 0.5em 0; }
@media print {
  :root { --fg: #000; --bg: #fff; --muted: #444; --line: #bbb; --soft: #f3f3f3; --link: #000; }
  html { font-size: 11pt; }
  main, footer { max-width: none; padding: 0; }
  a { text-decoration: none; }
  .report a[href^="http"]::after { content: " <" attr(href) ">"; font-size: 0.85em; color: var(--muted); }
  h1, h2, h3, h4 { break-after: avoid; }
  pre, blockquote, tr, img, .sources li { break-inside: avoid; }
  table { display: table; }
  pre { white-space: pre-wrap; }
}
"""
