"""The Brave Search API (``BRAVE_API_KEY``)."""

from __future__ import annotations

import httpx

from activities.search.base import BRAVE_BASE_URL, MAX_RESULTS, Hit, HttpEngine, SearchRejected, error_detail, make_hit


class BraveEngine(HttpEngine):
    name = "brave"
    key_name = "BRAVE_API_KEY"

    def __init__(
        self, api_key: str | None, base_url: str | None = None, client: httpx.AsyncClient | None = None
    ) -> None:
        super().__init__(client)
        self.api_key = api_key or ""
        self.url = (base_url or BRAVE_BASE_URL).rstrip("/") + "/res/v1/web/search"

    def _error(self, response: httpx.Response) -> Exception:
        # Brave answers a bad token with 422 SUBSCRIPTION_TOKEN_INVALID.
        if response.status_code == 422 and "token" in error_detail(response).lower():
            return SearchRejected(
                f"the brave search service rejected BRAVE_API_KEY (HTTP 422: {error_detail(response)})."
            )
        return super()._error(response)

    async def search(self, query: str, max_results: int) -> list[Hit]:
        params = {
            "q": query[:400],  # Brave's limit
            "count": min(max_results, MAX_RESULTS),
            "text_decorations": "false",
        }
        headers = {"Accept": "application/json", "X-Subscription-Token": self.api_key}
        data = self._json(await self._get(self.url, params, headers))
        if not isinstance(data, dict):
            raise SearchRejected("brave answered without a list of web results.")
        web = data.get("web") or {}  # no "web" section: nothing found
        results = web.get("results", []) if isinstance(web, dict) else None
        if not isinstance(results, list):
            raise SearchRejected("brave answered without a list of web results.")
        hits = []
        for r in results:
            if not isinstance(r, dict):
                continue
            extra = r.get("extra_snippets") if isinstance(r.get("extra_snippets"), list) else []
            content = " ".join([str(r.get("description") or ""), *map(str, extra)])
            if hit := make_hit(r.get("title"), r.get("url"), content):
                hits.append(hit)
        return hits[:max_results]
