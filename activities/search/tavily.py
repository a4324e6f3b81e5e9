"""Tavily, through the official ``tavily-python`` client (``TAVILY_API_KEY``)."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from tavily import AsyncTavilyClient
from tavily import errors as tavily_errors

from activities.search.base import (
    MAX_RESULTS,
    MAX_RETRY_DELAY,
    Hit,
    SearchRejected,
    SearchUnavailable,
    http_error,
    make_hits,
)


class TavilyEngine:
    name = "tavily"
    filters_domains = True

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None = None,
        include_domains: Sequence[str] = (),
        exclude_domains: Sequence[str] = (),
    ) -> None:
        self.include_domains = list(include_domains)
        self.exclude_domains = list(exclude_domains)
        # Our own httpx client so a 429's Retry-After is not lost: the Tavily
        # client turns a 429 into an exception that carries no headers.
        self.http = httpx.AsyncClient(
            base_url=base_url or "https://api.tavily.com",
            event_hooks={"response": [tavily_rate_limit]},
        )
        self.client = AsyncTavilyClient(api_key=api_key or None, api_base_url=base_url, client=self.http)

    async def search(self, query: str, max_results: int) -> list[Hit]:
        try:
            data = await self.client.search(
                query,
                max_results=min(max_results, MAX_RESULTS),
                search_depth="basic",
                include_domains=self.include_domains or None,
                exclude_domains=self.exclude_domains or None,
                timeout=30,
            )
        except (tavily_errors.InvalidAPIKeyError, tavily_errors.ForbiddenError) as err:
            raise SearchRejected(f"the search service rejected TAVILY_API_KEY ({err}).") from err
        except tavily_errors.BadRequestError as err:
            raise SearchRejected(f"bad search request: {err}") from err
        except tavily_errors.UsageLimitExceededError as err:
            wait = getattr(err, "retry_after_seconds", None)
            raise SearchUnavailable(
                f"tavily rate limit ({err})",
                rate_limited=True,
                retry_after=min(max(float(wait), 1.0), MAX_RETRY_DELAY) if wait else None,
            ) from err
        except tavily_errors.TimeoutError as err:
            raise SearchUnavailable(f"tavily timed out ({err})") from err
        except httpx.HTTPStatusError as err:
            raise http_error(self.name, err.response, "TAVILY_API_KEY") from err
        except (httpx.HTTPError, TimeoutError) as err:
            raise SearchUnavailable(f"tavily unavailable ({type(err).__name__}: {err})") from err
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise SearchRejected("tavily answered without a list of results.")
        return make_hits(results, "title", "url", "content")

    async def aclose(self) -> None:
        await self.http.aclose()


async def tavily_rate_limit(response: httpx.Response) -> None:
    if response.status_code == 429:
        await response.aread()
        raise http_error("tavily", response, "TAVILY_API_KEY")
