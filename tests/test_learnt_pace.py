"""The pace learnt from a provider's 429s (activities/learnt_pace.py), on its
own: its decisions as pure functions, and what it sets on the server, with a
stand-in for Temporal's two task-queue calls (describe, update config) and a
clock of its own. The whole, on the dev server: tests/test_rate_limits.py
and bench/ (benchmark 8)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from temporalio.api.taskqueue.v1 import PollerInfo, RateLimit, RateLimitConfig, TaskQueueConfig
from temporalio.api.workflowservice.v1 import DescribeTaskQueueResponse, UpdateTaskQueueConfigResponse
from temporalio.service import RPCError, RPCStatusCode

from activities import learnt_pace
from activities.learnt_pace import (
    LOWEST,
    OURS,
    LearntPace,
    cut_rate,
    endpoint_name,
    peak_served_rate,
    proven_rate,
    raise_factor,
    served_rate,
)


def test_the_endpoint_is_named_by_host_and_port_only():
    assert endpoint_name("https://user:secret@api.example.com:8443/v1?key=k") == "api.example.com:8443"
    assert endpoint_name(None) == "api.openai.com"


def test_the_served_rate_counts_the_last_window_over_at_least_a_second():
    assert served_rate([], 100.0) == 0.0
    assert served_rate([99.95, 99.96, 99.97, 99.98, 99.99], 100.0) == 5.0  # a burst: over one second
    assert served_rate([t / 2 for t in range(2, 201)], 100.0) == pytest.approx(2.0, rel=0.06)  # the last 10 s
    assert served_rate([50.0], 100.0) == 0.0  # long ago
    # A 429 at a quiet time, on a burst of three: the burst's pace, not the quiet one's.
    quiet_then_burst = [91.0, 96.0, 99.9, 99.95, 99.97]
    assert served_rate(quiet_then_burst, 100.0) == pytest.approx(5 / 9)
    assert peak_served_rate(quiet_then_burst, 100.0) == 3.0


def test_the_proven_rate_is_the_most_served_in_ten_seconds_without_a_429():
    served = [float(t) for t in range(0, 60)]  # one a second for a minute
    assert proven_rate(served, [], 60.0) == 1.0
    assert proven_rate(served, [float(t) + 0.5 for t in range(0, 60, 5)], 60.0) == 0.1  # a 429 every 5 s
    assert proven_rate(served, [30.5], 60.0) == 1.0  # the windows away from the one 429
    assert proven_rate(served, [], 60.0 + 600) == 0.0  # long ago


def test_the_limit_grows_faster_the_longer_no_429_comes():
    assert [raise_factor(n) for n in range(9)] == pytest.approx([1.05] * 4 + [1.1, 1.2, 1.4, 1.4, 1.4])


def test_a_cut_is_below_what_was_served_and_what_was_set():
    assert cut_rate(None, 5.0) == pytest.approx(4.5)
    assert cut_rate(3.0, 5.0) == pytest.approx(2.7)
    assert cut_rate(4.0, 0.0) == 2.0  # nothing served lately: halved
    assert cut_rate(None, 0.0) is None  # nothing to learn from
    assert cut_rate(0.001, 0.001) == LOWEST


class Service:
    """Temporal's describe-task-queue and update-task-queue-config, on one
    queue, as the dev server answers them."""

    def __init__(self, limit: float | None = None, reason: str = "", fails: bool = False) -> None:
        self.limit, self.reason, self.fails = limit, reason, fails
        self.updates: list[float | None] = []
        self.pollers = ["1@host"]

    async def describe_task_queue(self, request):
        if self.fails:
            raise RPCError("unimplemented", RPCStatusCode.UNIMPLEMENTED, b"")
        config = RateLimitConfig()
        if self.limit is not None:
            config.rate_limit.CopyFrom(RateLimit(requests_per_second=self.limit))
            config.metadata.reason = self.reason
        response = DescribeTaskQueueResponse(config=TaskQueueConfig(queue_rate_limit=config))
        for identity in self.pollers:
            poller = PollerInfo(identity=identity)
            poller.last_access_time.FromDatetime(datetime.now(UTC))
            response.pollers.append(poller)
        return response

    async def update_task_queue_config(self, request):
        update = request.update_queue_rate_limit
        self.limit = update.rate_limit.requests_per_second if update.HasField("rate_limit") else None
        self.reason = update.reason
        self.updates.append(self.limit)
        return UpdateTaskQueueConfigResponse()


class Client:
    namespace, identity = "default", "1@host"

    def __init__(self, service: Service) -> None:
        self.workflow_service = service


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def no_settling(monkeypatch):
    monkeypatch.setattr(learnt_pace, "SETTLE", 0.0)


async def settled(pace: LearntPace) -> None:
    while pace._task is not None and not pace._task.done():
        await asyncio.sleep(0)


async def test_a_429_sets_the_fleets_rate_below_what_the_provider_served():
    service, clock = Service(), Clock()
    pace = LearntPace(Client(service), "q-model", "llm:1", clock=clock)
    await pace.start()
    for _ in range(5):
        pace.served(0.0)
        clock.now += 0.01
    pace.limited()
    await settled(pace)
    assert service.updates == [pytest.approx(4.5)] and service.reason == OURS + "llm:1"
    pace.limited()  # the same burst: no second cut
    await settled(pace)
    assert len(service.updates) == 1
    service.pollers = ["1@host", "2@host"]  # two workers share the queue: this one served half
    clock.now += 20
    for _ in range(4):  # 2 a second here: 4 a second for the fleet
        pace.served(0.0)
        clock.now += 0.5
    pace.limited()
    await settled(pace)
    assert service.updates[-1] == pytest.approx(0.9 * 4.0)  # not 0.9 * 2


async def test_a_429_at_a_quiet_time_teaches_nothing():
    service, clock = Service(), Clock()
    pace = LearntPace(Client(service), "q-model", "llm:1", clock=clock)
    await pace.start()
    for _ in range(3):  # three calls in ten seconds, then a 429
        pace.served(0.0)
        clock.now += 3
    pace.limited()
    await settled(pace)
    assert service.updates == [] and not pace.pacing  # the workers' own back-off only


async def test_refusals_that_come_whatever_the_pace_do_not_drive_the_limit_to_nothing():
    """A provider (or the account's other users) refusing now and then:
    each 429 cuts, but never below 80 % of the pace it served for ten
    seconds without one."""
    service, clock = Service(), Clock()
    pace = LearntPace(Client(service), "q-model", "llm:1", clock=clock)
    await pace.start()
    for _ in range(40):  # 2 a second for 20 s, none refused
        pace.served(0.0)
        clock.now += 0.5
    for _ in range(12):  # then a 429 every 6 s, served at the limit's pace between
        pace.limited()
        await settled(pace)
        for _ in range(int(6 * (pace.rate or 2.0))):
            clock.now += 1 / (pace.rate or 2.0)
            pace.served(1.0)
    assert min(service.updates) >= 0.8 * 2.0 * 0.99
    assert len(service.updates) >= 1


async def test_the_rate_grows_only_while_calls_wait_behind_it():
    service, clock = Service(limit=2.0, reason=OURS + "llm:1"), Clock()
    pace = LearntPace(Client(service), "q-model", "llm:1", clock=clock)
    await pace.start()
    assert pace.rate == 2.0 and pace.pacing  # adopted: learnt before, for this endpoint
    for _ in range(20):  # served at once: the limit does not bind
        clock.now += 1
        pace.served(0.0)
        await settled(pace)
    assert service.updates == []
    for _ in range(10):  # each waited a second in the queue: raised at once, then after 5 s
        clock.now += 1
        pace.served(1.0)
        await settled(pace)
    assert service.updates == [pytest.approx(2.0 * 1.05), pytest.approx(2.0 * 1.05**2)]
    pace.limited()  # then a 429: cut, and no raise for a while
    await settled(pace)
    clock.now += 1
    pace.served(1.0)
    await settled(pace)
    assert service.updates[-1] < 2.0


@pytest.mark.parametrize(
    "learn, reason, kept, off",
    [
        (True, OURS + "llm:1", 2.0, False),  # learnt for this endpoint: adopted
        (True, OURS + "other:2", None, False),  # for another endpoint: removed
        (False, OURS + "llm:1", None, True),  # DEEPRESEARCH_MODEL_RPS set: removed, its rate rules
        (True, "set by the ops team", 2.0, True),  # someone's own: left alone, nothing learnt
    ],
)
async def test_a_worker_starts_from_the_servers_setting(learn, reason, kept, off):
    service = Service(limit=2.0, reason=reason)
    pace = LearntPace(Client(service), "q-model", "llm:1", learn=learn)
    await pace.start()
    assert (service.limit, pace.off) == (kept, off)
    pace.limited()
    await settled(pace)
    assert service.limit == kept or not off  # a worker that does not learn changes nothing


async def test_a_server_without_the_api_leaves_the_pace_to_the_workers():
    service = Service(fails=True)
    pace = LearntPace(Client(service), "q-model", "llm:1")
    await pace.start()
    assert pace.off and not pace.pacing
    pace.served(5.0)
    pace.limited()
    await settled(pace)
    assert service.updates == []
