"""Report exports (client/export.py): markdown, JSON and a standalone HTML page.

The HTML is checked by parsing it with the standard library's html.parser, the
way a browser would see its elements, never by matching substrings alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

import pytest

from client.options import format_for_path
from client.report_files import render
from workflows.models import Citation, Plan, ResearchResult, Step, Usage

CITATIONS = [
    Citation(title="Temporal docs: Workflows", url="https://docs.temporal.io/workflows"),
    Citation(title="DeerFlow & friends <GitHub>", url='https://github.com/bytedance/deer-flow?tab=readme&x="1"'),
    Citation(title="Local notes", url="file:///home/me/notes.md"),
]
EVIL_CITATION = Citation(title="Click me", url="javascript:alert(document.cookie)")

REPORT = """\
# Durable *Research* on Temporal

## Key Points

- Workflows survive crashes ([docs](https://docs.temporal.io/workflows)).
- Raw HTML stays text: <script>alert(1)</script> and <img src=x onerror=alert(2)>

## Comparison

| System | Durable | Parallel steps |
|---|---|---|
| DeerFlow | no | no |
| This | yes | yes |

<script>alert("block")</script>

<iframe src="https://evil.example/frame"></iframe>

A [bad link](javascript:alert(3)), an autolink <javascript:alert(4)>, a
[data page](data:text/html;base64,PHNjcmlwdD4=), a [vbscript](vbscript:msgbox(1)),
an outside image ![chart](https://evil.example/chart.png) and an
embedded one ![dot](data:image/png;base64,iVBORw0KGgo=) and [back up](#sources).

```python
print("<b>not bold</b>")
```

### References

- [Temporal docs: Workflows](https://docs.temporal.io/workflows)
"""


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    text: str = ""


class Page(HTMLParser):
    """Every element with its attributes and the text inside it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.open: list[Element] = []
        self.doctype = ""

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.elements.append(element)
        if tag not in ("meta", "br", "img", "hr", "link", "input"):
            self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self.open) - 1, -1, -1):
            if self.open[index].tag == tag:
                del self.open[index:]
                return
        raise AssertionError(f"</{tag}> closes nothing")

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element.text += data

    def all(self, tag: str) -> list[Element]:
        return [e for e in self.elements if e.tag == tag]

    def one(self, tag: str) -> Element:
        (element,) = self.all(tag)
        return element


def make_result(**changes) -> ResearchResult:
    fields = dict(
        status="completed",
        question="Is Temporal a good base for deep research?",
        locale="zh-CN",
        final_report=REPORT,
        plan=Plan(title="Plan title", steps=[Step(title="Find sources", execution_res="found")]),
        observations=["found"],
        citations=[*CITATIONS, EVIL_CITATION],
        usage=Usage(llm_calls=12, prompt_tokens=34567, completion_tokens=890, searches=3, crawls=1, code_runs=2),
    )
    return ResearchResult(**(fields | changes))


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    assert page.open == [], f"unclosed: {[e.tag for e in page.open]}"
    return page


@pytest.fixture(scope="module")
def html() -> str:
    return render(make_result(), "html")


@pytest.fixture(scope="module")
def page(html) -> Page:
    return parse(html)


def test_html_is_one_html5_document_in_the_run_locale(html, page):
    assert page.doctype.lower() == "doctype html"
    assert page.one("html").attrs["lang"] == "zh-CN"
    assert page.all("meta")[0].attrs == {"charset": "utf-8"}
    assert len(page.all("body")) == 1 and len(page.all("head")) == 1


def test_title_comes_from_the_first_heading(page):
    assert page.one("title").text == "Durable Research on Temporal"


def test_headings_of_the_markdown_become_html_headings(page):
    headings = [(e.tag, e.text) for e in page.elements if e.tag in ("h1", "h2", "h3")]
    # The model's own list of references at the end gives way to the run's
    # verified sources, listed once.
    assert headings == [
        ("h1", "Durable Research on Temporal"),
        ("h2", "Key Points"),
        ("h2", "Comparison"),
        ("h2", "Sources"),
    ]
    assert page.one("h1").text == "Durable Research on Temporal"
    assert [e.text for e in page.all("em")][0] == "Research"


def test_markdown_table_becomes_an_html_table(page):
    table = page.one("table")
    assert [e.text for e in page.all("th")] == ["System", "Durable", "Parallel steps"]
    assert [e.text for e in page.all("td")] == ["DeerFlow", "no", "no", "This", "yes", "yes"]
    assert "DeerFlow" in table.text


def test_every_citation_is_a_link_with_its_title(page):
    sources = [e for e in page.all("section") if e.attrs.get("id") == "sources"]
    assert len(sources) == 1 and "Sources" in sources[0].text
    links = {e.attrs["href"]: e for e in page.all("a")}
    for citation in CITATIONS:
        assert citation.url in links, citation.url
        assert links[citation.url].text == citation.title
        assert links[citation.url].attrs["rel"] == "noopener noreferrer"


def test_links_open_safely(page):
    for link in page.all("a"):
        href = link.attrs["href"] or ""
        assert href.startswith(("https://", "http://", "file:", "#")), href
        if not href.startswith("#"):
            assert set((link.attrs.get("rel") or "").split()) >= {"noopener", "noreferrer"}


def test_model_html_is_escaped_never_executed(html, page):
    assert page.all("script") == []
    assert page.all("iframe") == []
    assert "<script" not in html.lower()
    assert "<iframe" not in html.lower()
    # It is still there, as text a reader can see.
    text = page.one("body").text
    assert "<script>alert(1)</script>" in text
    assert '<script>alert("block")</script>' in text
    assert 'print("<b>not bold</b>")' in page.one("pre").text
    for element in page.elements:
        assert not any(name.startswith("on") for name in element.attrs), element


def test_dangerous_urls_are_not_links(page):
    hrefs = [e.attrs.get("href") or "" for e in page.all("a")]
    for scheme in ("javascript:", "vbscript:", "data:"):
        assert not any(h.lower().startswith(scheme) for h in hrefs)
    text = page.one("body").text
    # The javascript: citation is listed as plain text.
    item = next(e for e in page.all("li") if EVIL_CITATION.title in e.text)
    assert EVIL_CITATION.url in item.text
    assert not any(e.tag == "a" and EVIL_CITATION.title in e.text for e in page.elements)
    assert "bad link" in text and "javascript:alert(4)" in text


def test_nothing_is_loaded_from_outside_the_page(page):
    allowed = {c.url for c in CITATIONS}
    for element in page.elements:
        assert element.tag not in ("script", "link", "iframe", "object", "embed", "video", "audio")
        if "src" in element.attrs:
            assert (element.attrs["src"] or "").startswith("data:image/"), element
        href = element.attrs.get("href")
        if href and element.tag == "a" and href.startswith(("http:", "https:")):
            # Only links to sources; the outside image became a link, never an <img>.
            assert href in allowed or href == "https://evil.example/chart.png", href
        elif href:
            assert element.tag == "a", element
    assert [e.attrs["src"] for e in page.all("img")] == ["data:image/png;base64,iVBORw0KGgo="]
    chart = next(e for e in page.all("a") if e.attrs["href"] == "https://evil.example/chart.png")
    assert chart.text == "chart"
    styles = page.all("style")
    assert len(styles) == 1 and "url(" not in styles[0].text and "@import" not in styles[0].text
    csp = [m for m in page.all("meta") if (m.attrs.get("http-equiv") or "").lower() == "content-security-policy"]
    assert csp and "default-src 'none'" in (csp[0].attrs["content"] or "")


def test_footer_shows_usage(page):
    footer = page.one("footer").text
    for expected in ("12 LLM calls", "34,567 prompt", "890 completion", "3 searches", "1 crawl", "2 code runs"):
        assert expected in footer


def test_footer_shows_the_day_the_run_finished():
    dated = parse(render(make_result(finished_at="2025-03-14T09:26:53+00:00"), "html"))
    assert "2025-03-14" in dated.one("footer").text
    undated = parse(render(make_result(), "html"))  # results stored before the field existed
    assert not re.search(r"\d{4}-\d{2}-\d{2}", undated.one("footer").text)


def test_citation_titles_and_urls_are_escaped(html):
    assert "DeerFlow &amp; friends &lt;GitHub&gt;" in html
    assert 'href="https://github.com/bytedance/deer-flow?tab=readme&amp;x=&quot;1&quot;"' in html


def test_title_falls_back_without_a_heading():
    page = parse(render(make_result(final_report="Just an answer.", plan=None, citations=[]), "html"))
    assert page.one("title").text == "Is Temporal a good base for deep research?"
    assert not [e for e in page.all("section") if e.attrs.get("id") == "sources"]


@pytest.mark.parametrize(
    ("locale", "lang"), [("en-US", "en-US"), ("zh_CN", "zh-CN"), ('x" onload="y', "xonloady"), ("", "en")]
)
def test_lang_is_a_clean_language_tag(locale, lang):
    page = parse(render(make_result(locale=locale), "html"))
    assert page.one("html").attrs == {"lang": lang}


def test_markdown_is_the_report_as_written():
    result = make_result()
    assert render(result, "md") == result.final_report


def test_json_round_trips_to_the_result():
    result = make_result()
    text = render(result, "json")
    assert ResearchResult.model_validate_json(text) == result
    assert text.startswith("{\n  ")


def test_unknown_format_is_an_error():
    with pytest.raises(ValueError, match="unknown format"):
        render(make_result(), "odt")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("report.html", "html"),
        ("REPORT.HTM", "html"),
        ("out/report.json", "json"),
        ("report.md", "md"),
        ("Report.PDF", "pdf"),
        ("out/report.docx", "docx"),
        ("report.txt", "md"),
        ("report", "md"),
    ],
)
def test_format_from_file_name(name, fmt):
    assert format_for_path(name) == fmt
