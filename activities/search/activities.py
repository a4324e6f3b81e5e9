"""The ``web_search`` activity, and choosing the engine from the settings."""

from __future__ import annotations

import logging
from datetime import timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.search.arxiv import ArxivEngine
from activities.search.base import (
    DEFAULT_RATE_LIMIT_DELAY,
    MAX_RESULTS,
    SearchEngine,
    SearchRejected,
    SearchUnavailable,
    filter_hits,
    format_hits,
)
from activities.search.brave import BraveEngine
from activities.search.duckduckgo import DuckDuckGoEngine
from activities.search.searxng import SearxngEngine
from activities.search.tavily import TavilyEngine
from infra.errors import ConfigError
from infra.settings import SEARCH_ENGINES, Settings
from workflows.models import Citation
from workflows.tool_models import SearchRequest, ToolResult

log = logging.getLogger(__name__)


def make_engine(settings: Settings) -> SearchEngine:
    name = settings.search_engine
    if name == "tavily":
        return TavilyEngine(
            settings.tavily_api_key,
            settings.tavily_base_url,
            settings.include_domains,
            settings.exclude_domains,
        )
    if name == "duckduckgo":
        return DuckDuckGoEngine()
    if name == "searxng":
        return SearxngEngine(settings.searxng_url or "")
    if name == "brave":
        return BraveEngine(settings.brave_api_key, settings.brave_base_url)
    if name == "arxiv":
        return ArxivEngine(settings.arxiv_base_url)
    raise ConfigError(f"DEEPRESEARCH_SEARCH_ENGINE={name!r} is not supported; use one of: {', '.join(SEARCH_ENGINES)}")


class SearchActivities:
    def __init__(self, settings: Settings, engine: SearchEngine | None = None) -> None:
        self.settings = settings
        self.engine = engine or make_engine(settings)
        self.include = tuple(settings.include_domains)
        self.exclude = tuple(settings.exclude_domains)

    @activity.defn(name="web_search")
    async def web_search(self, request: SearchRequest) -> ToolResult:
        query = " ".join(request.query.split())
        if not query:
            return ToolResult(error=True, content="Error: the search query is empty.")
        max_results = min(max(request.max_results, 1), MAX_RESULTS)
        filtering = bool(self.include or self.exclude) and not self.engine.filters_domains
        ask = min(max_results * 3, MAX_RESULTS) if filtering else max_results
        try:
            async with heartbeating():
                found = await self.engine.search(query, ask)
        except SearchRejected as err:
            return ToolResult(error=True, content=f"Error: {self._scrub(str(err))[:500]}")
        except SearchUnavailable as err:
            message = self._scrub(str(err))[:500]
            if err.rate_limited:
                delay = err.retry_after if err.retry_after is not None else DEFAULT_RATE_LIMIT_DELAY
                raise ApplicationError(
                    message,
                    type="SearchRateLimited",
                    next_retry_delay=timedelta(seconds=delay),
                ) from err
            raise ApplicationError(
                message,
                type="SearchUnavailable",
                next_retry_delay=timedelta(seconds=err.retry_after) if err.retry_after else None,
            ) from err
        except Exception as err:  # a bug or an answer we did not foresee: tell the agent
            log.warning("web_search on %s failed unexpectedly", self.engine.name, exc_info=True)
            reason = self._scrub(f"{type(err).__name__}: {err}")[:500]
            return ToolResult(error=True, content=f"Error: the {self.engine.name} search failed ({reason}).")
        hits = filter_hits(found, self.include, self.exclude, max_results)
        content = format_hits(query, hits)
        if not hits and found and (self.include or self.exclude):
            content += f" ({len(found)} results outside the allowed domains were left out.)"
        return ToolResult(
            content=content,
            sources=[Citation(title=h.title, url=h.url) for h in hits],
        )

    def _scrub(self, text: str) -> str:
        """Never let a key reach the agent or the history (real keys are long;
        a short test value would only garble the message)."""
        for secret in self.settings.secrets:
            if len(secret) >= 8:
                text = text.replace(secret, "***")
        return text

    async def aclose(self) -> None:
        close = getattr(self.engine, "aclose", None)
        if close is not None:
            await close()
