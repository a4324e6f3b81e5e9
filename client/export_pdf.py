"""A report as a PDF: the standalone HTML page of ``client/export.py`` laid out
by WeasyPrint (print styles, real tables, clickable links and sources).

Fonts come from the system through fontconfig: any script the installed fonts
cover renders (Chinese, Japanese and Korean need a CJK font such as Debian's
``fonts-noto-cjk`` or ``fonts-wqy-zenhei``). Nothing is fetched while laying
out: the page only ever embeds ``data:`` images, and every other URL is
refused by the fetcher.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from client.errors import CliError
from client.export import render_html

if TYPE_CHECKING:
    from workflows.models import ResearchResult

_PRINT_CSS = """
@page { size: A4; margin: 18mm 16mm 20mm; @bottom-center { content: counter(page) " / " counter(pages);
  font-size: 9pt; color: #666; } }
body { font-family: "DejaVu Sans", "Noto Sans", "Noto Sans CJK SC", "WenQuanYi Zen Hei", sans-serif; }
table { display: table; }
"""


class PdfUnavailable(CliError):
    """WeasyPrint or the system libraries it needs (Pango) are missing."""


def _fetcher():
    """WeasyPrint's own fetcher, allowed nothing but inline ``data:`` URLs:
    making a PDF never reaches the network or the disk, whatever a report
    links to."""
    from weasyprint.urls import URLFetcher

    return URLFetcher(allowed_protocols={"data"}, allow_redirects=False, fail_on_errors=False)


def render_pdf(result: ResearchResult) -> bytes:
    try:
        from weasyprint import CSS, HTML
    except (ImportError, OSError) as err:  # OSError: Pango is not installed
        raise PdfUnavailable(
            f"PDF export needs WeasyPrint and the Pango library ({err}); install Pango "
            "(Debian/Ubuntu: apt install libpango-1.0-0 libpangoft2-1.0-0; macOS: brew install pango)"
        ) from None
    page = HTML(string=render_html(result), url_fetcher=_fetcher(), base_url=None)
    return page.write_pdf(stylesheets=[CSS(string=_PRINT_CSS)])
