"""A provider's "not now" as a Temporal error: a 429 (or a 503/529 with
``Retry-After``, an overloaded server) becomes ``ModelRateLimited``, whose
details hold the seconds the provider asked for; the workflow waits them
out and calls again (workflows/rate_limits.py). A 429 that says the account
has no quota left fails at once: no wait ends it."""

from __future__ import annotations

from datetime import timedelta

import openai
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.retry_after import asked_delay
from workflows.rate_limits import RATE_LIMITED

MAX_RETRY_AFTER = timedelta(seconds=120)  # the activity's own retry delay (runs recorded before the workflow waited)
LONGEST_ASKED = timedelta(days=1)  # what the details may ask the workflow to wait (it waits in turns)
OVERLOADED = (503, 529)  # with Retry-After: the provider's "come back later", waited out like a 429


def retry_after(err: openai.APIStatusError, cap: timedelta = MAX_RETRY_AFTER) -> timedelta | None:
    """What the provider asked (``retry-after-ms``, ``Retry-After``), at most ``cap``."""
    headers = err.response.headers if err.response is not None else {}
    return asked_delay(headers, cap)


def rate_limit_error(err: openai.OpenAIError, service: str, said: str) -> ApplicationError | None:
    """The error for a provider's rate limit, an overloaded provider that
    says when to come back, or an account without quota; None for any other
    error. ``said`` is what the server said, scrubbed of secrets."""
    if isinstance(err, openai.RateLimitError):
        if "insufficient_quota" in (getattr(err, "code", None), getattr(err, "type", None)):  # OpenAI's
            return ApplicationError(
                f"the {service} says the account has no quota left (HTTP 429): {said}; "
                "check the plan and billing of the account whose key OPENAI_API_KEY holds",
                type="ModelQuotaExhausted",
                non_retryable=True,
            )
        return _limited(f"rate limited by the {service} (HTTP 429): {said}", err)
    if isinstance(err, openai.APIStatusError) and err.status_code in OVERLOADED and retry_after(err) is not None:
        return _limited(f"the {service} is overloaded (HTTP {err.status_code}): {said}", err)
    return None


def _limited(message: str, err: openai.APIStatusError) -> ApplicationError:
    asked = retry_after(err, LONGEST_ASKED)
    seconds = asked.total_seconds() if asked is not None else None
    delay = min(asked, MAX_RETRY_AFTER) if asked is not None else None
    # Benign: logged at DEBUG, not as a failure (the workflow says it waits, at most once a minute).
    return ApplicationError(
        message, seconds, type=RATE_LIMITED, next_retry_delay=delay, category=ApplicationErrorCategory.BENIGN
    )
