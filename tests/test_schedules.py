"""Scheduled research, end to end on the real dev server with the real worker
and CLI: a Temporal Schedule's runs build on its last one and say what
changed; bad schedule input is one line. (Follow-ups and ``--continue-from``:
tests/test_research_goes_on.py, whose helpers these use.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

import pytest
from temporalio.client import WorkflowExecutionStatus

from testkit.pages import article
from testkit.runs import polled
from testkit.worker_process import WorkerProcess
from tests.test_research_goes_on import BIN, NEW_FACT, QUESTION, cli
from workflows.models import TITLE_ATTRIBUTE


@pytest.fixture
async def worker(worker_env, temporal_client, tmp_path, script):
    """A worker process (`python worker.py`), as tests/test_research_goes_on.py's."""
    with WorkerProcess(worker_env, tmp_path / "worker.log") as process:
        await process.ready(temporal_client)
        yield process


async def scheduled_runs(client, name: str) -> list:
    query = f"TemporalScheduledById = '{name}'"
    return [run async for run in client.list_workflows(query)]


async def completed(client, name: str, count: int, timeout: float = 120) -> list:
    deadline = time.monotonic() + timeout
    while True:
        runs = [r for r in await scheduled_runs(client, name) if r.status == WorkflowExecutionStatus.COMPLETED]
        if len(runs) >= count:
            return sorted(runs, key=lambda r: r.start_time)
        assert time.monotonic() < deadline, f"{len(runs)} of {count} scheduled runs completed"
        await asyncio.sleep(0.5)


async def test_a_schedule_runs_builds_on_its_last_run_and_says_what_changed(
    worker_env, worker, llm, pages, temporal_client
):
    name = f"lantern-{time.time_ns() % 10**8}"
    created = await asyncio.to_thread(
        cli, worker_env, "schedule", "create", name, QUESTION, "--every", "4s", "--max-step-num", "1"
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    try:
        deadline = time.monotonic() + 120
        while "/lighthouse" not in pages.hits:
            assert time.monotonic() < deadline, "the first scheduled run never read the page"
            await asyncio.sleep(0.2)
        # the site changes its figure once the first run has read it
        pages.add("/lighthouse", article("Lantern Rock history", ["Some history first.", NEW_FACT + ".", "More."]))
        first = (await completed(temporal_client, name, 1))[0]
        runs = await completed(temporal_client, name, 2)
        second = [r for r in runs if r.start_time > first.start_time][0]
        old = await temporal_client.get_workflow_handle(first.id).result()
        new = await temporal_client.get_workflow_handle(second.id).result()
        reporter_requests = [json.dumps(c) for c in llm.calls("reporter")]
        assert any(first.id in r and "4417" in r and "5120" in r for r in reporter_requests)
        report = new["final_report"]
        assert report.index("What changed since") < report.index("Key Points")  # it opens with the changes
        changes = report.split("What changed since", 1)[1].split("## Key Points", 1)[0]
        assert "4417" in changes and "5120" in changes  # the old and the new figure
        assert changes.count(f"]({pages.url('/lighthouse')})") == 2  # each cited, its link kept by the check
        assert pages.url("/lighthouse") in [c["url"] for c in new["citations"]]
        assert "What changed since" not in old["final_report"]
        listed = await asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "list", "--limit", "1000")
        assert f"(schedule {name})" in listed.stdout
        described = await temporal_client.get_workflow_handle(second.id).describe()
        assert described.typed_search_attributes.get(TITLE_ATTRIBUTE) == "Scripted research"  # as any run shows

        bundled = subprocess.run(
            [str(BIN / "temporal"), "schedule", "list", "--address", worker_env["TEMPORAL_ADDRESS"]],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert name in bundled.stdout, bundled.stdout + bundled.stderr
        ours = await asyncio.to_thread(cli, worker_env, "schedule", "list")
        assert name in ours.stdout and "4s" in ours.stdout

        paused = await asyncio.to_thread(cli, worker_env, "schedule", "pause", name)
        assert paused.returncode == 0, paused.stderr
        await asyncio.sleep(1)  # a start already under way may still land
        count = len(await scheduled_runs(temporal_client, name))
        await asyncio.sleep(9)  # two intervals and more
        assert len(await scheduled_runs(temporal_client, name)) == count  # paused: no new run
        row = next(line for line in (await asyncio.to_thread(cli, worker_env, "schedule", "list")).stdout.splitlines()
                   if line.startswith(name))  # fmt: skip
        assert " paused " in row and row.split()[-2] == "-"  # no next run while paused (the owner is last)
    finally:
        deleted = await asyncio.to_thread(cli, worker_env, "schedule", "delete", name)
    assert deleted.returncode == 0, deleted.stderr
    listed = await polled(  # schedules are listed from the visibility store, which learns of the delete a moment later
        lambda: asyncio.to_thread(cli, worker_env, "schedule", "list"), lambda listed: name not in listed.stdout
    )
    assert name not in listed.stdout
    again = await asyncio.to_thread(cli, worker_env, "schedule", "pause", name)
    assert again.returncode == 1 and f"no schedule named {name!r}" in again.stderr


def test_schedule_durations_read_as_users_write_them():
    from datetime import timedelta

    from client.commands.schedule import parse_every
    from client.errors import CliError

    assert parse_every("1w") == timedelta(weeks=1)
    assert parse_every("1h30m") == timedelta(minutes=90)
    assert parse_every(" 45s ") == timedelta(seconds=45)
    for bad in ("", "1x", "w", "1.5h", "-1d", "1d 2"):
        with pytest.raises(CliError, match="--every"):
            parse_every(bad)


async def test_bad_schedule_input_is_one_line(worker_env, worker):
    name = f"dup-{time.time_ns() % 10**8}"
    for timing in (["--every", ""], ["--every", "1x"], ["--cron", ""], ["--cron", "99 * * * *"]):
        done = await asyncio.to_thread(cli, worker_env, "schedule", "create", name, QUESTION, *timing)
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, (timing, done.stderr)
        assert "Traceback" not in done.stderr and f"error: {timing[0]}" in done.stderr
    # Issue 27, item 7: a cron expression no date matches was accepted and listed as "EVERY ?".
    never = await asyncio.to_thread(cli, worker_env, "schedule", "create", name, QUESTION, "--cron", "0 0 31 2 *")
    assert never.returncode == 1 and never.stderr.strip().splitlines() == [
        "error: --cron '0 0 31 2 *' never fires (no date matches it): no schedule created"
    ]
    created = await asyncio.to_thread(cli, worker_env, "schedule", "create", name, QUESTION, "--every", "1w")
    assert created.returncode == 0, created.stderr  # the refused one left nothing under its name
    weekdays = f"{name}-cron"
    try:
        again = await asyncio.to_thread(cli, worker_env, "schedule", "create", name, "Other?", "--cron", "0 8 * * *")
        assert again.returncode == 1 and again.stderr.strip().splitlines() == [
            f"error: a schedule named {name!r} already exists (delete it first, or choose another name)"
        ]
        made = await asyncio.to_thread(
            cli, worker_env, "schedule", "create", weekdays, QUESTION, "--cron", "0 8 * * MON-FRI"
        )
        assert made.returncode == 0, made.stderr
        listed = (await asyncio.to_thread(cli, worker_env, "schedule", "list")).stdout.splitlines()
        row = next(line for line in listed if line.startswith(weekdays))
        assert row.split("  ")[1].strip() == "0 8 * * MON-FRI"  # its timing, where "?" stood
    finally:
        assert (await asyncio.to_thread(cli, worker_env, "schedule", "delete", name)).returncode == 0
        await asyncio.to_thread(cli, worker_env, "schedule", "delete", weekdays)


def test_schedule_create_offers_only_the_options_it_keeps():
    """Issue 27, item 10: --auto-accept sat beside --review (which decides) and
    --continue-from beside the schedule's own building on its last run."""
    from client.cli import build_parser

    parser = build_parser()
    helped = parser._subparsers._group_actions[0].choices["schedule"]._subparsers._group_actions[0].choices["create"]
    text = helped.format_help()
    assert "--auto-accept" not in text and "--continue-from" not in text
    assert "--review" in text and "Temporal adds the start time" in text  # --id: what it names
    with pytest.raises(SystemExit):
        parser.parse_args(["schedule", "create", "n", "q?", "--every", "1w", "--auto-accept"])


async def test_a_schedule_made_anew_under_an_old_name_starts_afresh(worker_env, worker, llm, temporal_client):
    """A deleted schedule's runs stay, but a new schedule of the same name (here
    on another question) does not build on them: nothing from another run."""
    name = f"reused-{time.time_ns() % 10**8}"
    for question in (QUESTION, "What else stands on Lantern Rock?"):
        created = await asyncio.to_thread(cli, worker_env, "schedule", "create", name, question, "--every", "1w")
        assert created.returncode == 0, created.stderr
        try:
            assert (await asyncio.to_thread(cli, worker_env, "schedule", "trigger", name)).returncode == 0
            runs = await completed(temporal_client, name, 1 if question == QUESTION else 2)
        finally:
            assert (await asyncio.to_thread(cli, worker_env, "schedule", "delete", name)).returncode == 0
    old, new = runs[0], runs[-1]
    report = (await temporal_client.get_workflow_handle(new.id).result())["final_report"]
    assert "What changed since" not in report
    assert not [c for c in llm.calls() if old.id in json.dumps(c)]  # the old schedule's run reached no request


async def test_a_schedule_with_review_waits_and_starts_no_second_run_meanwhile(worker_env, worker, temporal_client):
    """--review: each scheduled run waits for review; the stated policy, one run
    at a time, skips the starts that fall while it waits."""
    from temporalio.client import ScheduleOverlapPolicy

    from client.commands.schedule import CATCHUP_WINDOW

    name = f"reviewed-{time.time_ns() % 10**8}"
    created = await asyncio.to_thread(
        cli, worker_env, "schedule", "create", name, QUESTION, "--every", "2s", "--review"
    )
    assert created.returncode == 0, created.stderr
    assert "plans wait for review" in created.stdout
    try:
        policy = (await temporal_client.get_schedule_handle(name).describe()).schedule.policy
        assert policy.overlap == ScheduleOverlapPolicy.SKIP and policy.catchup_window == CATCHUP_WINDOW
        deadline = time.monotonic() + 60
        while True:
            runs = await scheduled_runs(temporal_client, name)
            if runs and (await temporal_client.get_workflow_handle(runs[0].id).query("status"))["phase"] == (
                "awaiting_review"
            ):
                break
            assert time.monotonic() < deadline, "the scheduled run never waited for review"
            await asyncio.sleep(0.3)
        await asyncio.sleep(6)  # three intervals
        assert len(await scheduled_runs(temporal_client, name)) == 1  # skipped while the first waits
        described = await temporal_client.get_schedule_handle(name).describe()
        assert described.info.num_actions_skipped_overlap >= 2
    finally:
        assert (await asyncio.to_thread(cli, worker_env, "schedule", "delete", name)).returncode == 0
    for run in await scheduled_runs(temporal_client, name):
        await temporal_client.get_workflow_handle(run.id).terminate("test over")
