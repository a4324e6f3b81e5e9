"""PDF and Word exports (client/export_pdf.py, client/export_docx.py), read
back by independent readers: pypdf and poppler's pdftotext / pdffonts for the
PDF, python-docx for the Word file. A Chinese report is among them."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import docx
import pytest
from docx.oxml.ns import qn
from pypdf import PdfReader

from client.report_files import render
from testkit.pages import PageServer
from workflows.models import Citation, Plan, ResearchResult, Step, Usage

BIN = Path(sys.executable).parent
SOURCES = [
    Citation(title="Harbour office tide tables", url="https://harbour.example/tides"),
    Citation(title="Energy survey 2024", url="https://survey.example/energy?year=2024"),
    Citation(title="Click me", url="javascript:alert(1)"),
]
REPORT = """\
# Tidal power at Marrow Sound

## Key Points

- The barrage delivered **312 GWh** in 2024 ([tide tables](https://harbour.example/tides)).
- Output grew by *8.5%* over 2023.

## Comparison

| Plant | Output 2024 (GWh) | Turbines |
|---|---|---|
| Marrow Sound | 312 | 24 |
| Kessel Point | 198 | 16 |

```python
print(312 / 24)
```

## Sources

- [Energy survey 2024](https://survey.example/energy?year=2024)
"""
REPORT_ZH = """\
# 马罗海峡潮汐能报告

## 要点

- 2024年发电量为 **312 吉瓦时**（[潮汐表](https://harbour.example/tides)）。

| 电站 | 发电量 |
|---|---|
| 马罗海峡 | 312 |
"""


def result(report: str = REPORT, locale: str = "en-US", citations: list[Citation] = SOURCES) -> ResearchResult:
    plan = Plan(locale=locale, has_enough_context=False, thought="", title="Marrow Sound tidal power", steps=[
        Step(need_search=True, title="Find output", description="", step_type="research")])  # fmt: skip
    return ResearchResult(
        question="How much energy did Marrow Sound's barrage deliver?", status="completed", final_report=report,
        plan=plan, observations=["found"], citations=citations, locale=locale,
        usage=Usage(llm_calls=5, prompt_tokens=1200, completion_tokens=300, searches=2, crawls=1),
    )  # fmt: skip


def pdf_links(data: bytes) -> list[str]:
    links = []
    for page in PdfReader(io.BytesIO(data)).pages:
        for annot in page.get("/Annots") or []:
            action = annot.get_object().get("/A")
            if action and action.get("/URI"):
                links.append(str(action["/URI"]))
    return links


def pdf_text(data: bytes) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)


def test_pdf_is_a_pdf_with_the_report_text_tables_and_sources():
    data = render(result(), "pdf")
    assert data.startswith(b"%PDF-")
    text = pdf_text(data)
    for expected in ("Tidal power at Marrow Sound", "Key Points", "312 GWh", "Kessel Point", "198", "Sources",
                     "Harbour office tide tables", "Energy survey 2024", "5 LLM calls"):  # fmt: skip
        assert expected in text, expected


def test_pdf_links_are_clickable_and_only_safe_ones():
    links = pdf_links(render(result(), "pdf"))
    assert "https://harbour.example/tides" in links  # in the text and in the sources
    assert "https://survey.example/energy?year=2024" in links
    assert not any(link.startswith("javascript:") for link in links)


def test_a_chinese_pdf_embeds_a_font_with_its_glyphs(tmp_path):
    assert shutil.which("pdffonts"), "install poppler-utils (.ci/run does) to read PDFs independently"
    data = render(result(REPORT_ZH, "zh-CN"), "pdf")
    path = tmp_path / "zh.pdf"
    path.write_bytes(data)
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
    assert "马罗海峡潮汐能报告" in text and "发电量" in text  # real glyphs, not empty boxes
    fonts = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True).stdout
    assert any(name in fonts for name in ("WenQuanYi", "Noto", "Droid", "AR PL")), fonts


def test_making_a_pdf_fetches_nothing():
    """A report's image is never fetched; and the PDF's fetcher refuses any
    URL a page could hold (only inline data: is read)."""
    from client.export_pdf import _fetcher

    with PageServer() as site:
        site.add("/chart.png", "not an image")
        report = REPORT + f"\n![chart]({site.url('/chart.png')})\n"
        assert render(result(report), "pdf").startswith(b"%PDF")
        for url in (site.url("/chart.png"), "file:///etc/passwd"):
            with pytest.raises(ValueError, match="disallowed protocol"):
                _fetcher().fetch(url)
        assert site.hits == []
    response = _fetcher().fetch("data:text/plain,hello")
    assert response.read() == b"hello"
    response.close()


def test_docx_is_a_word_document_with_headings_tables_and_links():
    data = render(result(), "docx")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert "word/document.xml" in archive.namelist()
    document = docx.Document(io.BytesIO(data))
    headings = [(p.style.name, p.text) for p in document.paragraphs if p.style.name.startswith(("Heading", "Title"))]
    assert ("Title", "Tidal power at Marrow Sound") in headings
    assert ("Heading 2", "Comparison") in headings
    assert ("Heading 2", "Sources") in headings  # the run's sources, once
    assert [p.text for p in document.paragraphs].count("Sources") == 1
    table = document.tables[0]
    assert [c.text for c in table.rows[0].cells] == ["Plant", "Output 2024 (GWh)", "Turbines"]
    assert [c.text for c in table.rows[2].cells] == ["Kessel Point", "198", "16"]
    links = {rel.target_ref for rel in document.part.rels.values() if rel.is_external}
    assert links == {"https://harbour.example/tides", "https://survey.example/energy?year=2024"}
    bullets = [p.text for p in document.paragraphs if p.style.name == "List Bullet"]
    assert any("312 GWh" in b and "tide tables" in b for b in bullets)


def test_a_chinese_docx_keeps_its_text_and_an_east_asian_font():
    document = docx.Document(io.BytesIO(render(result(REPORT_ZH, "zh-CN"), "docx")))
    text = "\n".join(p.text for p in document.paragraphs)
    assert "马罗海峡潮汐能报告" in text and "312 吉瓦时" in text
    assert document.tables[0].rows[1].cells[0].text == "马罗海峡"
    fonts = document.styles["Normal"].element.rPr.rFonts
    assert fonts.get(qn("w:eastAsia"))


def cli(env, *args, timeout=120):
    return subprocess.run([str(BIN / "deepresearch"), *args], env=env, capture_output=True, text=True, timeout=timeout)


def test_result_writes_pdf_and_docx_of_a_real_run(worker_env, script, tmp_path, data_dir):
    from testkit.worker_process import WorkerProcess

    with WorkerProcess(worker_env, tmp_path / "worker.log"):
        run_id = cli(worker_env, "start", "Tell me about Lantern Rock", "--auto-accept").stdout.strip()
        done = cli(worker_env, "result", run_id, "--json", timeout=180)
        assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    pdf = cli(worker_env, "result", run_id, "--format", "pdf", "-o", str(tmp_path / "r.pdf"))
    assert pdf.returncode == 0, pdf.stderr
    data = (tmp_path / "r.pdf").read_bytes()
    assert data.startswith(b"%PDF")
    assert {c["url"] for c in report["citations"]} <= set(pdf_links(data))
    piped = subprocess.run(  # -o -: the bytes on standard output, nothing else there, no file named "-"
        [str(BIN / "deepresearch"), "result", run_id, "--format", "pdf", "-o", "-"],
        env=worker_env, capture_output=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert piped.returncode == 0 and piped.stdout.startswith(b"%PDF") and piped.stdout.rstrip().endswith(b"%%EOF")
    assert not (tmp_path / "-").exists()
    word = cli(worker_env, "result", run_id, "--format", "docx")  # no -o: saved beside the other reports
    assert word.returncode == 0, word.stderr
    saved = data_dir / "reports" / f"{run_id}.docx"
    assert f"saved to {saved}" in word.stdout
    document = docx.Document(str(saved))
    assert {c["url"] for c in report["citations"]} <= {
        r.target_ref for r in document.part.rels.values() if r.is_external
    }
