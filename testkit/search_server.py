"""A scripted Tavily-compatible search server on loopback (POST /search).

hit = {"title": "T", "url": "http://127.0.0.1:8000/a", "content": "text", "score": 0.9}
with ScriptedTavily(lambda query, max_results: [hit]) as tavily:
    AsyncTavilyClient(api_key="test-tavily-key", api_base_url=tavily.base_url).search("q")
"""

from __future__ import annotations

from collections.abc import Callable

from testkit.http_base import Response, ScriptedServer, json_response

SearchHandler = Callable[[str, int], list[dict]]
DEFAULT_MAX_RESULTS = 5  # Tavily's default when the request does not say


class ScriptedTavily(ScriptedServer):
    path = "/search"

    def __init__(self, handler: SearchHandler | None = None, api_key: str = "test-tavily-key") -> None:
        super().__init__(api_key)
        self.handler: SearchHandler = handler or (lambda query, max_results: [])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _record(self, body: dict) -> dict:
        return {"query": body.get("query", ""), "max_results": _max_results(body), "body": body}

    def _error(self, status: int, message: str, headers: dict[str, str]) -> Response:
        return json_response(status, {"detail": {"error": message}}, headers)

    def _reply(self, body: dict) -> Response:
        query, max_results = body.get("query", ""), _max_results(body)
        results = self.handler(query, max_results)[:max_results]
        return json_response(
            200,
            {"query": query, "answer": None, "images": [], "results": results, "response_time": 0.01},
        )


def _max_results(body: dict) -> int:
    return int(body.get("max_results") or DEFAULT_MAX_RESULTS)
