"""Small wording helpers shared by the terminal, the exports and the desk."""

from __future__ import annotations

from datetime import UTC, datetime
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
    waits = getattr(usage, "rate_limited", 0)  # a worker older than this client sends none
    if waits:
        seconds = getattr(usage, "rate_limited_seconds", 0.0)
        parts.append(f"{plural(waits, 'wait', 'waits')} on the provider's rate limit ({seconds:,.0f} s)")
    return ", ".join(parts)


def waiting_text(since: str | None, now: datetime | None = None) -> str | None:
    """ "waiting on the model provider's rate limit since 14:03:07 (42 s)",
    from a status's ``rate_limited_since`` (ISO 8601); None when nothing
    waits or the time does not read."""
    if not since:
        return None
    try:
        began = datetime.fromisoformat(since)
    except (TypeError, ValueError):
        return None
    if began.tzinfo is None:
        began = began.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - began).total_seconds()))
    taken = f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"
    return f"waiting on the model provider's rate limit since {began.astimezone():%H:%M:%S} ({taken})"
