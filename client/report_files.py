"""A run's report in any format the CLI and the desk offer: text (md, html,
json: ``client/export.py``) or a document (pdf: ``client/export_pdf.py``,
docx: ``client/export_docx.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from client.export import render_text

if TYPE_CHECKING:
    from workflows.models import ResearchResult

FORMATS = ("md", "html", "json", "pdf", "docx")


def render(result: ResearchResult, fmt: str = "md") -> str | bytes:
    if fmt == "pdf":
        from client.export_pdf import render_pdf  # WeasyPrint: only when asked for

        return render_pdf(result)
    if fmt == "docx":
        from client.export_docx import render_docx

        return render_docx(result)
    if fmt in FORMATS:
        return render_text(result, fmt)  # type: ignore[arg-type]
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
