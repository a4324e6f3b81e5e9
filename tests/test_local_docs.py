"""Local documents: indexing a small corpus (tests/corpus) into SQLite FTS5
and searching it, directly and through the activities.

The corpus holds a markdown handbook with headings, plain-text field notes
(long enough for two parts), an HTML recipe page in a subfolder and a PDF
report (written with ``make_pdf`` from tests/test_crawl.py), each with facts
found nowhere else.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from contextlib import closing
from importlib import resources
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.local_docs.activities import LocalDocsActivities
from activities.local_docs.index import LocalIndex, query_terms
from activities.local_docs.splitter import split_sections
from workflows.models import Citation
from workflows.tool_models import IndexRequest, LocalSearchRequest

CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A private copy of the corpus, so tests can change files."""
    return Path(shutil.copytree(CORPUS, tmp_path / "corpus"))


@pytest.fixture
def index(tmp_path: Path, corpus: Path) -> LocalIndex:
    local = LocalIndex(tmp_path / "index.sqlite")
    report = local.index([str(corpus)])
    assert not report.problems, report.problems
    return local


# --- indexing -------------------------------------------------------------------


def test_index_reports_counts(tmp_path, corpus):
    report = LocalIndex(tmp_path / "index.sqlite").index([str(corpus)])
    assert report.problems == []
    assert (report.files, report.indexed, report.unchanged, report.removed) == (4, 4, 0, 0)
    # handbook: intro + 3 headings; notes: 2 parts; PDF: 3 pages; recipe: 3 (h1, h2, h2)
    assert report.sections == report.total_sections >= 4 + 2 + 3 + 2
    assert report.total_files == 4
    summary = report.summary()
    assert f"4 files, {report.total_sections} sections searchable" in summary
    assert "Problems" not in summary


def test_sections_of_each_kind(index, corpus):
    with closing(sqlite3.connect(index.path)) as db:
        rows = db.execute("SELECT name, slug, title FROM sections ORDER BY id").fetchall()

    def sections(name: str) -> list[tuple[str, str]]:
        return list(dict.fromkeys((slug, title) for n, slug, title in rows if n == name))

    assert sections("lighthouse-handbook.md") == [
        ("kestrel-point-lighthouse-handbook", "Kestrel Point Lighthouse Handbook"),
        ("history", "History"),
        ("lamp-and-optics", "Lamp and optics"),
        ("visiting-hours", "Visiting hours"),
    ]
    assert sections("turbine-report.pdf") == [
        ("page-1", "Page 1"),
        ("page-2", "Page 2"),
        ("page-3", "Page 3"),
    ]
    assert sections("field-notes.txt") == [("part-1", "Part 1"), ("part-2", "Part 2")]
    assert ("the-dough", "The dough") in sections("rye-sourdough.html")
    assert ("baking", "Baking") in sections("rye-sourdough.html")


# --- searching ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "file", "section", "slug", "fact"),
    [
        ("When was the lighthouse first lit?", "lighthouse-handbook.md", "History", "history", "12 October 1871"),
        (
            "Fresnel lens range nautical miles",
            "lighthouse-handbook.md",
            "Lamp and optics",
            "lamp-and-optics",
            "23 nautical miles",
        ),
        ("How far did the Skarfjall glacier retreat", "field-notes.txt", "Part 1", "part-1", "312 metres"),
        ("depth of the proglacial lake sonar", "field-notes.txt", "Part 2", "part-2", "27 metres"),
        ("rye dough hydration", "rye-sourdough.html", "The dough", "the-dough", "78 percent"),
        ("Halvorsen turbine peak output megawatts", "turbine-report.pdf", "Page 2", "page-2", "4.7 megawatts"),
    ],
)
def test_search_finds_file_and_section(index, corpus, query, file, section, slug, fact):
    hits = index.search(query, limit=3)
    best = hits[0]
    assert (best.name, best.section, best.slug) == (file, section, slug)
    assert fact in best.text
    assert best.title == f"{file} — {section}"
    path = next(corpus.rglob(file))
    assert best.path == str(path.resolve())
    assert best.url == f"{path.resolve().as_uri()}#{slug}"
    assert best.snippet and len(best.snippet) <= 310


def test_search_respects_limit(index):
    hits = index.search("lighthouse tower visitors steps", limit=2)
    assert len(hits) == 2
    assert all(h.name == "lighthouse-handbook.md" for h in hits)
    assert len(index.search("the", limit=50)) > 5


def test_no_match_and_empty_query(index):
    assert index.search("xylophone quasar", limit=5) == []
    assert index.search("", limit=5) == []
    assert index.search("  ?! -- ", limit=5) == []


@pytest.mark.parametrize(
    "query",
    [
        'C++ "AI" -foo',
        '"unbalanced quote',
        "NEAR(lighthouse lens, 3)",
        "lens*",
        "*",
        "title:History",
        "body: Fresnel",
        "(lighthouse OR",
        "AND",
        "NOT lens",
        "^lighthouse",
        "{name title}: glacier",
        "lighthouse + - \\ / ; ' \x00",
        "🌊 glacier 🧊",
        "a" * 5000,
    ],
)
def test_fts_syntax_in_queries_does_not_raise(index, query):
    assert isinstance(index.search(query, limit=5), list)


def test_fts_operators_are_plain_words(index):
    hits = index.search("body: Fresnel", limit=1)
    assert hits and hits[0].section == "Lamp and optics"
    assert query_terms('C++ "AI" -foo') == ["C", "AI", "foo"]


def test_chinese_text_is_searchable(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "能源.md").write_text(
        "# 风电报告\n\n## 产量\n\n哈尔沃森风电场的涡轮机在一月的风暴中达到了四点七兆瓦的峰值功率。\n\n"
        "## 维护\n\n二号涡轮机的齿轮箱在六月更换。\n",
        encoding="utf-8",
    )
    local = LocalIndex(tmp_path / "index.sqlite")
    local.index([str(docs)])
    assert [h.section for h in local.search("峰值功率", limit=1)] == ["产量"]
    assert [h.section for h in local.search("齿轮箱", limit=1)] == ["维护"]
    # a whole question: matched by its overlapping character pairs
    assert local.search("涡轮机的峰值功率是多少？", limit=1)[0].section == "产量"


# --- re-indexing ------------------------------------------------------------------


def test_reindexing_skips_unchanged_files(index, corpus):
    report = index.index([str(corpus)])
    assert (report.files, report.indexed, report.unchanged, report.sections) == (4, 0, 4, 0)
    assert report.total_files == 4


def test_changed_file_is_reindexed_and_deleted_file_removed(index, corpus):
    notes = corpus / "field-notes.txt"
    notes.write_text("Field notes\n\nThe snow line rose to 1,260 metres this year.\n")
    os.utime(notes, ns=(notes.stat().st_atime_ns, notes.stat().st_mtime_ns + 5_000_000_000))
    (corpus / "turbine-report.pdf").unlink()
    report = index.index([str(corpus)])
    assert (report.indexed, report.unchanged, report.removed) == (1, 2, 1)
    assert report.total_files == 3
    assert index.search("snow line 1,260", limit=1)[0].name == "field-notes.txt"
    assert index.search("Skarfjall glacier retreated", limit=5) == []
    assert index.search("Halvorsen turbine", limit=5) == []


def test_problems_are_reported_not_fatal(tmp_path, corpus):
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4\n" + b"\x00\xff junk" * 30)
    (corpus / "binary.txt").write_bytes(b"\x00\x01\x02\x03" * 100)
    (corpus / "empty.md").write_text("   \n")
    (corpus / "table.csv").write_text("a,b\n1,2\n")  # other types in a folder: ignored
    (corpus / ".hidden.md").write_text("# Secret\n\nHidden notes about the lighthouse.\n")
    unsupported = tmp_path / "slides.pptx"
    unsupported.write_bytes(b"PK\x03\x04")
    missing = tmp_path / "no-such-folder"
    report = LocalIndex(tmp_path / "index.sqlite").index([str(corpus), str(missing), str(unsupported)])
    assert report.indexed == 4
    assert report.ignored == 1
    problems = "\n".join(report.problems)
    assert len(report.problems) == 5, problems
    assert f"{missing}: not found" in problems
    assert "slides.pptx: unsupported file type (.pptx)" in problems
    assert "broken.pdf: " in problems and "binary.txt: " in problems
    assert "empty.md: no readable text" in problems
    assert "Secret" not in problems
    summary = report.summary()
    assert "Problems (5):" in summary and "not found" in summary


def test_broken_file_retried_and_fixed(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    bad = docs / "notes.pdf"
    bad.write_bytes(b"not a pdf")
    local = LocalIndex(tmp_path / "index.sqlite")
    assert len(local.index([str(docs)]).problems) == 1
    bad.unlink()
    (docs / "notes.md").write_text("# Notes\n\nThe quarry closed in 1932.\n")
    report = local.index([str(docs)])
    assert report.problems == [] and report.indexed == 1
    assert local.search("quarry", limit=1)[0].section == "Notes"


# --- splitting --------------------------------------------------------------------


def test_split_sections_markdown_details():
    markdown = (
        "---\ntitle: front matter\n---\n"
        "Intro before any heading.\n\n"
        "# Guide\n\n"
        "## Install\n\nRun the installer.\n\n"
        "```sh\n# not a heading\n```\n\n"
        "Usage\n-----\n\nA setext heading.\n\n"
        "## Install\n\nAgain, for Windows.\n\n"
        "- item\n---\n"
    )
    sections = split_sections(markdown)
    assert [(s.title, s.slug) for s in sections] == [
        ("", ""),
        ("Install", "install"),
        ("Usage", "usage"),
        ("Install", "install-1"),
    ]
    assert "front matter" not in sections[0].text
    assert "# not a heading" in sections[1].text
    assert sections[1].context == "Guide"


def test_long_sections_are_chunked_at_paragraphs():
    paragraph = "Sentence about rocks and ice. " * 20  # 600 characters
    sections = split_sections("# Long\n\n" + "\n\n".join([paragraph] * 6))
    assert len(sections) == 3
    assert all(s.title == "Long" and s.slug == "long" for s in sections)
    assert all(len(s.text) <= 1_500 for s in sections)


# --- activities -------------------------------------------------------------------


async def test_activities_called_directly(tmp_path, corpus):
    data_dir = tmp_path / "data"
    acts = LocalDocsActivities(data_dir)
    env = ActivityEnvironment()
    beats: list = []
    env.on_heartbeat = lambda *details: beats.append(details)
    run_key = "research-42/run:7"
    summary = await env.run(
        acts.index_resources,
        IndexRequest(run_key=run_key, paths=[str(corpus), str(tmp_path / "gone.md")]),
    )
    assert "4 files" in summary and "sections searchable" in summary
    assert "gone.md: not found" in summary
    assert beats  # progress was reported while indexing
    [db] = (data_dir / "indexes").glob("*.sqlite")
    assert db.name.startswith("research-42_run_7-")

    result = await env.run(
        acts.local_search,
        LocalSearchRequest(run_key=run_key, query="Who designed the lighthouse?", max_results=2),
    )
    assert not result.error
    handbook = (corpus / "lighthouse-handbook.md").resolve()
    url = f"{handbook.as_uri()}#history"
    assert result.sources[0] == Citation(title="lighthouse-handbook.md — History", url=url)
    assert len(result.sources) <= 2
    assert "1. lighthouse-handbook.md — History\n" in result.content
    assert f"URL: {url}\n" in result.content
    assert "Miriam Ashcombe" in result.content

    # the same request again: nothing re-indexed
    again = await acts.index_resources(IndexRequest(run_key=run_key, paths=[str(corpus)]))
    assert "0 indexed now" in again and "4 unchanged" in again

    nothing = await acts.local_search(LocalSearchRequest(run_key=run_key, query="xylophone"))
    assert not nothing.error and nothing.sources == []
    assert nothing.content.startswith("No results in the local documents")

    syntax = await acts.local_search(LocalSearchRequest(run_key=run_key, query='C++ "AI" -foo'))
    assert not syntax.error


async def test_local_search_without_index_is_error_result(tmp_path):
    acts = LocalDocsActivities(tmp_path / "data")
    result = await acts.local_search(LocalSearchRequest(run_key="never-indexed", query="lens"))
    assert result.error and "no local documents" in result.content
    assert not (tmp_path / "data" / "indexes").exists()


async def test_runs_have_separate_indexes(tmp_path, corpus):
    acts = LocalDocsActivities(tmp_path / "data")
    await acts.index_resources(IndexRequest(run_key="a", paths=[str(corpus / "recipes")]))
    await acts.index_resources(IndexRequest(run_key="b", paths=[str(corpus / "field-notes.txt")]))
    a = await acts.local_search(LocalSearchRequest(run_key="a", query="glacier"))
    b = await acts.local_search(LocalSearchRequest(run_key="b", query="glacier"))
    assert a.sources == [] and b.sources


def test_local_search_tool_schema():
    tools = json.loads((resources.files("prompts") / "tools.json").read_text(encoding="utf-8"))
    tool = next(t for t in tools if t["name"] == "local_search")
    assert "--resource" in tool["description"]
    assert tool["parameters"]["required"] == ["query"]
    assert tool["parameters"]["properties"]["query"]["type"] == "string"


# --- hostile folders (issue "Twenty-five ways…": 12, 13) --------------------------------


def test_12_a_fifo_and_a_link_to_dev_zero_are_skipped_not_read(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nThe pier is 212 metres long.")
    os.mkfifo(folder / "pipe.md")  # opening it for reading would block for ever
    (folder / "zeros.md").symlink_to("/dev/zero")  # reading it would never end
    started = time.monotonic()
    report = LocalIndex(tmp_path / "index.sqlite").index([str(folder)])
    assert time.monotonic() - started < 10
    assert report.indexed == 1
    problems = " ".join(report.problems)
    assert "pipe.md: not a regular file" in problems and "zeros.md" in problems


def test_13_a_link_out_of_the_folder_is_not_read(tmp_path):
    secret = tmp_path / "shadow.md"
    secret.write_text("root:$6$secret-hash:19000:0:99999:7:::")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nThe pier is 212 metres long.")
    (folder / "shadow.md").symlink_to(secret)
    (folder / "etc").symlink_to(tmp_path, target_is_directory=True)  # a folder link out
    index = LocalIndex(tmp_path / "index.sqlite")
    report = index.index([str(folder)])
    assert report.indexed == 1 and "outside" in " ".join(report.problems)
    assert not index.search("secret hash") and index.search("pier")


def test_13_a_link_inside_the_folder_is_read(tmp_path):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "notes.md").write_text("# Notes\n\nThe pier is 212 metres long.")
    (folder / "alias.md").symlink_to(folder / "sub" / "notes.md")
    report = LocalIndex(tmp_path / "index.sqlite").index([str(folder)])
    assert report.indexed == 2 and not report.problems


def test_a_line_separator_inside_a_paragraph_is_no_line_end():
    """Markdown ends lines at CR and LF only: text after a U+2028 or a form
    feed is not a heading, and the characters stay in the text."""
    sections = split_sections("# Tides\n\nThe barrage\u2028# opened in 1966\x0cand still runs.\n")
    assert [s.title for s in sections] == ["Tides"]
    assert "The barrage\u2028# opened in 1966\x0cand still runs." in sections[0].text
