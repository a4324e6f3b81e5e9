"""A run's report in any format the CLI and the desk offer: text (md, html,
json: ``client/export.py``) or a document (pdf: ``client/export_pdf.py``,
docx: ``client/export_docx.py``), made in a child process with a time and
memory limit (``client/export_child.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from client.export import render_text

if TYPE_CHECKING:
    from workflows.models import ResearchResult

FORMATS = ("md", "html", "json", "pdf", "docx")
DOCUMENTS = ("pdf", "docx")  # made in a child process


def render(result: ResearchResult, fmt: str = "md") -> str | bytes:
    if fmt in DOCUMENTS:
        from client.export_child import render_document

        return render_document(result, fmt)
    if fmt in FORMATS:
        return render_text(result, fmt)  # type: ignore[arg-type]
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
