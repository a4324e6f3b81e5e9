"""A report as a PDF: the standalone HTML page of ``client/export.py`` laid out
by WeasyPrint (print styles, real tables, clickable links and sources).

Nothing the report holds is cut at the page's edge: a table too wide for an
A4 page in portrait gets smaller type, then a larger page in landscape (A4
up to 4A0, the smallest its estimated width fits); a table wider still
wraps inside its cells, and a word or a run of base64 longer than a line
breaks where it must.

Fonts come from the system through fontconfig: any script the installed fonts
cover renders (Chinese, Japanese and Korean need a CJK font such as Debian's
``fonts-noto-cjk`` or ``fonts-wqy-zenhei``). Nothing is fetched while laying
out: the page only ever embeds ``data:`` images, every other URL is refused by
the fetcher, and an embedded image of more than ``MAX_IMAGE_PIXELS`` is shown
as its alt text (decoded, it would take gigabytes).

The CLI and the desk make PDFs in a child process with a time and memory
limit (``client/export_child.py``), never by calling ``render_pdf`` directly.
"""

from __future__ import annotations

import io
import unicodedata
from typing import TYPE_CHECKING

from client.errors import CliError
from client.export import render_html

if TYPE_CHECKING:
    from workflows.models import ResearchResult

MAX_IMAGE_PIXELS = 25_000_000  # 5000 x 5000
MM_PER_PT = 25.4 / 72
BODY_PT = 11  # the print style's type size (client/export.py)
PORTRAIT_MM = 170  # A4's width less the margins, less a little for indents
# For wider tables: (page size, width for the table in mm, type size in pt); the
# first in smaller type on the same page, the others on pages of their own.
WIDE_PAGES = (
    ("", PORTRAIT_MM, 8.5),
    ("A4 landscape", 255, 9),
    ("A3 landscape", 375, 8),
    ("A2 landscape", 545, 7.5),
    ("A1 landscape", 790, 7.5),
    ("A0 landscape", 1135, 7.5),
    ("1682mm 1189mm", 1630, 7.5),  # 2A0
    ("2378mm 1682mm", 2320, 7.5),  # 4A0 (a PDF page may be up to 5 m wide)
)
WORD_EM = 20.0  # a longer word breaks inside its column
LINE_EM = 16.0  # text with spaces wraps at about this width (24 characters)
CELL_EM, WIDE_CELL_EM = 1.6, 1.0  # a cell's padding and borders (less in wide tables)
SLACK = 1.1  # bold headers, and a margin for the estimate

_WIDE_CSS = "".join(
    f"table.wide-{n} {{ font-size: {pt}pt; }}\n"
    + (f"@page wide-{n} {{ size: {size}; }}\ntable.wide-{n} {{ page: wide-{n}; }}\n" if size else "")
    for n, (size, _, pt) in enumerate(WIDE_PAGES, 1)
)
_PRINT_CSS = (
    """
@page { size: A4; margin: 18mm 16mm 20mm; @bottom-center { content: counter(page) " / " counter(pages);
  font-size: 9pt; color: #666; } }
html { page: report; }  /* after a table on a page of its own, back to A4 */
body { font-family: "DejaVu Sans", "Noto Sans", "Noto Sans CJK SC", "WenQuanYi Zen Hei", sans-serif;
  overflow-wrap: anywhere; }
table { display: table; }
table[class^="wide-"] th, table[class^="wide-"] td { padding: 0.25em 0.4em; }
pre, code { white-space: pre-wrap; overflow-wrap: anywhere; }
img { max-width: 100%; }
"""
    + _WIDE_CSS
)


class PdfUnavailable(CliError):
    """WeasyPrint or the system libraries it needs (Pango) are missing."""


def char_em(char: str) -> float:
    """A character's width in ems, on the generous side (DejaVu Sans)."""
    if char in "MWmw@%" or unicodedata.east_asian_width(char) in "WF":
        return 1.0
    return 0.75 if char.isupper() else 0.65


def cell_em(text: str) -> float:
    """The width a cell wants: its text on one line, up to ``LINE_EM``
    (longer text wraps at its spaces, a word over ``WORD_EM`` breaks)."""
    words = [min(sum(map(char_em, word)), WORD_EM) for word in text[:300].split()]
    return min(sum(words) + 0.3 * max(len(words) - 1, 0), LINE_EM)


def column_widths_em(rows: list[list[str]]) -> list[float]:
    """What each column wants, in ems at the table's own type size."""
    widest: list[float] = []
    for row in rows:
        widest += [0.0] * (len(row) - len(widest))
        for column, text in enumerate(row):
            widest[column] = max(widest[column], cell_em(text) * SLACK)
    return widest


def table_class(rows: list[list[str]]) -> str | None:
    """``wide-N`` for a table too wide for a portrait page: the smallest of
    ``WIDE_PAGES`` it fits, the largest if none (its cells then wrap)."""
    columns = column_widths_em(rows)
    if (sum(columns) + CELL_EM * len(columns)) * BODY_PT * MM_PER_PT <= PORTRAIT_MM:
        return None
    width = sum(columns) + WIDE_CELL_EM * len(columns)
    for n, (_, room, pt) in enumerate(WIDE_PAGES, 1):
        if width * pt * MM_PER_PT <= room:
            return f"wide-{n}"
    return f"wide-{len(WIDE_PAGES)}"


def _fetcher():
    """WeasyPrint's own fetcher, allowed nothing but inline ``data:`` URLs:
    making a PDF never reaches the network or the disk, whatever a report
    links to; an image too large to decode is refused (WeasyPrint then shows
    its alt text)."""
    from weasyprint.urls import URLFetcher, URLFetcherResponse

    class DataOnly(URLFetcher):
        def fetch(self, url, headers=None):
            response = super().fetch(url, headers)
            if not response.headers.get_content_type().startswith("image/"):
                return response
            data = response.read()
            response.close()
            _check_image(data)
            return URLFetcherResponse(response.url, data, response.headers, response.status)

    return DataOnly(allowed_protocols={"data"}, allow_redirects=False, fail_on_errors=False)


def _check_image(data: bytes) -> None:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:  # reads the header only
        width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        raise ValueError(f"an image of {width} x {height} pixels is too large for the PDF")


def render_pdf(result: ResearchResult) -> bytes:
    try:
        from weasyprint import CSS, HTML
    except (ImportError, OSError) as err:  # OSError: Pango is not installed
        raise PdfUnavailable(
            f"PDF export needs WeasyPrint and the Pango library ({err}); install Pango "
            "(Debian/Ubuntu: apt install libpango-1.0-0 libpangoft2-1.0-0; macOS: brew install pango)"
        ) from None
    page = HTML(string=render_html(result, table_class), url_fetcher=_fetcher(), base_url=None)
    return page.write_pdf(stylesheets=[CSS(string=_PRINT_CSS)])
