"""Small wording helpers shared by the terminal, the exports and the desk."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workflows.models import Usage


def plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


def usage_text(usage: Usage) -> str:
    """The run's costs in one line: "1 LLM call (…), 2 searches, …"."""
    parts = [
        f"{plural(usage.llm_calls, 'LLM call', 'LLM calls')} ({usage.prompt_tokens:,} prompt + "
        f"{usage.completion_tokens:,} completion tokens)",
        plural(usage.searches, "search", "searches"),
        plural(usage.crawls, "crawl", "crawls"),
        plural(usage.code_runs, "code run", "code runs"),
    ]
    if usage.cache_hits:
        parts.append(plural(usage.cache_hits, "cache hit", "cache hits"))
    return ", ".join(parts)
