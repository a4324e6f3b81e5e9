"""A report as a Word document (.docx), made with python-docx from the
report's markdown as markdown-it-py reads it (the parser of the HTML export).

Headings become Word headings (so the navigation pane and a table of contents
work), lists Word lists, markdown tables Word tables, links real hyperlinks;
the run's sources follow as a numbered list of links, then the question and
usage. Only http(s) and file URLs become links (``client/export.py``'s rule).
East Asian text gets an East Asian font, so Word and LibreOffice render it.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from docx import Document
from docx.enum.text import WD_COLOR_INDEX
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Pt, RGBColor
from markdown_it import MarkdownIt

from client.export import is_link_url, without_own_sources
from client.wording import usage_text

if TYPE_CHECKING:
    from docx.document import Document as DocumentType
    from docx.text.paragraph import Paragraph
    from markdown_it.token import Token

    from workflows.models import ResearchResult

EAST_ASIAN_FONT = "Noto Sans CJK SC"
CODE_FONT = "DejaVu Sans Mono"
LINK_COLOR = RGBColor(0x09, 0x69, 0xDA)


def render_docx(result: ResearchResult) -> bytes:
    document = Document()
    _east_asian_fonts(document, result.locale)
    markdown = without_own_sources(result.final_report) if result.citations else result.final_report
    tokens = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).parse(markdown)
    _Writer(document).blocks(tokens)
    _sources(document, result)
    footer = document.add_paragraph()
    footer.add_run(f"Question: {result.question}\n{usage_text(result.usage)}").italic = True
    document.core_properties.title = (result.plan.title if result.plan else "") or result.question[:200]
    document.core_properties.language = result.locale or "en-US"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _east_asian_fonts(document: DocumentType, locale: str) -> None:
    for name in ("Normal", "Heading 1", "Heading 2", "Heading 3", "Heading 4", "Title"):
        fonts = document.styles[name].element.get_or_add_rPr().get_or_add_rFonts()
        fonts.set(qn("w:eastAsia"), EAST_ASIAN_FONT)
    if (locale or "").lower().startswith(("zh", "ja", "ko")):
        lang = OxmlElement("w:lang")
        lang.set(qn("w:eastAsia"), locale)
        document.styles["Normal"].element.get_or_add_rPr().append(lang)


def add_link(paragraph: Paragraph, url: str, text: str) -> None:
    """A clickable hyperlink run (python-docx has no API for one)."""
    rel = paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel)
    run = paragraph.add_run(text)
    run.font.color.rgb = LINK_COLOR
    run.font.underline = True
    link.append(run._r)
    paragraph._p.append(link)


def _sources(document: DocumentType, result: ResearchResult) -> None:
    seen: set[str] = set()
    citations = [c for c in result.citations if c.url.strip() and not (c.url in seen or seen.add(c.url))]
    if not citations:
        return
    document.add_heading("Sources", level=2)
    for citation in citations:
        paragraph = document.add_paragraph(style="List Number")
        title = citation.title.strip() or citation.url
        if is_link_url(citation.url):
            add_link(paragraph, citation.url, title)
        else:
            paragraph.add_run(title)
        paragraph.add_run(f"\n{citation.url}").font.size = Pt(8)


class _Writer:
    """Walks markdown-it's block tokens and writes them into the document."""

    def __init__(self, document: DocumentType) -> None:
        self.document = document
        self.lists: list[str] = []  # "List Bullet" / "List Number", innermost last
        self.quote = 0

    def blocks(self, tokens: list[Token]) -> None:
        i = 0
        while i < len(tokens):
            i = self.block(tokens, i)

    def block(self, tokens: list[Token], i: int) -> int:
        token = tokens[i]
        kind = token.type
        if kind == "heading_open":
            level = min(int(token.tag[1]), 4)
            self.inline(self.document.add_heading("", level=0 if level == 1 else level), tokens[i + 1])
            return i + 3
        if kind == "paragraph_open":
            self.inline(self.paragraph(), tokens[i + 1])
            return i + 3
        if kind in ("bullet_list_open", "ordered_list_open"):
            self.lists.append("List Bullet" if kind == "bullet_list_open" else "List Number")
        elif kind in ("bullet_list_close", "ordered_list_close"):
            self.lists.pop()
        elif kind == "blockquote_open":
            self.quote += 1
        elif kind == "blockquote_close":
            self.quote -= 1
        elif kind in ("fence", "code_block"):
            self.code(token.content)
        elif kind == "hr":
            self.document.add_paragraph("─" * 30)
        elif kind == "table_open":
            return self.table(tokens, i)
        return i + 1

    def paragraph(self) -> Paragraph:
        if self.lists:
            depth = len(self.lists)
            style = self.lists[-1] + ("" if depth == 1 else f" {min(depth, 3)}")
            return self.document.add_paragraph(style=style)
        return self.document.add_paragraph(style="Quote" if self.quote else None)

    def code(self, text: str) -> None:
        paragraph = self.document.add_paragraph()
        run = paragraph.add_run(text.rstrip("\n"))
        run.font.name = CODE_FONT
        run.font.size = Pt(9)

    def table(self, tokens: list[Token], i: int) -> int:
        rows: list[list[Token]] = []
        headers = 0
        while tokens[i].type != "table_close":
            token = tokens[i]
            if token.type == "tr_open":
                rows.append([])
            elif token.type in ("th_open", "td_open"):
                rows[-1].append(tokens[i + 1])
                headers += token.type == "th_open"
            i += 1
        width = max((len(row) for row in rows), default=0)
        if width:
            table = self.document.add_table(rows=len(rows), cols=width)
            table.style = "Table Grid"
            # Row by row: each row's cells once (Table.cell(r, c) lists the whole
            # table's cells on every call, quadratic in the cells).
            for r, (row, word_row) in enumerate(zip(rows, table.rows, strict=True)):
                for cell, word_cell in zip(row, word_row.cells, strict=False):
                    self.inline(word_cell.paragraphs[0], cell, bold=r == 0 and headers > 0)
        return i + 1

    def inline(self, paragraph: Paragraph, token: Token, bold: bool = False) -> None:
        bold_depth, italic, strike, link = int(bold), 0, 0, None
        for child in token.children or []:
            kind = child.type
            if kind == "strong_open":
                bold_depth += 1
            elif kind == "strong_close":
                bold_depth -= 1
            elif kind == "em_open":
                italic += 1
            elif kind == "em_close":
                italic -= 1
            elif kind == "s_open":
                strike += 1
            elif kind == "s_close":
                strike -= 1
            elif kind == "link_open":
                href = str(child.attrGet("href") or "")
                link = href if is_link_url(href) else None
            elif kind == "link_close":
                link = None
            elif kind in ("softbreak", "hardbreak"):
                paragraph.add_run().add_break() if kind == "hardbreak" else paragraph.add_run(" ")
            elif kind in ("text", "code_inline", "image"):
                text = child.content if kind != "image" else (child.content or str(child.attrGet("src") or ""))
                if link:
                    add_link(paragraph, link, text)
                    continue
                run = paragraph.add_run(text)
                run.bold, run.italic, run.font.strike = bold_depth > 0, italic > 0, strike > 0
                if kind == "code_inline":
                    run.font.name = CODE_FONT
                    run.font.highlight_color = WD_COLOR_INDEX.GRAY_25
