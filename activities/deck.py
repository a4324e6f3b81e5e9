"""Slides: the slides model's Marp markdown, parsed and built into a real
``.pptx`` with python-pptx.

The markdown (see README, "Slides"): slides separated by a line ``---``, each
with one ``#`` or ``##`` heading, bullets as ``- `` lines, an optional markdown
table, speaker notes in an HTML comment ``<!-- ... -->``.

The deck: a title slide, one slide per section (tables as tables), and a
sources slide with the run's verified citations as links. Text never
overflows its box: bullets are measured (characters per line, lines per box,
at the font size used) and what does not fit goes on a continuation slide.
"""

from __future__ import annotations

import asyncio
import io
import math
import re
from dataclasses import dataclass, field

from temporalio import activity
from temporalio.exceptions import ApplicationError

from infra.blobs import BlobStore
from workflows.models import Citation, Deck, DeckRequest

# 16:9, in points (1 pt = 12,700 EMU).
SLIDE_WIDTH_PT, SLIDE_HEIGHT_PT = 960, 540
MARGIN_PT = 48
TITLE_HEIGHT_PT = 80
BODY_TOP_PT = MARGIN_PT + TITLE_HEIGHT_PT + 8
BODY_FONT_PT = 20
TABLE_FONT_PT = 14
NOTES_LIMIT = 3000
# How wide a character and how tall a line is, relative to the font size:
# generous, so the estimate errs on the side of a new slide.
CHAR_WIDTH = 0.55
LINE_HEIGHT = 1.25
MAX_TABLE_ROWS = 8  # per slide, header included
MAX_TABLE_COLUMNS = 8


@dataclass
class SlideSpec:
    title: str
    bullets: list[tuple[int, str]] = field(default_factory=list)  # (level, text)
    table: list[list[str]] = field(default_factory=list)  # header first
    notes: str = ""


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_NOTES = re.compile(r"<!--(.*?)-->", re.DOTALL)
_FRONT_MATTER = re.compile(r"\A\s*---\s*\n(?:[A-Za-z_][\w-]*\s*:.*\n)+---\s*\n")
_INLINE = re.compile(r"(\*\*|__|`)")


def plain(text: str) -> str:
    """Markdown emphasis and code marks off; links as their text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return _INLINE.sub("", text).strip()


def parse_marp(markdown: str) -> list[SlideSpec]:
    """The slides in Marp-style markdown (front matter and empty slides
    dropped)."""
    text = _FRONT_MATTER.sub("", (markdown or "").replace("\r\n", "\n").strip())
    fence = re.match(r"^```[\w-]*\n(.*)\n```\s*$", text, re.DOTALL)
    text = fence.group(1) if fence else text
    slides: list[SlideSpec] = []
    for chunk in re.split(r"^\s*---\s*$", text, flags=re.MULTILINE):
        notes = " ".join(n.strip() for n in _NOTES.findall(chunk))
        chunk = _NOTES.sub("", chunk)
        slide = SlideSpec(title="", notes=notes[:NOTES_LIMIT])
        for line in chunk.splitlines():
            if not line.strip():
                continue
            if (heading := _HEADING.match(line)) and not slide.title:
                slide.title = plain(heading.group(1))
            elif line.lstrip().startswith("|"):
                if not _TABLE_RULE.match(line):
                    cells = [plain(c) for c in line.strip().strip("|").split("|")]
                    slide.table.append(cells[:MAX_TABLE_COLUMNS])
            elif bullet := _BULLET.match(line):
                level = min(len(bullet.group(1).replace("\t", "    ")) // 2, 2)
                slide.bullets.append((level, plain(bullet.group(2))))
            elif heading:
                slide.bullets.append((0, plain(heading.group(1))))
            else:
                slide.bullets.append((0, plain(line)))
        slide.bullets = [(level, b) for level, b in slide.bullets if b]
        if slide.title or slide.bullets or slide.table:
            slides.append(slide)
    return slides


# --- fitting text into boxes -------------------------------------------------------


def lines_needed(text: str, width_pt: float, font_pt: float, indent_pt: float = 0) -> int:
    """Lines ``text`` takes when wrapped in a box ``width_pt`` wide."""
    per_line = max(int((width_pt - indent_pt) / (font_pt * CHAR_WIDTH)), 1)
    return max(math.ceil(len(text) / per_line), 1)


def paginate(bullets: list[tuple[int, str]], width_pt: float, height_pt: float, font_pt: float) -> list[list]:
    """Bullets in pages that each fit the box; a bullet too long for a whole
    box is cut at a word boundary and goes on."""
    capacity = max(int(height_pt / (font_pt * LINE_HEIGHT)), 1)
    pages: list[list[tuple[int, str]]] = [[]]
    used = 0
    for level, text in bullets:
        indent = level * 24
        while text:
            need = lines_needed(text, width_pt, font_pt, indent)
            if used + need <= capacity:
                pages[-1].append((level, text))
                used += need
                break
            room = capacity - used
            if room <= 0:
                pages.append([])
                used = 0
                continue
            per_line = max(int((width_pt - indent) / (font_pt * CHAR_WIDTH)), 1)
            head = text[: room * per_line]
            cut = head.rfind(" ")
            head = head[:cut] if cut > per_line // 2 else head
            pages[-1].append((level, head.rstrip()))
            text = text[len(head) :].lstrip()
            pages.append([])
            used = 0
    return [page for page in pages if page] or [[]]


# --- building the deck -----------------------------------------------------------


def build_pptx(slides: list[SlideSpec], title: str, citations: list[Citation]) -> tuple[bytes, int]:
    """The deck as .pptx bytes, and how many slides it has."""
    from pptx import Presentation
    from pptx.util import Pt

    deck = Presentation()
    deck.slide_width, deck.slide_height = Pt(SLIDE_WIDTH_PT), Pt(SLIDE_HEIGHT_PT)
    width = SLIDE_WIDTH_PT - 2 * MARGIN_PT
    body_height = SLIDE_HEIGHT_PT - BODY_TOP_PT - MARGIN_PT

    cover = deck.slides.add_slide(deck.slide_layouts[6])  # blank
    _text_box(cover, title or (slides[0].title if slides else "Research report"), MARGIN_PT, 150, width, 140, 40, True)
    _text_box(cover, "Research report", MARGIN_PT, 300, width, 60, 22, False)

    for spec in slides:
        if spec.table:
            rows = spec.table
            header, body = rows[0], rows[1:] or [[""] * len(rows[0])]
            chunks = [body[i : i + MAX_TABLE_ROWS - 1] for i in range(0, len(body), MAX_TABLE_ROWS - 1)]
            for n, chunk in enumerate(chunks):
                slide = _titled(deck, spec.title + (" (cont.)" if n else ""), width)
                _table(slide, [header, *chunk], width, body_height)
                _notes(slide, spec.notes)
            if not spec.bullets:
                continue
        for n, page in enumerate(paginate(spec.bullets, width, body_height, BODY_FONT_PT)):
            slide = _titled(deck, spec.title + (" (cont.)" if n else ""), width)
            _bullets(slide, page, width, body_height)
            _notes(slide, spec.notes)

    sources = [(0, c.title or c.url, c.url) for c in citations]
    if sources:
        per_page = max(int(body_height / (16 * LINE_HEIGHT)) // 2, 1)
        for n in range(0, len(sources), per_page):
            slide = _titled(deck, "Sources" + (" (cont.)" if n else ""), width)
            _links(slide, sources[n : n + per_page], width, body_height)
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue(), len(deck.slides)


def _titled(deck, title: str, width: float):
    slide = deck.slides.add_slide(deck.slide_layouts[6])  # blank: every box is ours, measured
    lines = lines_needed(title, width, 30)
    _text_box(slide, title, MARGIN_PT, MARGIN_PT, width, TITLE_HEIGHT_PT, 30 if lines <= 2 else 22, True)
    return slide


def _text_box(slide, text: str, left: float, top: float, width: float, height: float, size: int, bold: bool):
    from pptx.util import Pt

    box = slide.shapes.add_textbox(Pt(left), Pt(top), Pt(width), Pt(height))
    frame = box.text_frame
    frame.word_wrap = True
    run = frame.paragraphs[0].add_run()
    run.text = text
    run.font.size, run.font.bold = Pt(size), bold
    return box


def _bullets(slide, page: list[tuple[int, str]], width: float, height: float) -> None:
    from pptx.util import Pt

    box = slide.shapes.add_textbox(Pt(MARGIN_PT), Pt(BODY_TOP_PT), Pt(width), Pt(height))
    frame = box.text_frame
    frame.word_wrap = True
    for i, (level, text) in enumerate(page):
        paragraph = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
        paragraph.level = level
        run = paragraph.add_run()
        run.text = ("• " if level == 0 else "– ") + text
        run.font.size = Pt(BODY_FONT_PT - 2 * level)


def _links(slide, items: list[tuple[int, str, str]], width: float, height: float) -> None:
    from pptx.util import Pt

    box = slide.shapes.add_textbox(Pt(MARGIN_PT), Pt(BODY_TOP_PT), Pt(width), Pt(height))
    frame = box.text_frame
    frame.word_wrap = True
    for i, (_, text, url) in enumerate(items):
        paragraph = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
        run = paragraph.add_run()
        run.text = text[:120]
        run.font.size = Pt(16)
        run.hyperlink.address = url


def _table(slide, rows: list[list[str]], width: float, height: float) -> None:
    from pptx.util import Pt

    columns = max(len(r) for r in rows)
    row_height = min(height / len(rows), 48)
    shape = slide.shapes.add_table(
        len(rows), columns, Pt(MARGIN_PT), Pt(BODY_TOP_PT), Pt(width), Pt(row_height * len(rows))
    )
    cell_chars = max(int(width / columns / (TABLE_FONT_PT * CHAR_WIDTH)) * 2, 8)  # two lines a cell
    for r, row in enumerate(rows):
        for c in range(columns):
            cell = shape.table.cell(r, c)
            text = row[c] if c < len(row) else ""
            cell.text = text if len(text) <= cell_chars else text[: cell_chars - 1] + "…"
            for paragraph in cell.text_frame.paragraphs:
                for run in paragraph.runs:
                    run.font.size = Pt(TABLE_FONT_PT)


def _notes(slide, notes: str) -> None:
    if notes:
        slide.notes_slide.notes_text_frame.text = notes


class DeckActivities:
    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs

    @activity.defn(name="build_deck")
    async def build_deck(self, request: DeckRequest) -> Deck:
        slides = parse_marp(request.markdown)
        if not slides:
            raise ApplicationError(
                "the slides model wrote no slides (no '---'-separated sections with a heading or bullets)",
                type="NoSlides",
                non_retryable=True,
            )
        data, count = await asyncio.to_thread(build_pptx, slides, request.title, request.citations)
        return Deck(blob=await self.blobs.put_bytes(data), slides=count)
