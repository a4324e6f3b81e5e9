"""A folder of documents for the offline web: the evaluation suite's corpus.

    docs = load_corpus(Path("client/evaluation/builtin/corpus"))
    docs[0].path, docs[0].title, docs[0].text, docs[0].media_type

Every ``.md``, ``.html``, ``.txt`` and ``.pdf`` file under the folder (sub-folders
too) is one document, named by its relative posix path. Its text is read once,
here: markdown and plain text as they are, HTML without its tags (stdlib
parser; scripts and styles dropped), PDF through pypdf. Titles come from the
first heading (``# …``), an HTML page's ``<title>`` or first ``<h1>``, a PDF's
document title or first line, else the file name.
"""

from __future__ import annotations

import html as html_lib
import io
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pypdf

MEDIA_TYPES = {
    ".md": "text/plain; charset=utf-8",  # served as plain text (as raw hosts do): crawlers read it
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".pdf": "application/pdf",
}
MAX_FILE_BYTES = 20_000_000  # a corpus document larger than this is refused
_BLOCKS = frozenset(
    "p div br li ul ol table tr h1 h2 h3 h4 h5 h6 section article header footer nav "
    "blockquote pre title dt dd figcaption hr".split()
)
_CELLS = frozenset(("td", "th"))

logging.getLogger("pypdf").setLevel(logging.ERROR)


@dataclass(frozen=True)
class Document:
    path: str  # relative posix path inside the corpus folder
    title: str
    text: str
    media_type: str


def load_corpus(folder: Path) -> list[Document]:
    """Every document under ``folder``, sorted by path. A folder that is
    missing, holds no document, or a file that cannot be read raises
    ``ValueError`` with one line naming it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"corpus folder not found: {folder}")
    documents = []
    root = folder.resolve()
    for file in sorted(folder.rglob("*")):
        if not file.is_file() or file.suffix.lower() not in MEDIA_TYPES:
            continue
        if not file.resolve().is_relative_to(root):
            continue  # a link to a file outside the folder is not part of the corpus
        if any(part.startswith(".") for part in file.relative_to(folder).parts):
            continue
        documents.append(load_document(folder, file))
    if not documents:
        raise ValueError(f"no documents (.md, .html, .txt, .pdf) in the corpus folder {folder}")
    return documents


def load_document(folder: Path, file: Path) -> Document:
    relative = file.relative_to(folder).as_posix()
    suffix = file.suffix.lower()
    try:
        if file.stat().st_size > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES:,} bytes")
        data = file.read_bytes()
        if suffix == ".pdf":
            title, text = _pdf(data)
        else:
            raw = data.decode("utf-8-sig")  # without a byte order mark
            title, text = _html(raw) if suffix in (".html", ".htm") else (_first_heading(raw), raw)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise ValueError(f"cannot read corpus document {relative}: {reason}") from None
    if not text.strip():
        raise ValueError(f"corpus document {relative} has no text")
    return Document(relative, title or file.stem.replace("-", " ").replace("_", " "), text, MEDIA_TYPES[suffix])


def _first_heading(text: str) -> str:
    """The first markdown heading, else the first line if it is short."""
    lines = [line.strip() for line in text.splitlines()[:200] if line.strip()]
    heading = next((line for line in lines if line.startswith("#")), None)
    if heading is not None:
        return heading.lstrip("#").strip()
    return lines[0] if lines and len(lines[0]) <= 120 else ""


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0
        self.title: list[str] = []
        self.h1: list[str] = []
        self._in: str | None = None
        self._h1_done = False

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in ("script", "style", "template"):
            self.skip += 1
        elif tag in ("title", "h1") and self._in is None:
            self._in = tag
        if tag in _BLOCKS:
            self.parts.append("\n")
        elif tag in _CELLS:
            self.parts.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "template"):
            self.skip = max(0, self.skip - 1)
        if tag == self._in:
            self._h1_done = self._h1_done or tag == "h1"
            self._in = None
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        if self._in == "title":
            self.title.append(data)
            return  # the title is not part of the page's text
        if self._in == "h1" and not self._h1_done:
            self.h1.append(data)
        self.parts.append(data)


def _html(raw: str) -> tuple[str, str]:
    parser = _TextParser()
    parser.feed(raw)
    parser.close()
    text = "".join(parser.parts)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join("".join(parser.title).split()) or " ".join("".join(parser.h1).split())
    return html_lib.unescape(title), text


def _pdf(data: bytes) -> tuple[str, str]:
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        pages = [page.extract_text() or "" for page in reader.pages]
        meta = reader.metadata
        title = str(meta.title).strip() if meta and meta.title else ""
    except Exception as err:  # noqa: BLE001 - pypdf raises many types on broken files
        raise ValueError(f"not a readable PDF ({' '.join(str(err).split()) or type(err).__name__})") from None
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    if not title:
        title = next((line.strip() for line in text.splitlines() if line.strip()), "")[:120]
    return title, text
