"""The parts of waiting out a provider's rate limit, each on its own: what
the model activity makes of a 429 (over real HTTP to the scripted server),
how long the workflow waits, the worker's pacer, the scripted account limit,
the setting, and what the CLI says. The whole, on the dev server:
tests/test_rate_limits.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import openai
import pytest
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, ApplicationErrorCategory, RetryState

from activities.llm import classify
from activities.pacing import LONGEST_PAUSE, Pacer
from activities.rate_limited import MAX_RETRY_AFTER
from activities.retry_after import asked_delay
from client.devserver import ONE_PARTITION, DevServer
from client.wording import usage_text, waiting_text
from infra.errors import ConfigError
from infra.settings import Settings
from testkit.account_limit import AccountLimit
from testkit.llm_server import Reply, ScriptedLLM
from workflows.models import Usage
from workflows.rate_limits import (
    LONGEST_BACKOFF,
    LONGEST_WAIT,
    PATIENT,
    RATE_LIMITED,
    asked_seconds,
    model_queue,
    wait_seconds,
    waiting_options,
)

# --- what the model activity makes of the provider's answer ---------------------


async def provider_error(reply: Reply, **server) -> openai.OpenAIError:
    """The error the real openai client raises for ``reply``."""
    with ScriptedLLM(lambda request: reply) as llm:
        for name, value in server.items():
            setattr(llm, name, value)
        client = openai.AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0)
        try:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        except openai.OpenAIError as err:
            return err
        finally:
            await client.close()
    raise AssertionError("the provider answered")


@pytest.mark.parametrize(
    "status, headers, asked",
    [
        (429, {"Retry-After": "7"}, 7.0),
        (429, {"retry-after-ms": "250", "Retry-After": "1"}, 0.25),  # OpenAI's milliseconds win
        (429, {}, None),
        (429, {"Retry-After": "7200"}, 7200.0),  # beyond the activity's own retry delay: the workflow waits it
        (503, {"Retry-After": "3"}, 3.0),  # overloaded, and says when to come back
        (529, {"Retry-After": "2"}, 2.0),  # Anthropic's overloaded
    ],
)
async def test_a_rate_limit_is_a_benign_ModelRateLimited_with_the_seconds_asked(status, headers, asked):
    err = classify(await provider_error(Reply(status=status, headers=headers, content="slow down")))
    assert err.type == RATE_LIMITED and not err.non_retryable
    assert list(err.details) == [asked]
    assert err.category == ApplicationErrorCategory.BENIGN  # not logged as a failure
    expected = None if asked is None else min(timedelta(seconds=asked), MAX_RETRY_AFTER)
    assert err.next_retry_delay == expected  # for runs recorded before the workflow waited


async def test_an_overloaded_provider_that_says_nothing_is_an_ordinary_error():
    err = classify(await provider_error(Reply(status=503, content="busy")))
    assert err.type == "ModelUnavailable"


async def test_an_account_without_quota_fails_at_once():
    body = (
        '{"error": {"message": "You exceeded your current quota, please check your plan and billing details.", '
        '"type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}'
    )
    err = classify(await provider_error(Reply(status=429, body=body), plain_json_streams=True))
    assert err.type == "ModelQuotaExhausted" and err.non_retryable
    assert "quota" in err.message and "OPENAI_API_KEY" in err.message


@pytest.mark.parametrize(
    "headers, seconds",
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "nonsense", "retry-after": "4"}, 4.0),
        ({"retry-after-ms": "nan", "retry-after": "4"}, 4.0),
        ({"retry-after-ms": "1e300"}, 60.0),  # capped
        ({"retry-after-ms": "-5"}, 0.0),
        ({"retry-after": "-5"}, 0.0),  # "now": the workflow backs off all the same (wait_seconds)
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_asked_delay_reads_what_providers_send(headers, seconds):
    delay = asked_delay(headers, timedelta(seconds=60))
    assert (delay.total_seconds() if delay is not None else None) == seconds


def test_asked_delay_reads_an_http_date():
    at = (datetime.now(UTC) + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert 25 <= asked_delay({"retry-after": at}, timedelta(minutes=5)).total_seconds() <= 31


# --- the workflow's waits ------------------------------------------------------------


def activity_error(cause: BaseException) -> ActivityError:
    err = ActivityError(
        "activity failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="w",
        activity_type="chat",
        activity_id="1",
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    err.__cause__ = cause
    return err


@pytest.mark.parametrize(
    "cause, expected",
    [
        (ApplicationError("429", 2.5, type=RATE_LIMITED), (True, 2.5)),
        (ApplicationError("429", 3, type=RATE_LIMITED), (True, 3.0)),
        (ApplicationError("429", None, type=RATE_LIMITED), (True, None)),
        (ApplicationError("429", type=RATE_LIMITED), (True, None)),
        (ApplicationError("429", "7", type=RATE_LIMITED), (True, None)),  # not a number: not said
        (ApplicationError("429", -1, type=RATE_LIMITED), (True, None)),
        (ApplicationError("429", float("inf"), type=RATE_LIMITED), (True, None)),
        (ApplicationError("429", True, type=RATE_LIMITED), (True, None)),
        (ApplicationError("boom", 2.0, type="ModelUnavailable"), (False, None)),
        (RuntimeError("x"), (False, None)),
    ],
)
def test_asked_seconds_tells_a_rate_limit_from_any_other_failure(cause, expected):
    assert asked_seconds(activity_error(cause)) == expected


def test_a_rate_limit_is_the_workflows_to_wait_not_the_activitys_to_retry():
    policy = RetryPolicy(maximum_attempts=12, non_retryable_error_types=["ModelAuthError"])
    options = waiting_options({"retry_policy": policy, "start_to_close_timeout": timedelta(minutes=1)})
    assert options["retry_policy"].non_retryable_error_types == ["ModelAuthError", RATE_LIMITED]
    assert options["retry_policy"].maximum_attempts == 12  # real errors keep their bound
    assert policy.non_retryable_error_types == ["ModelAuthError"]  # the original is untouched
    assert model_queue("deep-research") == "deep-research-model"


def test_wait_seconds_honours_retry_after_with_jitter():
    assert wait_seconds(4.0, 0, 0.0, 0.0) == 4.0
    assert wait_seconds(4.0, 0, 0.999, 0.0) == pytest.approx(4.0 + 2.0 * 0.999)
    assert wait_seconds(10_000.0, 0, 0.0, 0.0) == LONGEST_WAIT  # a day's Retry-After is waited in turns


def test_wait_seconds_backs_off_when_the_provider_says_nothing():
    assert [wait_seconds(None, n, 0.0, 0.0) for n in range(8)] == [1, 2, 4, 8, 16, 32, LONGEST_BACKOFF, LONGEST_BACKOFF]
    assert wait_seconds(None, 10**6, 0.0, 0.0) == LONGEST_BACKOFF  # no overflow however long it waited
    for draw in (-1.0, 0.3, 2.0):  # any draw stays within the jitter's bounds
        assert 1.0 <= wait_seconds(None, 0, draw, 0.0) <= 1.5


@pytest.mark.parametrize("asked", [0.0, 0.2, 1.0, None])
def test_a_call_told_to_come_back_now_backs_off_all_the_same(asked):
    """Issue 36: ``Retry-After: 0`` (a negative value, a date past) made a
    loop of a call a second. Each wait of one call is at least 1 s doubled,
    to a minute, and ten minutes once the call has waited half an hour."""
    assert [wait_seconds(asked, n, 0.0, n * 60.0) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert wait_seconds(asked, 40, 0.0, PATIENT) == LONGEST_WAIT
    assert wait_seconds(90.0, 3, 0.0, 100.0) == 90.0  # a longer ask is honoured


def test_calls_recorded_before_the_backoff_wait_as_they_did():
    assert 0 <= wait_seconds(0.0, 3, 0.5, None) <= 0.25  # "now": at most a quarter second of jitter
    assert wait_seconds(4.0, 5, 0.0, None) == 4.0
    assert [wait_seconds(None, n, 0.0, None) for n in range(7)] == [1, 2, 4, 8, 16, 32, LONGEST_BACKOFF]


# --- the worker's pacer ----------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_pacer_halves_once_per_pause_and_grows_back_by_served_calls():
    clock = Clock()
    pacer = Pacer(most=16, clock=clock)
    pacer.limited(2.0)
    assert (pacer.limit, pacer.pause_left()) == (8.0, 2.0)
    pacer.limited(1.0)  # another 429 of the same burst: the pause stands, the limit is not halved again
    assert (pacer.limit, pacer.pause_left()) == (8.0, 2.0)
    clock.now += 2.5
    pacer.limited(None)  # a new pause; the provider did not say how long
    assert (pacer.limit, pacer.pause_left()) == (4.0, 1.0)
    for _ in range(4):  # a limit's worth of served calls: one more at once
        pacer.served()
    assert pacer.limit == pytest.approx(5.0, abs=0.2)
    for _ in range(1000):
        pacer.served()
    assert pacer.limit == 16.0  # never above the worker's own bound
    clock.now += 10
    pacer.limited(10**9)
    assert pacer.pause_left() == LONGEST_PAUSE


def test_the_pacer_hands_out_slots_by_its_limit_and_none_during_a_pause():
    clock = Clock()
    pacer = Pacer(most=2, clock=clock)
    assert [pacer.try_take(), pacer.try_take(), pacer.try_take()] == [0.0, 0.0, None]  # two at once
    pacer.give_back()
    pacer.limited(3.0)  # limit 1, paused
    assert pacer.try_take() == 3.0
    clock.now += 3.0
    assert pacer.try_take() is None  # one in use, and the limit is now one
    pacer.give_back()
    assert pacer.try_take() == 0.0


async def test_a_slot_waits_for_a_release_from_another_thread():
    pacer = Pacer(most=1)
    await pacer.take()
    taking = asyncio.create_task(pacer.take())
    await asyncio.sleep(0.05)
    assert not taking.done()
    await asyncio.to_thread(pacer.give_back)  # the SDK releases slots from its own threads
    await asyncio.wait_for(taking, 2)
    assert pacer.in_use == 1


async def test_a_paused_worker_sends_nothing_until_the_pause_ends():
    pacer = Pacer(most=4)
    pacer.limited(0.3)
    began = asyncio.get_running_loop().time()
    await pacer.clear()
    assert asyncio.get_running_loop().time() - began >= 0.29


# --- the scripted provider's account ------------------------------------------------------


def test_the_account_limit_serves_its_rate_and_says_when_to_come_back():
    clock = Clock()
    account = AccountLimit(rate=2.0, clock=clock)
    assert [account.take(), account.take()] == [None, None]  # a second's worth at once
    wait = account.take()
    assert wait == pytest.approx(0.5)
    assert AccountLimit.headers(wait) == {"Retry-After": "1", "retry-after-ms": "500"}
    clock.now += 0.5
    assert account.take() is None
    assert (account.served, account.limited) == (3, 1)


# --- the setting, the dev server, the words -------------------------------------------------


@pytest.mark.parametrize("value, rate", [("", None), ("5", 5.0), (" 0.5 ", 0.5)])
def test_model_rps_reads(value, rate):
    assert Settings.from_env({"DEEPRESEARCH_MODEL_RPS": value}).model_rps == rate


@pytest.mark.parametrize("value", ["0", "-1", "fast", "nan", "inf", "1e9"])
def test_a_bad_model_rps_is_one_clear_line(value):
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"DEEPRESEARCH_MODEL_RPS": value})
    assert "DEEPRESEARCH_MODEL_RPS" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("demo", [False, True], ids=["worker", "worker --demo"])
def test_a_bad_model_rps_stops_the_worker_before_it_says_or_starts_anything(demo, tmp_path):
    """Issue 36, item 7d: `worker` printed "… Ctrl-C to stop" before the
    error, and `worker --demo` ignored the value and ran."""
    import os
    import subprocess
    import sys

    from client.devserver import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DEEPRESEARCH_", "OPENAI_"))}
    env |= {
        "DEEPRESEARCH_DATA_DIR": str(tmp_path / "data"),
        "DEEPRESEARCH_DEV_SERVER_PORT": str(free_port()),
        "DEEPRESEARCH_DEV_UI_PORT": str(free_port()),
        "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",  # nothing there: `worker` is not to get that far
        "OPENAI_API_KEY": "sk-test",
        "DEEPRESEARCH_MODEL_RPS": "fast",
    }
    if demo:
        del env["TEMPORAL_ADDRESS"]  # --demo would start the embedded server
    command = [sys.executable, "-m", "client.cli", "worker", *(["--demo"] if demo else [])]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the worker ran with DEEPRESEARCH_MODEL_RPS=fast")
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert done.stderr == (
        "error: DEEPRESEARCH_MODEL_RPS must be a number of requests a second "
        "(e.g. 5, or 0.5 for one every two seconds), got 'fast'\n"
    )
    assert not (tmp_path / "data" / "temporal.db").exists()


def test_the_keyless_commands_say_they_ignore_a_model_rps():
    from client.demo.backend import ignored_pace

    assert ignored_pace({}) is None
    assert ignored_pace({"DEEPRESEARCH_MODEL_RPS": "5"}) == (
        "DEEPRESEARCH_MODEL_RPS=5 is ignored here: the demo's scripted model runs on loopback and has no provider limit"
    )
    with pytest.raises(ConfigError):
        ignored_pace({"DEEPRESEARCH_MODEL_RPS": "0"})


def test_a_new_dev_server_database_has_task_queues_of_one_partition(tmp_path):
    def flags(server: DevServer) -> set[str]:
        command = server.command()
        return {command[i + 1] for i, arg in enumerate(command) if arg == "--dynamic-config-value"}

    one = {f"{key}={value}" for key, value in ONE_PARTITION.items()}
    new = DevServer(db_file=tmp_path / "new" / "temporal.db")
    assert one <= flags(new)
    assert not (tmp_path / "new").exists()  # asking changes nothing
    new.mark_new_database()
    new.db_file.write_bytes(b"")  # the server made it
    assert one <= flags(DevServer(db_file=new.db_file))  # and it keeps one partition
    # A database made before keeps its partitions: a task in one the server
    # no longer reads would never run.
    old = DevServer(db_file=tmp_path / "old.db")
    old.db_file.write_bytes(b"")
    old.mark_new_database()
    assert not one & flags(old)


def test_status_words_for_a_waiting_run():
    now = datetime(2026, 1, 2, 10, 0, 42, tzinfo=UTC)
    line = waiting_text("2026-01-02T10:00:00+00:00", now)
    assert line.startswith("waiting on the model provider's rate limit since ") and line.endswith("(42 s)")
    assert waiting_text("2026-01-02T09:50:00+00:00", now).endswith("(10 min)")
    assert waiting_text(None) is None and waiting_text("not a time") is None
    usage = Usage(llm_calls=3, rate_limited=2, rate_limited_seconds=7.4)
    assert usage_text(usage).endswith("2 waits on the provider's rate limit (7 s)")
    assert "rate limit" not in usage_text(Usage(llm_calls=3))
