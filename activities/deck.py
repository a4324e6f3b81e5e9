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
import base64
import io
import json
import math
import re
import sys
from dataclasses import dataclass, field

from temporalio import activity
from temporalio.exceptions import ApplicationError

from infra.blobs import BlobStore
from workflows.clean import split_lines
from workflows.models import Citation
from workflows.side_models import Deck, DeckRequest

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
MAX_SLIDES = 100  # of the sections (continuations included); what is left out is said
MAX_SOURCE_SLIDES = 10


@dataclass
class SlideSpec:
    title: str
    bullets: list[tuple[int, str]] = field(default_factory=list)  # (level, text)
    table: list[list[str]] = field(default_factory=list)  # header first
    notes: str = ""


# Every pattern here is linear in its input: model text must never make the
# worker backtrack (a heading followed by thousands of spaces took minutes
# with the lazy heading pattern this replaces). Headings, rules, notes, front
# matter and separators are read with string operations; the patterns left
# either run once from the start of a line or scan disjoint stretches.
_BULLET = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)")
_KEY_LINE = re.compile(r"^[A-Za-z_][\w-]*\s*:")
_RULE_CELL = re.compile(r":?-{2,}:?")
# A markdown link or image: its text stops at a bracket and its target at a
# bracket or an unbalanced parenthesis, so no two tries scan the same text.
MARKDOWN_LINK = re.compile(r"!?\[([^\[\]]*)\]\((?:[^()\[\]]|\([^()\[\]]*\))*\)")
_INLINE = re.compile(r"(\*\*|__|`)")
# What no XML document may hold (python-pptx refuses it: "All strings must be
# XML compatible"): C0 controls but tab and newlines, surrogates, U+FFFE/FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` as python-pptx takes it: what XML cannot hold left out."""
    return _NOT_XML.sub("", text)


def plain(text: str) -> str:
    """Markdown emphasis and code marks off; links as their text."""
    return _INLINE.sub("", MARKDOWN_LINK.sub(r"\1", text)).strip()


def heading(line: str) -> str | None:
    """The text of an ATX heading line (``## Title ##``), or None."""
    stripped = line.lstrip()
    if len(line) - len(stripped) > 3 or not stripped.startswith("#"):
        return None
    rest = stripped.lstrip("#")
    if len(stripped) - len(rest) > 6 or not rest[:1].isspace():
        return None
    return rest.strip().rstrip("#").rstrip()


def is_table_rule(line: str) -> bool:
    """Whether a table line is the rule under the header (``|---|:--:|``)."""
    cells = line.strip()
    cells = cells[1:] if cells.startswith("|") else cells
    cells = cells[:-1] if cells.endswith("|") else cells
    return all(_RULE_CELL.fullmatch(cell.strip()) for cell in cells.split("|"))


def split_notes(chunk: str) -> tuple[list[str], str]:
    """The ``<!-- … -->`` comments of a slide, and the slide without them."""
    notes, kept, position = [], [], 0
    while (opening := chunk.find("<!--", position)) >= 0:
        closing = chunk.find("-->", opening + 4)
        if closing < 0:
            break
        kept.append(chunk[position:opening])
        notes.append(chunk[opening + 4 : closing])
        position = closing + 3
    kept.append(chunk[position:])
    return notes, "".join(kept)


def without_front_matter(text: str) -> str:
    """``text`` without a leading ``---``/``key: value``/``---`` block."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return text
    n = 1
    while n < len(lines) and not lines[n].strip():
        n += 1
    keys = n
    while n < len(lines) and _KEY_LINE.match(lines[n]):
        n += 1
    if n == keys or n == len(lines) or not lines[n].startswith("---") or lines[n][3:].strip():
        return text
    return "\n".join(lines[n + 1 :])


def unfenced(text: str) -> str:
    """What a code fence around the whole text holds, else the text."""
    first, _, rest = text.partition("\n")
    body, closing, tail = rest.rpartition("\n```")
    language = first[3:]
    if first.startswith("```") and closing and not tail.strip() and all(c.isalnum() or c in "_-" for c in language):
        return body
    return text


def parse_marp(markdown: str) -> list[SlideSpec]:
    """The slides in Marp-style markdown (front matter and empty slides
    dropped)."""
    text = unfenced(without_front_matter((markdown or "").replace("\r\n", "\n").strip()))
    slides: list[SlideSpec] = []
    chunk: list[str] = []
    for line in [*text.split("\n"), "---"]:
        if line.strip() != "---":
            chunk.append(line)
            continue
        slide = _slide("\n".join(chunk))
        chunk = []
        if slide.title or slide.bullets or slide.table:
            slides.append(slide)
    return slides


def _slide(chunk: str) -> SlideSpec:
    notes, chunk = split_notes(chunk)
    slide = SlideSpec(title="", notes=" ".join(n.strip() for n in notes)[:NOTES_LIMIT])
    for line in split_lines(chunk):  # a U+2028 inside a bullet is no line end
        if not line.strip():
            continue
        title = heading(line)
        if title is not None and not slide.title:
            slide.title = plain(title)
        elif line.lstrip().startswith("|"):
            if not is_table_rule(line):
                cells = [plain(c) for c in line.strip().strip("|").split("|")]
                slide.table.append(cells[:MAX_TABLE_COLUMNS])
        elif bullet := _BULLET.fullmatch(line):
            level = min(len(bullet.group(1).replace("\t", "    ")) // 2, 2)
            slide.bullets.append((level, plain(bullet.group(2))))
        elif title is not None:
            slide.bullets.append((0, plain(title)))
        else:
            slide.bullets.append((0, plain(line)))
    slide.bullets = [(level, b) for level, b in slide.bullets if b]
    return slide


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


Page = tuple[str, str, list, str]  # (kind: "table" | "bullets" | "sources", title, rows/lines/links, notes)


def layout(slides: list[SlideSpec], citations: list[Citation]) -> tuple[list[Page], str]:
    """The pages of the deck after its cover, in order, at most
    ``MAX_SLIDES`` of the sections and ``MAX_SOURCE_SLIDES`` of sources, and
    what was left out ("" when nothing)."""
    width = SLIDE_WIDTH_PT - 2 * MARGIN_PT
    body_height = SLIDE_HEIGHT_PT - BODY_TOP_PT - MARGIN_PT
    pages: list[Page] = []
    left_out = ""
    for n, spec in enumerate(slides):
        section = _section_pages(spec, width, body_height)
        if len(pages) + len(section) > MAX_SLIDES:
            pages.extend(section[: MAX_SLIDES - len(pages)])
            first = spec.title or plain(next((b for _, b in spec.bullets), ""))[:80]
            left_out = (
                f"the deck stops at {MAX_SLIDES} slides: {len(slides) - n:,} of {len(slides):,} sections "
                f"were left out or cut short, from “{first}” on"
            )
            break
        pages.extend(section)
    per_page = max(int(body_height / (16 * LINE_HEIGHT)) // 2, 1)
    links = [(0, c.title or c.url, c.url) for c in citations]
    shown = links[: per_page * MAX_SOURCE_SLIDES]
    pages.extend(
        ("sources", "Sources" + (" (cont.)" if n else ""), shown[n : n + per_page], "")
        for n in range(0, len(shown), per_page)
    )
    if len(shown) < len(links):
        more = f"{len(links) - len(shown):,} of {len(links):,} sources were left out of the sources slides"
        left_out = f"{left_out}; {more}" if left_out else more
    return pages, left_out


def _section_pages(spec: SlideSpec, width: float, body_height: float) -> list[Page]:
    pages: list[Page] = []
    if spec.table:
        header, body = spec.table[0], spec.table[1:] or [[""] * len(spec.table[0])]
        for n, i in enumerate(range(0, len(body), MAX_TABLE_ROWS - 1)):
            if len(pages) > MAX_SLIDES:
                return pages
            pages.append(
                (
                    "table",
                    spec.title + (" (cont.)" if n else ""),
                    [header, *body[i : i + MAX_TABLE_ROWS - 1]],
                    spec.notes,
                )
            )
        if not spec.bullets:
            return pages
    for n, page in enumerate(paginate(spec.bullets, width, body_height, BODY_FONT_PT)):
        if len(pages) > MAX_SLIDES:
            break
        pages.append(("bullets", spec.title + (" (cont.)" if n else ""), page, spec.notes))
    return pages


def build_pptx(slides: list[SlideSpec], title: str, citations: list[Citation]) -> tuple[bytes, int, str]:
    """The deck as .pptx bytes, how many slides it has, and what was left
    out to keep it at most ``MAX_SLIDES`` slides of sections and
    ``MAX_SOURCE_SLIDES`` of sources."""
    from pptx import Presentation
    from pptx.util import Pt

    deck = Presentation()
    _number_new_parts_in_order(deck)
    deck.slide_width, deck.slide_height = Pt(SLIDE_WIDTH_PT), Pt(SLIDE_HEIGHT_PT)
    width = SLIDE_WIDTH_PT - 2 * MARGIN_PT
    body_height = SLIDE_HEIGHT_PT - BODY_TOP_PT - MARGIN_PT

    cover = deck.slides.add_slide(deck.slide_layouts[6])  # blank
    _text_box(cover, title or (slides[0].title if slides else "Research report"), MARGIN_PT, 150, width, 140, 40, True)
    _text_box(cover, "Research report", MARGIN_PT, 300, width, 60, 22, False)
    pages, left_out = layout(slides, citations)
    for kind, heading_text, lines, notes in pages:
        slide = _titled(deck, heading_text, width)
        if kind == "table":
            _table(slide, lines, width, body_height)
        elif kind == "bullets":
            _bullets(slide, lines, width, body_height)
        else:
            _links(slide, lines, width, body_height)
        _notes(slide, notes)
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue(), len(deck.slides), left_out


def _number_new_parts_in_order(deck) -> None:
    """python-pptx names each new part (every slide's notes page) by walking
    every part of the package, which makes building quadratic in the slides
    (2,000 slides took 16 s). Parts are numbered as they are added instead:
    the package is walked once."""
    from pptx.opc.packuri import PackURI

    package = deck.part.package
    taken = {part.partname for part in package.iter_parts()}
    counters: dict[str, int] = {}

    def next_partname(template: str) -> PackURI:
        n = counters.get(template, 1)
        while template % n in taken:
            n += 1
        counters[template] = n + 1
        taken.add(template % n)
        return PackURI(template % n)

    package.next_partname = next_partname


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
    run.text = xml_text(text)
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
        run.text = xml_text(("• " if level == 0 else "– ") + text)
        run.font.size = Pt(BODY_FONT_PT - 2 * level)


def _links(slide, items: list[tuple[int, str, str]], width: float, height: float) -> None:
    from pptx.util import Pt

    box = slide.shapes.add_textbox(Pt(MARGIN_PT), Pt(BODY_TOP_PT), Pt(width), Pt(height))
    frame = box.text_frame
    frame.word_wrap = True
    for i, (_, text, url) in enumerate(items):
        paragraph = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
        run = paragraph.add_run()
        run.text = xml_text(text[:120])
        run.font.size = Pt(16)
        run.hyperlink.address = xml_text(url)


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
            cell.text = xml_text(text if len(text) <= cell_chars else text[: cell_chars - 1] + "…")
            for paragraph in cell.text_frame.paragraphs:
                for run in paragraph.runs:
                    run.font.size = Pt(TABLE_FONT_PT)


def _notes(slide, notes: str) -> None:
    if notes:
        slide.notes_slide.notes_text_frame.text = xml_text(notes)


DECK_MAX_SECONDS = 60.0  # a child building the deck is killed after this long


def build_deck_file(request: DeckRequest) -> tuple[bytes, int, str]:
    """Parse and build (``build_pptx``); ``NoSlides`` when nothing can be read."""
    slides = parse_marp(request.markdown)
    if not slides:
        raise ApplicationError(
            "the slides model wrote no slides (no '---'-separated sections with a heading or bullets)",
            type="NoSlides",
            non_retryable=True,
        )
    return build_pptx(slides, request.title, request.citations)


async def build_in_child(request: DeckRequest, max_seconds: float = DECK_MAX_SECONDS) -> tuple[bytes, int, str]:
    """``build_deck_file`` in a child process, killed once it has run
    ``max_seconds`` (a thread cannot be stopped), with a memory limit: the
    worker's event loop, and every other run's queries, never wait for it."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "activities.deck_child",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(max_seconds):
            out, err = await child.communicate(request.model_dump_json().encode())
    except TimeoutError:
        raise ApplicationError(
            f"building the deck took longer than {max_seconds:g} s", type="DeckTooSlow", non_retryable=True
        ) from None
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    try:
        answer = json.loads(out)
    except ValueError:
        detail = " ".join(err.decode("utf-8", "replace").split())[-300:] or f"exit code {child.returncode}"
        raise ApplicationError(f"building the deck failed: {detail}", type="DeckFailed") from None
    if "refused" in answer:
        raise ApplicationError(answer["refused"], type=answer.get("type") or "NoSlides", non_retryable=True)
    return base64.b64decode(answer["data"]), answer["slides"], answer["cut"]


class DeckActivities:
    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs

    @activity.defn(name="build_deck")
    async def build_deck(self, request: DeckRequest) -> Deck:
        data, count, cut = await build_in_child(request)
        return Deck(blob=await self.blobs.put_bytes(data), slides=count, cut=cut)
