"""How long a server asked us to wait (``Retry-After``), for the next
retry of an activity: Temporal honours ``ApplicationError.next_retry_delay``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime


def retry_delay(value: str | None, cap: timedelta) -> timedelta | None:
    """A ``Retry-After`` header value (seconds, or an HTTP date) as a delay
    between zero and ``cap``; None when there is none or it cannot be read."""
    if not value:
        return None
    try:
        delay = timedelta(seconds=float(value.strip()))
    except (ValueError, OverflowError):
        try:
            delay = parsedate_to_datetime(value.strip()) - datetime.now(UTC)
        except (TypeError, ValueError, IndexError):
            return None
    if delay != delay:  # NaN
        return None
    return min(max(delay, timedelta(0)), cap)


def asked_delay(headers: Mapping[str, str], cap: timedelta) -> timedelta | None:
    """What a provider asked for: ``retry-after-ms`` (OpenAI's, in
    milliseconds) when it reads, else ``Retry-After``; between zero and
    ``cap``, None when neither is there or reads."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            seconds = float(millis.strip()) / 1000
        except (ValueError, OverflowError):
            seconds = None
        if seconds is not None and seconds == seconds:  # not NaN
            return timedelta(seconds=min(max(seconds, 0.0), cap.total_seconds()))
    return retry_delay(headers.get("retry-after"), cap)
