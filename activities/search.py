"""The ``web_search`` tool: Tavily through the official ``tavily-python`` client."""

from __future__ import annotations

from datetime import timedelta

import httpx
from tavily import AsyncTavilyClient
from tavily import errors as tavily_errors
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.settings import Settings
from workflows.models import Citation, SearchRequest, ToolResult

SNIPPET_CHARS = 1_500


def format_hits(query: str, hits: list[dict]) -> str:
    if not hits:
        return f"No results for {query!r}."
    lines = [f"Search results for {query!r}:"]
    for n, hit in enumerate(hits, 1):
        snippet = " ".join(str(hit.get("content") or "").split())[:SNIPPET_CHARS]
        lines.append(f"{n}. {hit.get('title') or hit['url']}\n   URL: {hit['url']}\n   {snippet}")
    return "\n".join(lines)


class SearchActivities:
    def __init__(self, settings: Settings) -> None:
        self.client = AsyncTavilyClient(
            api_key=settings.tavily_api_key, api_base_url=settings.tavily_base_url
        )

    @activity.defn(name="web_search")
    async def web_search(self, request: SearchRequest) -> ToolResult:
        try:
            data = await self.client.search(
                request.query, max_results=request.max_results, search_depth="basic", timeout=30
            )
        except (tavily_errors.InvalidAPIKeyError, tavily_errors.ForbiddenError) as err:
            return ToolResult(
                error=True,
                content=f"Error: the search service rejected TAVILY_API_KEY ({err}).",
            )
        except tavily_errors.BadRequestError as err:
            return ToolResult(error=True, content=f"Error: bad search request: {err}")
        except tavily_errors.UsageLimitExceededError as err:
            raise ApplicationError(
                f"search rate limit: {err}", type="SearchRateLimited",
                next_retry_delay=timedelta(seconds=10),
            ) from err  # fmt: skip
        except (httpx.HTTPError, tavily_errors.TimeoutError, TimeoutError) as err:
            raise ApplicationError(
                f"search service unavailable: {type(err).__name__}: {err}",
                type="SearchUnavailable",
            ) from err
        hits = [h for h in data.get("results", []) if h.get("url")][: request.max_results]
        return ToolResult(
            content=format_hits(request.query, hits),
            sources=[Citation(title=h.get("title") or "", url=h["url"]) for h in hits],
        )
