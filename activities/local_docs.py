"""Local documents: the ``index_resources`` and ``local_search`` tools.

The files and folders a run was given with ``--resource`` (markdown, text,
HTML, PDF) are split into sections and stored in an embedded SQLite FTS5
index, one index file per run under ``<data dir>/indexes/``. The researcher
searches it with ``local_search(query)``; every hit cites the file and the
section as ``file:///absolute/path#section-slug``.

Indexing is idempotent: a file whose modification time and size did not
change is skipped, so a retried activity (or a resumed run) redoes nothing.
Files that cannot be read are reported in the summary, never fatal.

With a shared store (``SharedIndexes``: the payload bucket, when
DEEPRESEARCH_PAYLOAD_S3_BUCKET is set), the worker that indexed a run's
documents uploads a copy of the index, and a worker on another machine
fetches it before its first search of that run.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sqlite3
import tempfile
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from urllib.parse import quote

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.crawl import CONVERTERS, CrawlRefused, pdf_to_markdown
from infra.blobs import ObjectClient, get_if_present, write_atomically
from workflows.models import Citation, IndexRequest, LocalSearchRequest, ToolResult

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
MAX_FILE_BYTES = 50_000_000
MAX_FILES = 5_000
PDF_MAX_PAGES = 1_000
PDF_MAX_SECONDS = 120.0
EXCERPT_CHARS = 1_500  # text shown to the model per hit (about one section)
SNIPPET_CHARS = 300
MAX_LISTED_PROBLEMS = 10
SCHEMA_VERSION = 1

# bm25 weights for the indexed columns (file name, section title, body).
_WEIGHTS = (2.0, 4.0, 1.0)
_WORD = re.compile(r"[^\W_]+")
# Han, kana, hangul: no spaces between words, so each character is indexed
# as its own token and a word is searched as a phrase of characters.
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK = re.compile(f"([{_CJK_CHARS}])")
_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+")
_STOPWORDS = frozenset(
    """a an and are as at be by can do does for from how in is it its of on or
    that the their there these this to was were what when where which who why
    will with about into than then""".split()
)


# --- requests (the lead moves these to workflows/models.py) -------------------


# --- results ------------------------------------------------------------------


@dataclass
class IndexReport:
    files: int = 0  # supported files found
    indexed: int = 0  # (re)indexed in this call
    unchanged: int = 0  # skipped: same modification time and size
    removed: int = 0  # indexed earlier, now deleted from disk
    ignored: int = 0  # files of other types inside given folders
    sections: int = 0  # sections written in this call
    total_files: int = 0  # in the index afterwards
    total_sections: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = (
            f"Local documents: {self.total_files} files, {self.total_sections} sections "
            f"searchable ({self.indexed} indexed now with {self.sections} sections, "
            f"{self.unchanged} unchanged"
        )
        if self.removed:
            text += f", {self.removed} removed"
        if self.ignored:
            text += f", {self.ignored} other files ignored"
        text += ")."
        if self.problems:
            text += f"\nProblems ({len(self.problems)}):"
            text += "".join(f"\n- {p}" for p in self.problems[:MAX_LISTED_PROBLEMS])
            if len(self.problems) > MAX_LISTED_PROBLEMS:
                text += f"\n- … and {len(self.problems) - MAX_LISTED_PROBLEMS} more"
        return text


@dataclass
class Hit:
    path: str  # absolute
    name: str  # file name
    section: str  # section title ("" for an untitled part)
    slug: str  # section anchor ("" when the file is one untitled part)
    text: str  # the section's text
    snippet: str  # a short excerpt around the first matching word
    score: float  # bm25: lower is better

    @property
    def title(self) -> str:
        return f"{self.name} — {self.section}" if self.section else self.name

    @property
    def url(self) -> str:
        uri = Path(self.path).as_uri()
        return f"{uri}#{quote(self.slug, safe='-_')}" if self.slug else uri


@dataclass
class Section:
    title: str
    slug: str
    text: str
    context: str = ""  # the headings above this one, for search only


# --- splitting documents into sections ------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)


def slugify(title: str) -> str:
    """A GitHub-style anchor: lower case, punctuation dropped, spaces to hyphens."""
    slug = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return slug.replace(" ", "-") or "section"


def _clean_heading(text: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"[*_`]+", "", text)
    return " ".join(text.split())


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

    for line in markdown.splitlines():
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
        if match := _ATX.match(line):
            start(len(match.group(1)), match.group(2))
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
        title, markdown = pdf_to_markdown(data, "", max_pages=PDF_MAX_PAGES, max_seconds=PDF_MAX_SECONDS)
    elif kind == "html":
        title, markdown = CONVERTERS["text/html"](data, None, url)
    else:
        first_line, markdown = CONVERTERS["text/plain"](data, None, url)
        markdown = markdown.lstrip("\ufeff")
        title = first_line if kind == "text" else ""
        if kind == "markdown":
            h1 = re.search(r"^ {0,3}#[ \t]+(.+?)[ \t#]*$", markdown, re.M)
            title = _clean_heading(h1.group(1)) if h1 else ""
    sections = _text_sections(markdown) if kind == "text" else split_sections(markdown)
    return title, sections


def _text_sections(text: str) -> list[Section]:
    pieces = chunk_text(text.strip())
    if len(pieces) == 1:
        return [Section("", "", pieces[0])]
    return [Section(f"Part {n}", f"part-{n}", t) for n, t in enumerate(pieces, 1)]


# --- the index ----------------------------------------------------------------


@cache
def fts5_available() -> bool:
    with closing(sqlite3.connect(":memory:")) as conn:
        try:
            conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        except sqlite3.OperationalError:
            return False
    return True


def _spaced(text: str) -> str:
    return _CJK.sub(r" \1 ", text)


def query_terms(query: str) -> list[str]:
    """The words of a free-text query (FTS5 syntax characters dropped),
    without stop words unless nothing else is left; at most 24."""
    words: dict[str, str] = {}  # lower case -> first spelling
    for word in _WORD.findall(unicodedata.normalize("NFKC", query)):
        words.setdefault(word.lower(), word)
    content = [w for key, w in words.items() if key not in _STOPWORDS]
    return (content or list(words.values()))[:24]


def _phrase(term: str) -> str:
    return '"' + " ".join(_spaced(term).split()) + '"'


def _bigram_phrases(term: str) -> list[str]:
    """For the any-word query: CJK runs also match by overlapping pairs."""
    phrases = [_phrase(term)]
    for run in _CJK_RUN.findall(term):
        if len(run) > 2:
            phrases.extend(_phrase(run[i : i + 2]) for i in range(len(run) - 1))
    return phrases


def _excerpt(text: str, terms: list[str], width: int) -> str:
    """About ``width`` characters of ``text`` around the first matching term."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lowered = flat.lower()
    found = [i for t in terms if (i := lowered.find(t.lower())) >= 0]
    start = max(0, min(found) - width // 4) if found else 0
    end = min(len(flat), start + width)
    start = max(0, end - width)
    if start > 0 and (space := flat.find(" ", start, start + 40)) >= 0:
        start = space + 1
    piece = flat[start:end]
    return ("… " if start > 0 else "") + piece + (" …" if end < len(flat) else "")


class LocalIndex:
    """A full-text index of local files in one SQLite database file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        if not fts5_available():
            raise RuntimeError(
                "this Python's SQLite has no FTS5 full-text search; install a Python built with FTS5 to use --resource"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                with conn:
                    conn.executescript(
                        f"""
                        CREATE TABLE IF NOT EXISTS files(
                            path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL,
                            size INTEGER NOT NULL, title TEXT NOT NULL);
                        CREATE TABLE IF NOT EXISTS sections(
                            id INTEGER PRIMARY KEY, path TEXT NOT NULL, name TEXT NOT NULL,
                            title TEXT NOT NULL, slug TEXT NOT NULL, body TEXT NOT NULL);
                        CREATE INDEX IF NOT EXISTS sections_path ON sections(path);
                        CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
                            name, title, body, tokenize='porter unicode61 remove_diacritics 2');
                        PRAGMA user_version={SCHEMA_VERSION};
                        """
                    )
            yield conn
        finally:
            conn.close()

    def snapshot(self) -> bytes:
        """The whole index as one self-contained SQLite file (WAL folded in)."""
        with tempfile.TemporaryDirectory() as folder:
            copy = Path(folder) / "index.sqlite"
            with self._connect() as conn, closing(sqlite3.connect(copy)) as target:
                conn.backup(target)
                target.execute("PRAGMA journal_mode=DELETE")
            return copy.read_bytes()

    # -- indexing --

    def index(self, paths: list[str], progress: Callable[[int], None] | None = None) -> IndexReport:
        """Index files and folders (recursively); ``progress`` gets the count
        of files handled so far."""
        report = IndexReport()
        with self._connect() as conn:
            known = {row[0]: (row[1], row[2]) for row in conn.execute("SELECT path, mtime_ns, size FROM files")}
            seen: set[str] = set()
            for file in self._walk(paths, report):
                if str(file) in seen:
                    continue
                seen.add(str(file))
                report.files += 1
                if report.files > MAX_FILES:
                    report.files -= 1
                    report.problems.append(f"stopped after {MAX_FILES} files")
                    break
                self._index_file(conn, file, known.get(str(file)), report)
                if progress:
                    progress(report.files)
            for path in known.keys() - seen:
                if not os.path.exists(path):
                    with conn:
                        self._delete(conn, path)
                    report.removed += 1
            report.total_files = conn.execute("SELECT count(*) FROM files").fetchone()[0]
            report.total_sections = conn.execute("SELECT count(*) FROM sections").fetchone()[0]
        return report

    def _walk(self, paths: list[str], report: IndexReport) -> Iterator[Path]:
        for given in paths:
            try:
                path = Path(given).expanduser().resolve()
            except (OSError, RuntimeError) as e:
                report.problems.append(f"{given}: {e}")
                continue
            if path.is_dir():
                yield from self._walk_folder(path, report)
            elif path.is_file():
                if path.suffix.lower() in KINDS:
                    yield path
                else:
                    report.problems.append(
                        f"{path}: unsupported file type ({path.suffix or 'no extension'}); "
                        "supported: markdown, text, HTML, PDF"
                    )
            elif path.exists():
                report.problems.append(f"{path}: not a regular file or folder")
            else:
                report.problems.append(f"{given}: not found")

    def _walk_folder(self, root: Path, report: IndexReport) -> Iterator[Path]:
        def failed(error: OSError) -> None:
            report.problems.append(f"{error.filename}: cannot list folder ({error.strerror})")

        for folder, dirs, files in os.walk(root, onerror=failed):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
            for name in sorted(files):
                if name.startswith("."):
                    continue
                if Path(name).suffix.lower() in KINDS:
                    yield Path(folder, name)
                else:
                    report.ignored += 1

    def _index_file(
        self,
        conn: sqlite3.Connection,
        file: Path,
        known: tuple[int, int] | None,
        report: IndexReport,
    ) -> None:
        try:
            stat = file.stat()
            if known == (stat.st_mtime_ns, stat.st_size):
                report.unchanged += 1
                return
            if stat.st_size > MAX_FILE_BYTES:
                raise CrawlRefused(f"too large ({stat.st_size:,} bytes, limit {MAX_FILE_BYTES:,})")
            title, sections = read_document(file, file.read_bytes())
            sections = [s for s in sections if s.text.strip()]
            if not sections:
                raise CrawlRefused("no readable text")
        except Exception as e:  # noqa: BLE001 - one bad file must not stop the others
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            reason = (reason or type(e).__name__).replace("the page is", "the file is")
            reason = " ".join(reason.split())
            report.problems.append(f"{file}: {reason}")
            if known is not None:  # do not keep serving stale text of a broken file
                with conn:
                    self._delete(conn, str(file))
            return
        with conn:
            self._delete(conn, str(file))
            for section in sections:
                cursor = conn.execute(
                    "INSERT INTO sections(path, name, title, slug, body) VALUES (?, ?, ?, ?, ?)",
                    (str(file), file.name, section.title, section.slug, section.text),
                )
                conn.execute(
                    "INSERT INTO fts(rowid, name, title, body) VALUES (?, ?, ?, ?)",
                    (
                        cursor.lastrowid,
                        _spaced(file.stem.replace("_", " ").replace("-", " ")),
                        _spaced(f"{section.context} {section.title}".strip()),
                        _spaced(section.text),
                    ),
                )
            conn.execute(
                "INSERT OR REPLACE INTO files(path, mtime_ns, size, title) VALUES (?, ?, ?, ?)",
                (str(file), stat.st_mtime_ns, stat.st_size, title),
            )
        report.indexed += 1
        report.sections += len(sections)

    @staticmethod
    def _delete(conn: sqlite3.Connection, path: str) -> None:
        conn.execute("DELETE FROM fts WHERE rowid IN (SELECT id FROM sections WHERE path = ?)", (path,))
        conn.execute("DELETE FROM sections WHERE path = ?", (path,))
        conn.execute("DELETE FROM files WHERE path = ?", (path,))

    # -- searching --

    def search(self, query: str, limit: int = 5) -> list[Hit]:
        """The best ``limit`` sections for a free-text query (bm25): sections
        with all the query's words first, then those with any of them."""
        limit = max(1, min(limit, 50))
        terms = query_terms(query)
        if not terms or not self.path.exists():
            return []
        with self._connect() as conn:
            rows = self._match(conn, " AND ".join(_phrase(t) for t in terms), limit)
            if (len(rows) < limit and len(terms) > 1) or any(_CJK.search(t) for t in terms):
                phrases = [p for t in terms for p in _bigram_phrases(t)]
                ids = {row[0] for row in rows}
                for row in self._match(conn, " OR ".join(dict.fromkeys(phrases)), limit * 2):
                    if row[0] not in ids and len(rows) < limit:
                        rows.append(row)
                        ids.add(row[0])
        return [
            Hit(
                path=path,
                name=name,
                section=title,
                slug=slug,
                text=body,
                snippet=_excerpt(body, terms, SNIPPET_CHARS),
                score=score,
            )
            for _, path, name, title, slug, body, score in rows
        ]

    @staticmethod
    def _match(conn: sqlite3.Connection, expression: str, limit: int) -> list[tuple]:
        weights = ", ".join(str(w) for w in _WEIGHTS)
        return conn.execute(
            f"""SELECT s.id, s.path, s.name, s.title, s.slug, s.body, bm25(fts, {weights}) AS score
                FROM fts JOIN sections s ON s.id = fts.rowid
                WHERE fts MATCH ? ORDER BY score LIMIT ?""",
            (expression, limit),
        ).fetchall()


# --- activities -----------------------------------------------------------------


def format_local_hits(query: str, hits: list[Hit], terms: list[str]) -> str:
    if not hits:
        return f"No results in the local documents for {query!r}."
    lines = [f"Local document results for {query!r}:"]
    for n, hit in enumerate(hits, 1):
        excerpt = _excerpt(hit.text, terms, EXCERPT_CHARS)
        lines.append(f"{n}. {hit.title}\n   URL: {hit.url}\n   {excerpt}")
    return "\n".join(lines)


class SharedIndexes:
    """Copies of run indexes in an S3 bucket, ``<prefix><file name>``, so that
    any worker can search the documents another worker indexed."""

    def __init__(self, client: ObjectClient, bucket: str, prefix: str = "indexes/") -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix

    async def upload(self, index: LocalIndex) -> None:
        data = await asyncio.to_thread(index.snapshot)
        await self.client.put_object(bucket=self.bucket, key=self.prefix + index.path.name, data=data)

    async def download(self, index: LocalIndex) -> bool:
        """Fetch the run's index into ``index.path``; False if none was shared."""
        data = await get_if_present(self.client, self.bucket, self.prefix + index.path.name)
        if data is None:
            return False
        for leftover in ("-wal", "-shm"):  # of an older copy: not for this file
            Path(f"{index.path}{leftover}").unlink(missing_ok=True)
        write_atomically(index.path, data)
        return True


class LocalDocsActivities:
    """``index_resources`` and ``local_search``; one instance per worker."""

    def __init__(self, data_dir: Path, shared: SharedIndexes | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.shared = shared
        # Run keys whose index in the data dir is current: built here, or
        # fetched from the shared store by this process (a copy left by an
        # earlier run with the same key is fetched again).
        self.current: set[str] = set()
        self._fetching: dict[str, asyncio.Lock] = {}

    def index_for(self, run_key: str) -> LocalIndex:
        """The run's index file: ``<data dir>/indexes/<run key>.sqlite`` (the key
        made safe as a file name; a hash keeps altered keys distinct)."""
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", run_key)[:100].lstrip(".") or "run"
        if safe != run_key:
            safe += "-" + hashlib.sha256(run_key.encode("utf-8")).hexdigest()[:12]
        return LocalIndex(self.data_dir / "indexes" / f"{safe}.sqlite")

    @activity.defn(name="index_resources")
    async def index_resources(self, request: IndexRequest) -> str:
        """Index the run's resources; a short summary (files, sections, problems)."""
        _require_fts5()
        index = self.index_for(request.run_key)
        done = 0

        def progress(count: int) -> None:
            nonlocal done
            done = count

        task = asyncio.ensure_future(asyncio.to_thread(index.index, request.paths, progress))
        # Heartbeat from the event loop while the thread works (the SDK's
        # heartbeat is not thread-safe for async activities).
        while not task.done():
            await asyncio.wait({task}, timeout=2.0)
            if activity.in_activity():
                activity.heartbeat(done)
        report = task.result()
        if self.shared:
            await self.shared.upload(index)
        self.current.add(request.run_key)
        return report.summary()

    @activity.defn(name="local_search")
    async def local_search(self, request: LocalSearchRequest) -> ToolResult:
        """Search the run's local documents; hits cite file and section."""
        _require_fts5()
        index = self.index_for(request.run_key)
        if self.shared:
            await self._fetch(request.run_key, index)
        if not index.path.exists():
            return ToolResult(
                error=True,
                content="Error: no local documents were indexed for this run; use web_search.",
            )
        try:
            hits = await asyncio.to_thread(index.search, request.query, request.max_results)
        except sqlite3.Error as e:
            return ToolResult(error=True, content=f"Error: local search failed: {e}")
        sources = list({hit.url: Citation(title=hit.title, url=hit.url) for hit in hits}.values())
        return ToolResult(
            content=format_local_hits(request.query, hits, query_terms(request.query)),
            sources=sources,
        )

    async def _fetch(self, run_key: str, index: LocalIndex) -> None:
        """Once per process and run: the shared copy of the run's index, if
        there is one. Parallel searches of the run wait for one download."""
        assert self.shared
        async with self._fetching.setdefault(run_key, asyncio.Lock()):
            if run_key not in self.current and await self.shared.download(index):
                self.current.add(run_key)


def _require_fts5() -> None:
    if not fts5_available():
        raise ApplicationError(
            "this Python's SQLite has no FTS5 full-text search, which local documents need",
            type="FTS5Unavailable",
            non_retryable=True,
        )
