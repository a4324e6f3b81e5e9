"""How fast one worker starts model calls, adapted to what the provider says.

The fleet's pace is the server's: model calls run on a task queue of their
own whose workers ask Temporal for at most ``DEEPRESEARCH_MODEL_RPS`` tasks a
second between them (worker.py). On top of that, each worker backs off when
the provider answers 429 (an account shared with others, a rate set too high,
or none set):

- ``Pacer`` keeps an adaptive concurrency limit: halved on a rate limit (at
  most once per pause, so one burst of 429s counts once), grown by one per
  limit's worth of served calls (additive increase, multiplicative decrease);
  and a pause: after a 429 no model call starts on this worker until the
  provider's ``Retry-After`` (at most ``LONGEST_PAUSE``) has passed.
- ``PacedSlots`` hands the model worker its activity slots by the pacer, so
  a worker over its limit or in a pause stops polling: the calls wait in
  Temporal's queue, where they cost no history, and other workers take them.

The model activity tells the pacer what happened (``limited``, ``served``)
and waits out a pause before it sends (``clear``), for a call that was
already on its way when the 429 came. With ``DEEPRESEARCH_MODEL_RPS`` unset
it tells the learnt pace too (``Pacer.learnt``, activities/learnt_pace.py),
which sets the rate of the whole fleet on the Temporal server.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    CustomSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
)

from activities.heartbeat import heartbeating
from activities.learnt_pace import LearntPace
from workflows.rate_limits import RATE_LIMITED

log = logging.getLogger(__name__)
SAY_EVERY = 60.0  # seconds between two log lines about the provider's limit
LONGEST_PAUSE = 60.0  # seconds; a longer Retry-After is the workflow's to wait (workflows/rate_limits.py)
UNSAID_PAUSE = 1.0  # seconds, after a 429 that did not say how long


class Pacer:
    """The model calls one worker may start: at most ``limit`` at once (from
    ``most`` down to 1, adapted), none during a pause. Thread-safe: the SDK
    releases slots from its own threads."""

    def __init__(
        self, most: int, clock: Callable[[], float] = time.monotonic, learnt: LearntPace | None = None
    ) -> None:
        self.most = max(1, most)
        self.learnt = learnt  # the fleet's rate, learnt (told on the event loop, by ``paced``)
        self.limit = float(self.most)
        self.in_use = 0
        self.paused_until = 0.0
        self.limited_count = 0  # 429s seen
        self.served_count = 0
        self._said = -math.inf
        self._clock = clock
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    # -- what the model activity reports --------------------------------------

    def limited(self, asked: float | None) -> None:
        """The provider answered 429 (or overloaded, with Retry-After):
        pause for what it asked, and halve the limit unless this pause
        already did."""
        pause = min(max(asked if asked is not None else UNSAID_PAUSE, 0.0), LONGEST_PAUSE)
        with self._lock:
            now = self._clock()
            self.limited_count += 1
            if now >= self.paused_until:  # a new pause, not another 429 of the last one
                self.limit = max(1.0, self.limit / 2)
            self.paused_until = max(self.paused_until, now + pause)
            say = now - self._said >= SAY_EVERY
            if say:
                self._said = now
            counts = (self.limited_count, self.served_count, math.floor(self.limit))
        if say:
            log.info(
                "the model provider rate-limits the account (%d refused, %d served by this worker so far): "
                "model calls pause %.1f s, then at most %d at once, more as calls are served",
                *counts[:2],
                pause,
                counts[2],
            )

    def served(self) -> None:
        """The provider answered: one more call at once per limit's worth."""
        with self._lock:
            self.served_count += 1
            self.limit = min(float(self.most), self.limit + 1 / self.limit)
        self._wake()

    def pause_left(self) -> float:
        with self._lock:
            return max(0.0, self.paused_until - self._clock())

    async def clear(self) -> None:
        """Return once no pause holds this worker's model calls."""
        while (left := self.pause_left()) > 0:
            await asyncio.sleep(left)

    # -- slots ------------------------------------------------------------------

    def try_take(self) -> float | None:
        """Take a slot: 0.0 when taken, else the seconds of pause left, or
        None when the limit is reached (wait for a release)."""
        with self._lock:
            left = self.paused_until - self._clock()
            if left > 0:
                return left
            if self.in_use >= max(1, math.floor(self.limit)):
                return None
            self.in_use += 1
            return 0.0

    def give_back(self) -> None:
        with self._lock:
            self.in_use = max(0, self.in_use - 1)
        self._wake()

    async def take(self) -> None:
        """Wait for a slot (by the limit and any pause), then take it."""
        loop = asyncio.get_running_loop()
        while (wait := self.try_take()) != 0.0:
            event = asyncio.Event()
            with self._lock:
                self._waiters.append((loop, event))
            try:
                await asyncio.wait_for(event.wait(), timeout=wait if wait is not None else 1.0)
            except TimeoutError:
                pass
            finally:
                with self._lock:
                    if (loop, event) in self._waiters:
                        self._waiters.remove((loop, event))

    def _wake(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)


T = TypeVar("T")


async def paced(pacer: Pacer, call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` (one model request) once the pacer's pause is over, telling
    the pacer how the provider answered."""
    learnt = pacer.learnt
    if learnt is None or not learnt.pacing:  # a learnt pace on the server needs no pause of its own
        async with heartbeating():
            await pacer.clear()
    try:
        done = await call()
    except ApplicationError as err:
        if err.type == RATE_LIMITED:
            if learnt is None or not learnt.pacing:
                pacer.limited(err.details[0] if err.details else None)
            if learnt:
                learnt.limited()
        raise
    pacer.served()
    if learnt:
        learnt.served(queued_seconds())
    return done


def queued_seconds() -> float:
    """How long the running activity waited in its task queue (0 outside one)."""
    if not activity.in_activity():
        return 0.0
    info = activity.info()
    return max(0.0, (info.started_time - info.current_attempt_scheduled_time).total_seconds())


class PacedSlots(CustomSlotSupplier):
    """The model worker's activity slots, handed out by a ``Pacer``."""

    def __init__(self, pacer: Pacer) -> None:
        self.pacer = pacer

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        await self.pacer.take()
        return SlotPermit()

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        return SlotPermit() if self.pacer.try_take() == 0.0 else None

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        pass

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        self.pacer.give_back()
