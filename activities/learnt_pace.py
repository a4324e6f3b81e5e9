"""The pace of the model calls, learnt from the provider's 429s, for the
whole fleet and kept for the next runs and workers.

With ``DEEPRESEARCH_MODEL_RPS`` unset, nobody told the deployment its
account's limit. A worker's own back-off (activities/pacing.py) bounds how
many calls it has in flight, which does not bound a rate when calls are
quick: the provider refused about one request per served one. So the rate
is learnt, and set where every worker obeys it: the model queue's rate limit
on the Temporal server (``UpdateTaskQueueConfig``, which overrides the limit
workers set, and which the server keeps in its database):

- after a 429 (once per ``HOLD`` seconds: the refusals that follow a cut
  are mostly the same burst; the first time, a second later, ``SETTLE``,
  for the provider's answers to arrive), the limit becomes ``MARGIN`` of
  what the provider served lately (this worker's served calls over the last
  second or the last ``WINDOW`` seconds, whichever is more, times the
  workers polling the queue), and below the limit that was set; with fewer
  than ``MIN_SERVED`` calls served in that time, nothing is learnt (a 429 at
  a quiet time says little of the account's pace); and never below
  ``FLOOR`` of the most it served in ``WINDOW`` seconds without refusing
  one, in the last ``PROVEN_FOR`` (``proven_rate``: refusals that come
  whatever the pace, an account's other users, do not drive the limit to
  nothing);
- while calls wait in the queue behind that limit (the limit binds) and the
  provider refuses none, it grows every ``RAISE_EVERY`` seconds: by 5 % a
  time four times after a cut (the account's limit is near), then by 10, 20
  and 40 % a time (``raise_factor``: a limit learnt at a quiet time catches
  up in about a minute with a fleet that needs more); the next 429 cuts it
  again.

The setting names the endpoint it was learnt from (its reason, shown by
``temporal task-queue config get``). A worker started later adopts it; one
for another endpoint, or with ``DEEPRESEARCH_MODEL_RPS`` set (the worker's own
limit then rules), removes it. A limit someone else set through the API is
left alone, and this worker does not learn. A server without the API (older,
or the time-skipping test server) leaves the pace to the workers' back-off.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import RateLimit, TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, UpdateTaskQueueConfigRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

log = logging.getLogger(__name__)

WINDOW = 10.0  # seconds of served calls that say what the provider serves
SETTLE = 1.0  # seconds after a 429 before the rate is estimated
HOLD = 5.0  # seconds after a cut during which 429s cut no further
RAISE_EVERY = 5.0  # seconds between two raises
GROW = 1.05  # the first raises after a cut; then each adds twice as much, to 1.4
GENTLE_RAISES = 4  # raises by GROW after a cut, before they grow
FLOOR = 0.8  # of the pace served without a 429: no cut goes lower
MARGIN = 0.9
LOWEST = 1 / 60  # requests a second: one a minute
MIN_SERVED = 4  # calls served in the last WINDOW seconds, to learn from a 429
PROVEN_FOR = 600.0  # seconds a pace served without a 429 bounds the cuts
QUEUED = 0.5  # seconds a served call waited in the queue: the limit binds
POLLER_SEEN = timedelta(minutes=2)  # a worker polled this recently: it shares the pace
SAY_EVERY = 60.0
NO_API = (RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.INVALID_ARGUMENT)
OURS = "deepresearch: learnt from the 429s of "  # + the endpoint: the setting's reason


def endpoint_name(base_url: str | None) -> str:
    """The endpoint a rate is learnt from: host and port of the model's base
    URL (never its path, query or credentials)."""
    parts = urlsplit(base_url or "https://api.openai.com/v1")
    host = parts.hostname or "unknown"
    return f"{host}:{parts.port}" if parts.port else host


def served_rate(times: Sequence[float], now: float, window: float = WINDOW) -> float:
    """Requests a second the provider served lately: the calls served within
    ``window`` seconds before ``now``, over the time since the first of them
    (at least a second)."""
    recent = [t for t in times if now - window < t <= now]
    if not recent:
        return 0.0
    return len(recent) / min(max(now - min(recent), 1.0), window)


def peak_served_rate(times: Sequence[float], now: float) -> float:
    """What the provider served lately: over the last second (a burst) or
    the last ``WINDOW`` seconds (a steady pace), whichever is more; a 429
    when few calls were made then does not make a limit of their pace."""
    return max(served_rate(times, now, 1.0), served_rate(times, now, WINDOW))


def raise_factor(raises: int) -> float:
    """The limit's growth at the ``raises``-th raise since the last cut
    (0: the first): 5 % four times, then 10 %, 20 %, then 40 % a time."""
    return 1 + (GROW - 1) * 2 ** min(max(raises - GENTLE_RAISES + 1, 0), 3)


def proven_rate(served: Sequence[float], limited: Sequence[float], now: float) -> float:
    """The most requests a second the provider served in ``WINDOW`` seconds
    with no 429 among them, over the last ``PROVEN_FOR`` seconds (both
    lists in time order)."""
    times = [t for t in served if now - PROVEN_FOR < t <= now]
    best = 0
    for i, end in enumerate(times):  # the windows that end at a served call
        start = end - WINDOW
        refused = bisect.bisect_right(limited, start)
        if refused < len(limited) and limited[refused] <= end:
            continue
        best = max(best, i - bisect.bisect_right(times, start) + 1)
    return best / WINDOW


def cut_rate(current: float | None, fleet_served: float) -> float | None:
    """The limit after a 429: ``MARGIN`` of what was served and of the limit
    set; with nothing served lately, half the limit set (none set: none)."""
    if fleet_served > 0:
        return max(LOWEST, MARGIN * min(current if current is not None else math.inf, fleet_served))
    return max(LOWEST, current / 2) if current is not None else None


class LearntPace:
    """What one worker learns of the provider's pace, set on the server for
    every worker of the model queue ``queue``. ``learn`` False (the rate is
    configured): only removes a learnt limit at start."""

    def __init__(
        self,
        client: Client,
        queue: str,
        endpoint: str,
        *,
        learn: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client, self.queue, self.endpoint, self.learn = client, queue, endpoint, learn
        self.rate: float | None = None  # the learnt limit on the server, as last read or set
        self.off = not learn  # not learning: the rate is configured, or someone else's, or no API
        self.workers = 1  # workers polling the model queue lately
        self._clock = clock
        self._served: deque[float] = deque(maxlen=8192)
        self._refused: deque[float] = deque(maxlen=8192)
        self._cut_at = -math.inf  # when the last cut was set
        self._limited_at = -math.inf
        self._raised_at = -math.inf
        self._binds = False
        self._raises = 0  # raises since the last cut
        self._wanted: str | None = None  # "cut" or "raise", for the task below
        self._task: asyncio.Task[None] | None = None
        self._said = -math.inf

    # -- what the model activity reports (on the worker's event loop) ----------

    def limited(self) -> None:
        now = self._clock()
        self._limited_at = now
        self._refused.append(now)
        if self.off or now - self._cut_at < HOLD or self._wanted == "cut":
            return
        self._want("cut")

    def served(self, queued: float) -> None:
        now = self._clock()
        self._served.append(now)
        self._binds = self._binds or queued >= QUEUED
        quiet = now - max(self._raised_at, self._limited_at, self._cut_at) >= RAISE_EVERY
        if self.off or self.rate is None or not self._binds or not quiet or self._wanted:
            return
        self._raised_at, self._binds = now, False
        self._want("raise")

    @property
    def pacing(self) -> bool:
        """Whether a learnt limit paces the fleet (the server hands out the
        calls at the pace: a worker's own pause would only bunch them)."""
        return not self.off and self.rate is not None

    def served_rate(self) -> float:
        return peak_served_rate(self._served, self._clock())

    def _enough(self) -> bool:
        now = self._clock()
        return sum(1 for t in self._served if now - t < WINDOW) >= MIN_SERVED

    def _cut(self) -> float | None:
        """The limit to set after a 429, None to leave it as it is."""
        cut = cut_rate(self.rate, self.served_rate() * self.workers)
        proven = FLOOR * proven_rate(self._served, self._refused, self._clock()) * self.workers
        if cut is not None and cut < proven:
            cut = proven if self.rate is None else min(proven, self.rate)
        return cut if cut is not None and cut != self.rate else None

    # -- the server's setting ----------------------------------------------------

    async def start(self) -> None:
        """At worker start: adopt what was learnt for this endpoint; remove a
        limit learnt for another one, or when the rate is configured."""
        try:
            async with asyncio.timeout(10):
                await self._read(starting=True)
        except (RPCError, TimeoutError) as err:
            self._no_api(err)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _want(self, what: str) -> None:
        self._wanted = what
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._adjust())

    async def _adjust(self) -> None:
        while (what := self._wanted) is not None:
            try:
                if what == "cut":
                    if self.rate is None:  # a first estimate: the answers of the burst arrive
                        await asyncio.sleep(SETTLE)
                    cut = await self._read() and self._enough() and self._cut()
                    if cut:  # else too little was served lately: nothing learnt
                        await self._set(cut)
                        self._cut_at, self._raises = self._clock(), 0
                elif await self._read() and self.rate is not None:
                    await self._set(self.rate * raise_factor(self._raises), raised=True)
                    self._raises += 1
            except RPCError as err:
                if err.status in NO_API:
                    self._no_api(err)
                    return
                log.info("model calls: the learnt rate limit could not be read or set (%s); later again", err)
            finally:
                if self._wanted == what:
                    self._wanted = None

    async def _read(self, starting: bool = False) -> bool:
        """Read the queue's setting (``rate``) and its pollers (``workers``);
        False when this worker must leave the setting alone."""
        described = await self.client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=self.client.namespace,
                task_queue=TaskQueue(name=self.queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
                report_config=True,
            )
        )
        seen = datetime.now(UTC) - POLLER_SEEN
        pollers = {p.identity for p in described.pollers if p.last_access_time.ToDatetime(UTC) >= seen}
        self.workers = max(1, len(pollers))
        config = described.config.queue_rate_limit
        reason = config.metadata.reason if config.HasField("metadata") else ""
        limit = config.rate_limit.requests_per_second if config.HasField("rate_limit") else None
        self.rate = None
        if limit is None:
            return self.learn and not self.off
        if not reason.startswith(OURS):  # someone's own setting: left alone
            if starting or not self.off:
                log.warning(
                    "the model calls' task queue %s has a rate limit of %g a second set through Temporal's API "
                    "(%s): it overrides DEEPRESEARCH_MODEL_RPS, and this worker does not change it",
                    self.queue,
                    limit,
                    reason or "no reason given",
                )
            self.off = True
            return False
        if self.learn and reason == OURS + self.endpoint:
            self.rate = limit
            if starting:
                log.info("model calls: at most %.3g a second for the deployment, learnt from %s", limit, self.endpoint)
            return True
        await self._set(None)  # the rate is configured now, or was learnt from another endpoint
        return self.learn and not self.off

    async def _set(self, rate: float | None, raised: bool = False) -> None:
        """Set the queue's rate limit to ``rate`` (None: remove it)."""
        update = UpdateTaskQueueConfigRequest.RateLimitUpdate(
            rate_limit=RateLimit(requests_per_second=rate) if rate is not None else None,
            reason=OURS + self.endpoint if rate is not None else "",
        )
        await self.client.workflow_service.update_task_queue_config(
            UpdateTaskQueueConfigRequest(
                namespace=self.client.namespace,
                identity=self.client.identity,
                task_queue=self.queue,
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
                update_queue_rate_limit=update,
            )
        )
        self.rate, now = rate, self._clock()
        if raised and now - self._said < SAY_EVERY:
            return
        self._said = now
        if rate is None:
            log.info("model calls: the rate limit learnt before for %s is removed", self.queue)
        else:
            log.info(
                "model calls: at most %.3g a second for the deployment (%s; learnt from %s's 429s and kept by the "
                "Temporal server for every worker; DEEPRESEARCH_MODEL_RPS sets it instead)",
                rate,
                "raised while none came" if raised else "lowered after a 429",
                self.endpoint,
            )

    def _no_api(self, err: BaseException) -> None:
        if not self.off:
            log.info(
                "the Temporal server does not take a task queue's rate limit (%s): model calls are paced by each "
                "worker's back-off only; set DEEPRESEARCH_MODEL_RPS from the account's limit",
                getattr(err, "message", None) or type(err).__name__,
            )
        self.off = True
