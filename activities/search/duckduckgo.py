"""DuckDuckGo, keyless, through the ``ddgs`` package."""

from __future__ import annotations

import asyncio
from typing import Any

from activities.search.base import Hit, SearchUnavailable, make_hits


class DuckDuckGoEngine:
    """Keyless search through ``ddgs`` (synchronous, so it runs in a thread).

    ``ddgs`` is any object with ``text(query, max_results=...)`` returning
    dicts with ``title``/``href``/``body``; by default a fresh ``ddgs.DDGS``
    per search. Tests pass a stand-in, since ddgs needs the internet.
    """

    name = "duckduckgo"
    filters_domains = False

    def __init__(self, ddgs: Any = None, timeout: int = 10, backend: str = "auto") -> None:
        self.ddgs = ddgs
        self.timeout = timeout
        self.backend = backend

    async def search(self, query: str, max_results: int) -> list[Hit]:
        return await asyncio.to_thread(self._search, query, max_results)

    def _search(self, query: str, max_results: int) -> list[Hit]:
        from ddgs import DDGS
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        client = self.ddgs if self.ddgs is not None else DDGS(timeout=self.timeout)
        try:
            rows = client.text(query, max_results=max_results, backend=self.backend)
        except RatelimitException as err:
            raise SearchUnavailable(f"duckduckgo rate limit ({err})", rate_limited=True) from err
        except TimeoutException as err:
            raise SearchUnavailable(f"duckduckgo timed out ({err})") from err
        except DDGSException as err:
            if "no results" in str(err).lower():
                return []
            raise SearchUnavailable(f"duckduckgo unavailable ({type(err).__name__}: {err})") from err
        return make_hits(rows or [], "title", "href", "body")
