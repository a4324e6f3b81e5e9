"""Splitting documents into sections: markdown headings (ATX and setext),
front matter, fences; plain text into chunks; every file type into
markdown first (``activities/documents.py``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from activities.documents import CONVERTERS, pdf_in_child
from workflows.clean import split_lines

# File types, by extension.
KINDS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".rst": "text",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".pdf": "pdf",
}
SKIP_DIRS = {"node_modules", "__pycache__", "venv", "site-packages"}
CHUNK_CHARS = 1_500  # target size of a section without headings
PDF_MAX_PAGES = 1_000
PDF_MAX_SECONDS = 120.0


@dataclass
class Section:
    title: str
    slug: str
    text: str
    context: str = ""  # the headings above this one, for search only


# --- splitting documents into sections ------------------------------------------

# Patterns that see a document's text run once from a line's start or scan
# disjoint stretches: linear whatever the text (the lazy heading patterns
# these replace were quadratic on a heading followed by many spaces).
_ATX_OPEN = re.compile(r"^ {0,3}(#{1,6})[ \t]+")
_H1_OPEN = re.compile(r"^ {0,3}#([ \t]+)")
_LINK = re.compile(r"!?\[([^\[\]]*)\]\((?:[^()\[\]]|\([^()\[\]]*\))*\)")  # as activities/deck.py
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)


def slugify(title: str) -> str:
    """A GitHub-style anchor: lower case, punctuation dropped, spaces to hyphens."""
    slug = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return slug.replace(" ", "-") or "section"


def _clean_heading(text: str) -> str:
    text = _LINK.sub(r"\1", text)  # links and images: their text
    text = re.sub(r"[*_`]+", "", text)
    return " ".join(text.split())


def atx_heading(line: str) -> tuple[int, str] | None:
    """Level and text of an ATX heading line (``## Title ##``), or None."""
    opening = _ATX_OPEN.match(line)
    if not opening:
        return None
    rest = line[opening.end() :].rstrip(" \t")
    text = rest.rstrip("#")
    if text != rest and text[-1:] in (" ", "\t"):
        rest = text.rstrip(" \t")  # a closing sequence
    return len(opening.group(1)), rest


def first_h1(markdown: str) -> str | None:
    """The text of the first ``# Title`` line, or None."""
    for line in markdown.split("\n"):
        if opening := _H1_OPEN.match(line):
            rest = line[opening.end() :]
            if rest:
                return rest.rstrip(" \t#") or rest[0]
            if len(opening.group(1)) > 1:
                return opening.group(1)[-1]
    return None


def _split_long(paragraph: str, size: int) -> Iterator[str]:
    """Cut a paragraph longer than ``size`` at sentence ends, else at spaces."""
    while len(paragraph) > size:
        window = paragraph[:size]
        cut = max(window.rfind(". "), window.rfind("? "), window.rfind("! "), window.rfind("\n"))
        if cut < size // 2:
            cut = window.rfind(" ")
        if cut < size // 2:
            cut = size - 1
        yield paragraph[: cut + 1].strip()
        paragraph = paragraph[cut + 1 :].strip()
    if paragraph:
        yield paragraph


def chunk_text(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """Pieces of about ``size`` characters, cut at paragraph boundaries."""
    chunks: list[str] = []
    current = ""
    for raw in re.split(r"\n[ \t]*\n", text):
        for paragraph in _split_long(raw.strip(), size):
            if current and len(current) + 2 + len(paragraph) > size:
                chunks.append(current)
                current = paragraph
            else:
                current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        chunks.append(current)
    return chunks


def split_sections(markdown: str, size: int = CHUNK_CHARS) -> list[Section]:
    """Sections at markdown headings (ATX ``#`` and setext underlines, not
    inside code fences); text without a heading, and long sections, are cut
    into chunks of about ``size`` characters."""
    markdown = _FRONT_MATTER.sub("", markdown.lstrip("\ufeff"), count=1)
    # (level, heading, headings above it, lines); level 0 is the text before any heading
    blocks: list[tuple[int, str, str, list[str]]] = [(0, "", "", [])]
    stack: list[tuple[int, str]] = []
    fence = ""

    def start(level: int, raw: str) -> None:
        heading = _clean_heading(raw)
        while stack and stack[-1][0] >= level:
            stack.pop()
        above = " ".join(h for _, h in stack)
        stack.append((level, heading))
        blocks.append((level, heading, above, []))

    for line in split_lines(markdown):  # markdown ends lines at CR and LF only
        lines = blocks[-1][3]
        if fence:
            if line.strip().startswith(fence):
                fence = ""
            lines.append(line)
            continue
        if match := _FENCE.match(line):
            fence = match.group(1)
            lines.append(line)
            continue
        if atx := atx_heading(line):
            start(*atx)
            continue
        if _SETEXT.match(line) and _setext_text(lines):
            start(1 if line.strip().startswith("=") else 2, lines.pop())
            continue
        lines.append(line)

    sections: list[Section] = []
    slugs: dict[str, int] = {}
    untitled: list[str] = []
    for _, heading, above, lines in blocks:
        pieces = chunk_text("\n".join(lines).strip(), size)
        if not heading:
            untitled.extend(pieces)
            continue
        base = slugify(heading)
        seen = slugs.get(base, 0)
        slugs[base] = seen + 1
        slug = base if seen == 0 else f"{base}-{seen}"
        # A heading directly followed by a sub-heading has no section of its
        # own; its words are searchable through the sections below it.
        sections.extend(Section(heading, slug, piece, above) for piece in pieces)
    if len(untitled) == 1:
        sections.insert(0, Section("", "", untitled[0]))
    else:
        parts = [Section(f"Part {n}", f"part-{n}", t) for n, t in enumerate(untitled, 1)]
        sections[:0] = parts
    return sections


def _setext_text(lines: list[str]) -> bool:
    """Whether the line before an ``===``/``---`` line is heading text (not a
    blank line, list item, quote, fence or table row, where ``---`` is a rule)."""
    if not lines or not lines[-1].strip():
        return False
    last = lines[-1]
    return not (re.match(r"^\s*([-*+>|]|\d+[.)]\s)", last) or _FENCE.match(last))


# --- reading files ------------------------------------------------------------


def read_document(path: Path, data: bytes) -> tuple[str, list[Section]]:
    """Title and sections of a file's content; ``CrawlRefused`` if unreadable."""
    kind = KINDS[path.suffix.lower()]
    url = path.as_uri()
    if kind == "pdf":
        title, markdown = pdf_in_child(data, "", max_pages=PDF_MAX_PAGES, max_seconds=PDF_MAX_SECONDS)
    elif kind == "html":
        title, markdown = CONVERTERS["text/html"](data, None, url)
    else:
        first_line, markdown = CONVERTERS["text/plain"](data, None, url)
        markdown = markdown.lstrip("\ufeff")
        title = first_line if kind == "text" else ""
        if kind == "markdown":
            h1 = first_h1(markdown)
            title = _clean_heading(h1) if h1 is not None else ""
    sections = _text_sections(markdown) if kind == "text" else split_sections(markdown)
    return title, sections


def _text_sections(text: str) -> list[Section]:
    pieces = chunk_text(text.strip())
    if len(pieces) == 1:
        return [Section("", "", pieces[0])]
    return [Section(f"Part {n}", f"part-{n}", t) for n, t in enumerate(pieces, 1)]


# --- the index ----------------------------------------------------------------
