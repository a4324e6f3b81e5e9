"""The corpus served as an offline web on loopback: every document at its own
URL and a Tavily-compatible search engine over them.

    with CorpusWeb(Path("client/evaluation/builtin/corpus")) as web:
        web.url_for("towns/harrowgate.md")   # http://127.0.0.1:PORT/towns/harrowgate.md
        # POST web.base_url + "/search" {"query": ..., "max_results": 5}

A worker points at it with DEEPRESEARCH_SEARCH_ENGINE=tavily,
TAVILY_API_KEY=<anything>, TAVILY_BASE_URL=<base_url> and
DEEPRESEARCH_ALLOW_PRIVATE_URLS=1, so the real search, crawl, reading and
citation code runs against it.

Search is BM25 over the documents' passages (about a paragraph each, with the
document's title), a document scoring as its best passage; CJK text is indexed
by character bigrams. ``content`` is that best passage, cut to a snippet.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from client.evaluation.corpus import Document, load_corpus
from client.loopback import LoopbackServer

MAX_RESULTS = 20
DEFAULT_RESULTS = 5
SNIPPET_CHARS = 600
PASSAGE_CHARS = 900
MAX_BODY = 1_000_000
_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_STOP = frozenset(
    "a an and are as at be by can do does did for from how in is it its of on or that the their there these this "
    "to was were what when where which who whom why will with about into than then has have had per".split()
)


def terms(text: str) -> list[str]:
    """Search terms: lower-cased words without stop words; CJK runs as
    character bigrams."""
    found: list[str] = []
    for word in _WORD.findall(text.lower()):
        if _CJK.search(word):
            chars = _CJK.findall(word)
            found += [a + b for a, b in zip(chars, chars[1:])] or chars
            rest = _CJK.sub(" ", word).split()  # latin letters or digits mixed in
            found += [w for w in rest if w not in _STOP]
        elif word not in _STOP and (len(word) > 1 or word.isdigit()):
            found.append(_stem(word))
    return found


def _stem(word: str) -> str:
    """A plural's singular, roughly: "turbines" and "turbine" match."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) and not word.isdigit():
        return word[:-1]
    return word


def passages(text: str, size: int = PASSAGE_CHARS) -> list[str]:
    """The text in passages of about ``size`` characters: paragraphs, long
    ones cut at line or sentence ends, short neighbours joined."""
    out: list[str] = []
    current = ""
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        while len(paragraph) > size:
            cut = max(
                paragraph.rfind("\n", 0, size), paragraph.rfind(". ", 0, size) + 1, paragraph.rfind("。", 0, size) + 1
            )
            cut = cut if cut > size // 3 else size
            out.append(paragraph[:cut].strip())
            paragraph = paragraph[cut:].strip()
        if current and len(current) + len(paragraph) > size:
            out.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}".strip() if paragraph else current
    if current:
        out.append(current)
    return out or [text.strip()]


class Index:
    """BM25 over every document's passages."""

    def __init__(self, documents: list[Document], k1: float = 1.2, b: float = 0.75) -> None:
        self.documents = documents
        self.k1, self.b = k1, b
        self.chunks: list[tuple[int, str, Counter]] = []
        for number, document in enumerate(documents):
            title_terms = terms(document.title)
            for passage in passages(document.text):
                self.chunks.append((number, passage, Counter(terms(passage) + title_terms)))
        self.frequency: Counter = Counter(t for _, _, counts in self.chunks for t in counts)
        lengths = [sum(counts.values()) for _, _, counts in self.chunks]
        self.average = (sum(lengths) / len(lengths)) if lengths else 1.0

    def search(self, query: str, limit: int) -> list[tuple[Document, str, float]]:
        """(document, best passage, score) for the best ``limit`` documents."""
        wanted = set(terms(query))
        best: dict[int, tuple[float, str]] = {}
        total = len(self.chunks)
        for number, passage, counts in self.chunks:
            length = sum(counts.values()) or 1
            score = 0.0
            for term in wanted:
                tf = counts.get(term, 0)
                if tf:
                    df = self.frequency[term]
                    idf = math.log(1 + (total - df + 0.5) / (df + 0.5))
                    score += idf * tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * length / self.average))
            if score > 0 and score > best.get(number, (0.0, ""))[0]:
                best[number] = (score, passage)
        ranked = sorted(best.items(), key=lambda item: (-item[1][0], self.documents[item[0]].path))
        return [(self.documents[n], passage, score) for n, (score, passage) in ranked[:limit]]


def snippet(passage: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join(passage.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


class CorpusWeb(LoopbackServer):
    """The documents of ``folder`` on a threaded loopback HTTP server."""

    name = "corpus web"

    def __init__(
        self, folder: Path, port: int = 0, documents: list[Document] | None = None, any_port_if_taken: bool = False
    ) -> None:
        super().__init__(port, any_port_if_taken)
        self.folder = Path(folder).resolve()
        self.documents = documents if documents is not None else load_corpus(self.folder)
        self.index = Index(self.documents)
        self._by_path = {document.path: document for document in self.documents}
        self.searches: list[str] = []  # the queries received, in order

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url_for(self, path: str) -> str:
        return f"{self.base_url}/{quote(path)}"

    def path_for(self, url: str) -> str | None:
        """The corpus path a URL names (any host and port), or None."""
        try:
            path = unquote(urlsplit(url).path).lstrip("/")
        except ValueError:
            return None
        return path if path in self._by_path else None

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    def search(self, query: str, max_results: int = DEFAULT_RESULTS) -> dict:
        """A Tavily-shaped answer for ``query``."""
        started = time.monotonic()
        self.searches.append(query)
        hits = self.index.search(query, max(1, min(max_results, MAX_RESULTS)))
        results = [
            {
                "title": document.title,
                "url": self.url_for(document.path),
                "content": snippet(passage),
                "score": round(score, 4),
                "raw_content": None,
            }
            for document, passage, score in hits
        ]
        return {
            "query": query,
            "answer": None,
            "images": [],
            "results": results,
            "response_time": round(time.monotonic() - started, 4),
        }

    def file_for(self, path: str) -> Path | None:
        document = self._by_path.get(path)
        if document is None:
            return None
        file = (self.folder / document.path).resolve()
        return file if file.is_relative_to(self.folder) and file.is_file() else None


def _handler(web: CorpusWeb) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, obj: object) -> None:
            self._send(status, json.dumps(obj).encode(), "application/json")

        def do_GET(self) -> None:
            path = web.path_for(self.path)
            file = web.file_for(path) if path else None
            if file is None:
                self._send(404, b"not found\n", "text/plain; charset=utf-8")
                return
            self._send(200, file.read_bytes(), web._by_path[path].media_type)

        do_HEAD = do_GET

        def do_POST(self) -> None:
            if urlsplit(self.path).path.rstrip("/") != "/search":
                self._json(404, {"detail": {"error": "not found"}})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._json(413, {"detail": {"error": "request too large"}})
                return
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                query = body.get("query")
                max_results = int(body.get("max_results") or DEFAULT_RESULTS)
            except (ValueError, TypeError, AttributeError):
                self._json(400, {"detail": {"error": "the body must be JSON with a query"}})
                return
            if not isinstance(query, str) or not query.strip():
                self._json(400, {"detail": {"error": "query is missing"}})
                return
            self._json(200, web.search(query, max_results))

    return Handler
