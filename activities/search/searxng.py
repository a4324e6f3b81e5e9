"""A self-hosted SearxNG instance's JSON API (``SEARXNG_URL``)."""

from __future__ import annotations

import httpx

from activities.search.base import Hit, HttpEngine, SearchRejected, make_hits


class SearxngEngine(HttpEngine):
    name = "searxng"
    key_name = None

    def __init__(self, base_url: str, client: httpx.AsyncClient | None = None) -> None:
        super().__init__(client)
        base = base_url.strip().rstrip("/")
        self.url = base if base.endswith("/search") else base + "/search"

    def _error(self, response: httpx.Response) -> Exception:
        if response.status_code == 403:
            return SearchRejected(
                "the SearxNG instance at SEARXNG_URL refused the JSON API (HTTP 403): "
                "add `json` to search.formats in its settings.yml."
            )
        return super()._error(response)

    async def search(self, query: str, max_results: int) -> list[Hit]:
        response = await self._get(self.url, {"q": query, "format": "json", "pageno": 1})
        data = self._json(response)
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise SearchRejected("searxng answered without a list of results.")
        return make_hits(results, "title", "url", "content")[:max_results]
