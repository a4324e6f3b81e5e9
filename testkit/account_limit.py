"""A provider account's request limit, as providers enforce it, for the
scripted model server (``ScriptedLLM(account=AccountLimit(5))``): one token
bucket over every request of every model, ``rate`` requests a second holding
at most ``burst``. A request that finds the bucket empty is answered 429 at
once, with ``Retry-After`` (whole seconds, rounded up) and ``retry-after-ms``
(OpenAI's) saying when the next token comes.

``served`` and ``limited`` count the requests let through and refused.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class AccountLimit:
    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if not rate > 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, rate)  # one second's worth
        self.served = 0
        self.limited = 0
        self._tokens = self.burst
        self._clock = clock
        self._at = clock()
        self._lock = threading.Lock()

    def take(self) -> float | None:
        """None: the request may go on (a token is spent); else the seconds
        until the next token, for ``Retry-After``."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens >= 1:
                self._tokens -= 1
                self.served += 1
                return None
            self.limited += 1
            return (1 - self._tokens) / self.rate

    @staticmethod
    def headers(wait: float) -> dict[str, str]:
        return {"Retry-After": str(max(1, math.ceil(wait))), "retry-after-ms": str(max(1, math.ceil(wait * 1000)))}
