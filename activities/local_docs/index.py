"""A run's local-document index: SQLite FTS5 with bm25 ranking over file
name, section title and text; CJK text searched as phrases of characters."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import tempfile
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from urllib.parse import quote

from activities.documents import CrawlRefused
from activities.local_docs.splitter import KINDS, SKIP_DIRS, read_document

MAX_FILE_BYTES = 50_000_000
MAX_FILES = 5_000
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


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, at most ``limit``: never blocks on a FIFO
    (opened non-blocking, checked after opening), never reads a device
    without end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CrawlRefused("not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise CrawlRefused(f"too large (over {limit:,} bytes)")
    return data


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
            elif path.is_file():  # a regular file (links resolved above)
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
        """Regular files inside ``root``: a link is followed only when what it
        points to is inside ``root`` too (a run may read the folders it was
        given, nothing more); FIFOs, sockets and devices are skipped."""

        def failed(error: OSError) -> None:
            report.problems.append(f"{error.filename}: cannot list folder ({error.strerror})")

        for folder, dirs, files in os.walk(root, onerror=failed):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
            dirs[:] = [d for d in dirs if not Path(folder, d).is_symlink()]  # no walking out through a link
            for name in sorted(files):
                if name.startswith("."):
                    continue
                if Path(name).suffix.lower() not in KINDS:
                    report.ignored += 1
                    continue
                path = Path(folder, name)
                target = path.resolve()
                if target != path and not target.is_relative_to(root):
                    report.problems.append(f"{path}: a link to {target}, outside {root}: not read")
                elif not stat.S_ISREG(os.stat(target).st_mode if target.exists() else 0):
                    report.problems.append(f"{path}: not a regular file (FIFO, socket, device or broken link)")
                else:
                    yield path

    def _index_file(
        self,
        conn: sqlite3.Connection,
        file: Path,
        known: tuple[int, int] | None,
        report: IndexReport,
    ) -> None:
        try:
            info = file.stat()
            if known == (info.st_mtime_ns, info.st_size):
                report.unchanged += 1
                return
            if info.st_size > MAX_FILE_BYTES:
                raise CrawlRefused(f"too large ({info.st_size:,} bytes, limit {MAX_FILE_BYTES:,})")
            title, sections = read_document(file, read_regular(file, MAX_FILE_BYTES))
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
                (str(file), info.st_mtime_ns, info.st_size, title),
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
