"""Scripted SearxNG, Brave Search and arXiv servers on loopback (GET APIs).

Each takes a handler ``(query, count) -> [{"title", "url", "content"}]`` and
answers in the real service's format, so a test checks the engine's request
(``server.requests``) and its mapping of the service's response back to hits:

    with ScriptedBrave(lambda query, count: [hit]) as brave:
        ... BRAVE_BASE_URL=brave.base_url, BRAVE_API_KEY=brave.api_key ...

Fault injection (``fail_next``, ``fail_rate``) and ``latency`` come from
``ScriptedServer``.
"""

from __future__ import annotations

from collections.abc import Callable
from xml.sax.saxutils import escape, quoteattr

from testkit.http_base import Response, ScriptedServer, json_response

EngineHandler = Callable[[str, int], list[dict]]


class _GetServer(ScriptedServer):
    methods = ("GET",)

    def __init__(self, handler: EngineHandler | None = None, api_key: str = "") -> None:
        super().__init__(api_key)
        self.handler: EngineHandler = handler or (lambda query, count: [])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _authorised(self, headers) -> bool:
        return True  # keyless services

    def _record(self, body: dict) -> dict:
        return {"params": body}


class ScriptedSearxng(_GetServer):
    """GET /search?q=...&format=json. Like SearxNG, it answers 403 to a JSON
    request unless the instance enables the format (``json_enabled``)."""

    path = "/search"

    def __init__(self, handler: EngineHandler | None = None) -> None:
        super().__init__(handler)
        self.json_enabled = True

    def _record(self, body: dict) -> dict:
        return {"query": body.get("q", ""), "params": body}

    def _error(self, status: int, message: str, headers: dict[str, str]) -> Response:
        page = f"<html><body>{escape(message)}</body></html>".encode()
        return Response(status, page, {"Content-Type": "text/html", **headers})

    def _reply(self, body: dict) -> Response:
        if body.get("format") != "json" or not self.json_enabled:
            return self._error(403, "Forbidden", {})
        query = body.get("q", "")
        results = [
            {
                "title": h.get("title", ""),
                "url": h["url"],
                "content": h.get("content", ""),
                "engine": "scripted",
                "score": 1.0,
            }
            for h in self.handler(query, 10)
        ]
        return json_response(
            200,
            {
                "query": query,
                "number_of_results": len(results),
                "results": results,
                "answers": [],
                "suggestions": [],
                "unresponsive_engines": [],
            },
        )


class ScriptedBrave(_GetServer):
    """GET /res/v1/web/search?q=&count= with X-Subscription-Token."""

    path = "/res/v1/web/search"

    def __init__(self, handler: EngineHandler | None = None, api_key: str = "test-brave-key") -> None:
        super().__init__(handler, api_key)

    def _authorised(self, headers) -> bool:
        return headers.get("X-Subscription-Token") == self.api_key

    def _record(self, body: dict) -> dict:
        return {"query": body.get("q", ""), "count": int(body.get("count") or 20), "params": body}

    def _error(self, status: int, message: str, headers: dict[str, str]) -> Response:
        code = "SUBSCRIPTION_TOKEN_INVALID" if status == 401 else "ERROR"
        body = {"type": "ErrorResponse", "error": {"code": code, "detail": message, "status": status}}
        return json_response(status, body, headers)

    def _reply(self, body: dict) -> Response:
        query, count = body.get("q", ""), int(body.get("count") or 20)
        results = [
            {
                "title": h.get("title", ""),
                "url": h["url"],
                "description": h.get("content", ""),
                "type": "search_result",
                "language": "en",
            }
            for h in self.handler(query, count)[:count]
        ]
        return json_response(
            200, {"type": "search", "query": {"original": query}, "web": {"type": "search", "results": results}}
        )


class ScriptedArxiv(_GetServer):
    """GET /api/query?search_query=all:...&max_results=N, answered as an Atom feed.

    A handler's hit may carry ``authors`` (list) and ``published`` (ISO date);
    its ``url`` is used as the abs link, ``content`` as the summary. Setting
    ``query_error`` makes it answer like arXiv does to a malformed query: a
    200 feed holding one error entry."""

    path = "/api/query"

    def __init__(self, handler: EngineHandler | None = None) -> None:
        super().__init__(handler)
        self.query_error: str | None = None

    def _record(self, body: dict) -> dict:
        return {
            "search_query": body.get("search_query", ""),
            "max_results": int(body.get("max_results") or 10),
            "params": body,
        }

    def _error(self, status: int, message: str, headers: dict[str, str]) -> Response:
        return Response(status, message.encode(), {"Content-Type": "text/plain", **headers})

    def _reply(self, body: dict) -> Response:
        search_query = body.get("search_query", "")
        count = int(body.get("max_results") or 10)
        if self.query_error:
            entries = [_atom_error(self.query_error)]
        else:
            query = search_query.split(":", 1)[1]
            entries = [_atom_entry(h) for h in self.handler(query, count)[:count]]
        feed = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<feed xmlns="http://www.w3.org/2005/Atom" '
            'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">\n'
            f"<title>arXiv Query: {escape(search_query)}</title>\n"
            f"<opensearch:totalResults>{len(entries)}</opensearch:totalResults>\n" + "".join(entries) + "</feed>\n"
        )
        return Response(200, feed.encode(), {"Content-Type": "application/atom+xml; charset=utf-8"})


def _atom_entry(hit: dict) -> str:
    abs_url = hit["url"]
    pdf_url = abs_url.replace("/abs/", "/pdf/")
    authors = "".join(f"<author><name>{escape(a)}</name></author>" for a in hit.get("authors", ["A. Author"]))
    return (
        "<entry>\n"
        f"  <id>{escape(abs_url)}v1</id>\n"
        f"  <published>{hit.get('published', '2024-01-02T00:00:00Z')}</published>\n"
        f"  <title>{escape(hit.get('title', ''))}</title>\n"
        f"  <summary>{escape(hit.get('content', ''))}</summary>\n"
        f"  {authors}\n"
        f'  <link href={quoteattr(abs_url)} rel="alternate" type="text/html"/>\n'
        f'  <link title="pdf" href={quoteattr(pdf_url)} rel="related" type="application/pdf"/>\n'
        "</entry>\n"
    )


def _atom_error(message: str) -> str:
    return (
        "<entry>\n"
        "  <id>http://arxiv.org/api/errors#incorrect_id_format</id>\n"
        "  <title>Error</title>\n"
        f"  <summary>{escape(message)}</summary>\n"
        '  <link href="http://arxiv.org/api/errors#incorrect_id_format" rel="alternate" type="text/html"/>\n'
        "</entry>\n"
    )
