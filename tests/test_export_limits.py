"""PDF and Word exports hold everything the report holds, whatever its
shape, and are made within a time and memory limit (client/export_child.py).

Read back by independent readers: poppler's pdftotext and pdfimages for the
PDF, python-docx for the Word file. Before: a table's columns past the
page's edge were cut from the PDF, a long word ran off the page, a Word
table took time quadratic in its cells (300 x 40: over ten minutes), and a
10,000 x 10,000 image took 880 MB in the CLI."""

from __future__ import annotations

import base64
import io
import random
import re
import shutil
import subprocess
from collections import Counter

import docx
import pytest
from PIL import Image
from pypdf import PdfReader

from client.export_child import ExportFailed, render_document
from client.report_files import render
from tests.test_export_documents import result

pytestmark = pytest.mark.skipif(not shutil.which("pdftotext"), reason="needs poppler-utils (.ci/run installs it)")


def table(rows: int, cols: int) -> str:
    head = "| " + " | ".join(f"col{c}" for c in range(cols)) + " |\n|" + "---|" * cols + "\n"
    return head + "".join("| " + " | ".join(f"r{r}c{c}" for c in range(cols)) + " |\n" for r in range(rows))


def cells(rows: int, cols: int) -> set[str]:
    return {f"col{c}" for c in range(cols)} | {f"r{r}c{c}" for r in range(rows) for c in range(cols)}


def pdf_words(data: bytes, tmp_path) -> list[str]:
    """pdftotext's words, the page numbers in the footer left out."""
    path = tmp_path / "report.pdf"
    path.write_bytes(data)
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
    return re.sub(r"(?m)^\d+ ?/ ?\d+$", "", text).split()


def docx_cells(data: bytes) -> list[str]:
    document = docx.Document(io.BytesIO(data))
    return [cell.text for table in document.tables for row in table.rows for cell in row.cells]


def test_a_150_by_20_table_is_whole_in_the_pdf_and_in_word(tmp_path):
    report = f"# Readings\n\n{table(150, 20)}"
    assert cells(150, 20) <= set(pdf_words(render(result(report), "pdf"), tmp_path))
    assert cells(150, 20) <= set(docx_cells(render(result(report), "docx")))


def test_a_300_by_40_table_makes_a_word_file_within_the_limit():
    """Quadratic in the cells, this took over ten minutes and hit the
    export's time limit; row by row it takes seconds."""
    assert cells(300, 40) <= set(docx_cells(render(result(f"# Big\n\n{table(300, 40)}"), "docx")))


def test_every_column_of_a_wide_table_is_in_the_pdf(tmp_path):
    for cols in (40, 120):  # A2 and 4A0, in landscape
        report = f"# Wide\n\nBefore the table.\n\n{table(6, cols)}\nAfter the table.\n"
        data = render(result(report), "pdf")
        words = pdf_words(data, tmp_path)
        assert cells(6, cols) - set(words) == set(), cols
        assert "Before" in words and "After" in words
        pages = [
            (round(p.mediabox.width), round(p.mediabox.height), p.extract_text())
            for p in PdfReader(io.BytesIO(data)).pages
        ]
        assert [(w, h) for w, h, text in pages if "Before" in text or "After" in text] == [(595, 842)] * 2  # A4
        wide = [(w, h) for w, h, text in pages if "r5c0" in text]
        assert wide and all(w > h > 842 for w, h in wide)  # the table's own pages: landscape, larger than A4


def test_a_table_too_wide_for_any_page_wraps_and_loses_nothing(tmp_path):
    words = pdf_words(render(result(f"# Wider\n\n{table(3, 250)}"), "pdf"), tmp_path)
    shown, held = Counter("".join(words)), Counter("".join(cells(3, 250)))
    assert shown & held == held  # every character of every cell (wrapped, so words are split)


def test_long_words_and_base64_break_instead_of_running_off_the_page(tmp_path):
    rnd = random.Random(7)
    word = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3000))
    blob = base64.b64encode(rnd.randbytes(1500)).decode()
    report = (
        f"# {word[:150]}\n\nText {word} more.\n\nInline `{blob}`.\n\n```\n{blob}\n```\n\n"
        f"| short | long |\n|---|---|\n| x | {word[:400]} |\n\n[{word[:200]}](https://long.example/{word[:300]})\n"
    )
    flat = "".join(pdf_words(render(result(report, citations=[]), "pdf"), tmp_path))
    assert word in flat  # every character of it, in order
    assert flat.count(blob) == 2
    assert word[:400] in flat.split("long", 1)[1]
    assert f"https://long.example/{word[:300]}" in flat


def png(width: int, height: int) -> str:
    out = io.BytesIO()
    Image.new("1", (width, height)).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_a_huge_image_is_shown_as_its_alt_text(tmp_path):
    report = f"# Pictures\n\n![small chart]({'data:image/png;base64,' + png(40, 20)})\n\n"
    report += f"![huge chart](data:image/png;base64,{png(10_000, 10_000)})\n\nThe end.\n"
    data = render(result(report), "pdf")
    words = pdf_words(data, tmp_path)
    assert "huge" in words and "end." in words
    path = tmp_path / "report.pdf"
    listed = subprocess.run(["pdfimages", "-list", str(path)], capture_output=True, text=True, check=True).stdout
    sizes = [line.split()[3:5] for line in listed.splitlines()[2:]]
    assert sizes == [["40", "20"]]  # the small image only: the huge one was never decoded


def test_a_document_past_its_time_limit_is_stopped_with_one_line():
    with pytest.raises(ExportFailed, match=r"making the PDF took longer than 1 s and was stopped"):
        render_document(result(f"# Big\n\n{table(300, 20)}"), "pdf", max_seconds=1)


def test_a_document_past_its_memory_limit_is_stopped_with_one_line():
    with pytest.raises(ExportFailed, match=r"200 MB") as caught:
        render_document(result(f"# Big\n\n{table(600, 20)}"), "pdf", memory=200 << 20)
    assert "\n" not in str(caught.value)
