"""Keeping a topic current (issue 29), end to end on the dev server with the
real worker, CLI and crawler: a scheduled run (and ``--continue-from ID
--recheck``) reads the earlier run's sources again and runs its searches
again before it plans, and its "What changed since <date>" lists each
changed value, old and new, each cited; names a source gone or moved; says
in one line that nothing changed, and then costs no model call."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus

from testkit.llm_server import role_of
from testkit.pages import article
from testkit.research_script import FACT
from testkit.runs import keep_history, polled

BIN = Path(sys.executable).parent
QUESTION = "Tell me about the Lantern Rock lighthouse"
NEW_FACT = "FACT: the Lantern Rock lighthouse keeper logged 5120 ships in 1911"
PAGE = ("Lantern Rock history", ["Some history first.", FACT + ".", "More."])
CHANGED = ("Lantern Rock history", ["Some history first.", NEW_FACT + ".", "More."])


def cli(env, *args, timeout=180):
    return subprocess.run([str(BIN / "deepresearch"), *args], env=env, capture_output=True, text=True, timeout=timeout)


async def scheduled_run(env, client, name: str, count: int) -> str:
    """Trigger the schedule and wait for its ``count``-th run to complete; its id."""
    triggered = await asyncio.to_thread(cli, env, "schedule", "trigger", name)
    assert triggered.returncode == 0, triggered.stderr
    deadline = time.monotonic() + 180
    while True:
        runs = [r async for r in client.list_workflows(f"TemporalScheduledById = '{name}'")]
        done = sorted((r for r in runs if r.status == WorkflowExecutionStatus.COMPLETED), key=lambda r: r.start_time)
        if len(done) >= count:
            return done[count - 1].id
        assert time.monotonic() < deadline, f"{len(done)} of {count} scheduled runs completed"
        await asyncio.sleep(0.3)


async def result_of(client, run_id: str) -> dict:
    return await client.get_workflow_handle(run_id).result()


def section_of(report: str) -> str:
    """The "What changed since" section: from its heading to the next heading."""
    assert report.count("## What changed since") == 1, report
    return report.split("## What changed since", 1)[1].split("\n## ", 1)[0]


def requests_between(llm, before: int) -> list[dict]:
    return llm.requests[before:]


@pytest.fixture
def desk(worker_env, tmp_path):
    """`deepresearch ui` on a free port: GET its JSON API; yields a getter."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    log = open(tmp_path / "desk.log", "wb")
    proc = subprocess.Popen([str(BIN / "deepresearch"), "ui", "--port", str(port)], env=worker_env, stdout=log,
                            stderr=subprocess.STDOUT)  # fmt: skip

    def get(path: str) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api{path}", timeout=30) as answer:
            return json.load(answer)

    deadline = time.monotonic() + 30
    while True:
        try:
            get("/health")
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "desk.log").read_text()
            time.sleep(0.1)
    yield get
    proc.terminate()
    proc.wait(10)
    log.close()


@pytest.fixture
def schedule(worker_env):
    """A schedule on the question that runs only when triggered; deleted after."""
    name = f"watch-{time.time_ns() % 10**9}"
    created = cli(worker_env, "schedule", "create", name, QUESTION, "--every", "1w", "--max-step-num", "1")
    assert created.returncode == 0, created.stderr
    yield name
    cli(worker_env, "schedule", "delete", name)


async def test_changed_pages_give_each_old_and_new_value_cited(
    worker_env, worker, llm, pages, script, temporal_client, schedule, desk
):
    pages.add("/lighthouse", article(*PAGE), validators=True)
    first_id = await scheduled_run(worker_env, temporal_client, schedule, 1)
    first = await result_of(temporal_client, first_id)
    assert first["pages"] and first["pages"][0]["etag"]  # kept for the next run: text by hash, validators
    assert first["searches"] and first["recheck"] is None

    pages.add("/lighthouse", article(*CHANGED), validators=True)  # the site changes its figure
    calls_before, hits_before = len(llm.requests), len(pages.requests)
    second_id = await scheduled_run(worker_env, temporal_client, schedule, 2)
    second = await result_of(temporal_client, second_id)
    await keep_history(temporal_client.get_workflow_handle(second_id), "rechecked_changed")

    url, then, today = pages.url("/lighthouse"), first["finished_at"][:10], second["finished_at"][:10]
    changes = section_of(second["final_report"])
    assert f"**4417 → 5120**: was “{FACT}.” ([Lantern Rock history]({url}), read {then}); " in changes
    assert f"now “{NEW_FACT}.” ([Lantern Rock history]({url}), read {today})" in changes
    # searches: the background search, the step's evidence search and its lead's, the researcher's own
    assert second["recheck"] == {
        "since": then, "run_id": first_id, "pages": 1, "changed": 1, "gone": 0, "moved": 0, "not_compared": 0,
        "searches": 4, "new_results": 0,
    }  # fmt: skip
    # it asked conditionally, and the server, whose page had changed, sent it whole
    asked = [h for path, h in pages.requests[hits_before:] if path == "/lighthouse"]
    assert asked[0].get("If-None-Match") == first["pages"][0]["etag"]
    # the planner and the reporter were shown both values, the reporter the earlier run too
    second_calls = requests_between(llm, calls_before)
    assert [role_of(c) for c in second_calls][0] == "planner"  # the run's own question: no coordinator again
    planner = json.dumps(second_calls[0])
    assert "4417" in planner and "5120" in planner
    reporter = json.dumps([c for c in second_calls if role_of(c) == "reporter"][-1])
    assert first_id in reporter and "4417" in reporter and "5120" in reporter

    listed = await polled(
        lambda: asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "schedule", "list"),
        lambda done: second_id in done.stdout,
    )
    row = next(line for line in listed.stdout.splitlines() if line.startswith(schedule))
    assert second_id in row and f"changes since {then}: 1 source(s) changed" in row
    # the desk: the run's "What changed" first, in a card of its own; the schedule with what its last run found
    shown = (await asyncio.to_thread(desk, f"/runs/{second_id}"))["result"]
    assert shown["changes_html"].startswith("<h2>What changed since") and "5120" in shown["changes_html"]
    assert "What changed since" not in shown["report_html"]
    schedules = (await asyncio.to_thread(desk, "/schedules"))["schedules"]
    assert next(s for s in schedules if s["name"] == schedule)["changes"].startswith(f"changes since {then}")


async def test_nothing_changed_says_so_in_one_line_and_costs_no_model_call(
    worker_env, worker, llm, pages, script, temporal_client, schedule
):
    pages.add("/lighthouse", article(*PAGE), validators=True)
    first_id = await scheduled_run(worker_env, temporal_client, schedule, 1)
    first = await result_of(temporal_client, first_id)
    calls_before, hits_before = len(llm.requests), len(pages.requests)
    second_id = await scheduled_run(worker_env, temporal_client, schedule, 2)
    second = await result_of(temporal_client, second_id)
    await keep_history(temporal_client.get_workflow_handle(second_id), "rechecked_unchanged")

    assert len(llm.requests) == calls_before and second["usage"]["llm_calls"] == 0  # not one model call
    then, today = first["finished_at"][:10], second["finished_at"][:10]
    report = second["final_report"]
    assert section_of(report).strip() == (
        f"{then}\n\nNothing changed: the 1 source(s) behind the report of {then} say the same on {today}, "
        "and its 4 search(es) found nothing new."  # with the lead the step's page gave
    )
    # the earlier report once, under its own title: one set of key points, one of sources
    assert report.replace(section_of(report), "").replace("## What changed since", "").split() == (
        first["final_report"].split()
    )
    assert report.count("## Key Points") == 1 and report.startswith("# Scripted Report\n")
    assert second["citations"] == first["citations"] and second["observations"]  # findings kept, for `ask`
    asked = [(path, h) for path, h in pages.requests[hits_before:] if path == "/lighthouse"]
    assert len(asked) == 1 and asked[0][1].get("If-None-Match")  # answered 304, nothing read twice
    assert second["recheck"]["changed"] == 0 and second["recheck"]["pages"] == 1

    listed = await polled(
        lambda: asyncio.to_thread(cli, worker_env | {"COLUMNS": "250"}, "schedule", "list"),
        lambda done: second_id in done.stdout,
    )
    assert f"no changes since {then}" in next(line for line in listed.stdout.splitlines() if schedule in line)

    # the next run compares with what the unchanged run kept: the change after it is found
    pages.add("/lighthouse", article(*CHANGED), validators=True)
    third = await result_of(temporal_client, await scheduled_run(worker_env, temporal_client, schedule, 3))
    changes = section_of(third["final_report"])
    assert "**4417 → 5120**" in changes and f"read {second['finished_at'][:10]})" in changes


async def test_a_planner_that_always_has_enough_context_still_gets_the_recheck(
    worker_env, worker, llm, pages, script, temporal_client
):
    """`--continue-from ID --recheck`: the re-check runs before the planner,
    whatever it answers, and the report still lists old and new values."""
    pages.add("/lighthouse", article(*PAGE))  # no validators: compared by the text itself
    started = await asyncio.to_thread(cli, worker_env, "start", QUESTION, "--auto-accept")
    first_id = started.stdout.strip()
    first = await result_of(temporal_client, first_id)
    pages.add("/lighthouse", article(*CHANGED))
    script.enough_context = True  # from now on the planner says it has enough to report
    calls_before = len(llm.requests)
    started = await asyncio.to_thread(
        cli, worker_env, "start", "What is new at Lantern Rock?", "--auto-accept",
        "--continue-from", first_id, "--recheck",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    second = await result_of(temporal_client, started.stdout.strip())
    calls = requests_between(llm, calls_before)
    assert [role_of(c) for c in calls] == ["coordinator", "planner", "reporter"]  # no research: enough context
    assert "5120" in json.dumps(calls[1]) and "4417" in json.dumps(calls[1])  # the planner saw what changed
    assert second["recheck"]["changed"] == 1
    url = pages.url("/lighthouse")
    changes = section_of(second["final_report"])
    assert f"was “{FACT}.” ([Lantern Rock history]({url}), read {first['finished_at'][:10]})" in changes
    assert f"now “{NEW_FACT}.” ([Lantern Rock history]({url}), read" in changes


async def test_a_source_gone_or_moved_is_named(worker_env, worker, llm, pages, tavily, script, temporal_client):
    pages.add("/lighthouse", article(*PAGE))
    pages.add("/keeper", article("The keeper's log", ["The keeper wrote daily.", "More."]))
    tavily.handler = lambda query, n: [
        {"title": "Lantern Rock history", "url": pages.url("/lighthouse"), "content": "A lighthouse.", "score": 0.9},
        {"title": "The keeper's log", "url": pages.url("/keeper"), "content": "A log.", "score": 0.8},
    ]
    started = await asyncio.to_thread(cli, worker_env, "start", QUESTION, "--auto-accept")
    first_id = started.stdout.strip()
    first = await result_of(temporal_client, first_id)
    assert {c["url"] for c in first["citations"]} == {pages.url("/lighthouse"), pages.url("/keeper")}

    pages.add("/lighthouse", "gone", content_type="text/plain", status=410)
    pages.add("/archive/keeper", article("The keeper's log", ["The keeper wrote daily.", "More."]))
    pages.redirect("/keeper", "/archive/keeper", status=301)
    started = await asyncio.to_thread(
        cli, worker_env, "start", QUESTION, "--auto-accept", "--continue-from", first_id, "--recheck"
    )
    second = await result_of(temporal_client, started.stdout.strip())
    changes = section_of(second["final_report"])
    gone, moved = changes.split("**No longer available**", 1)[1], changes.split("**Moved**", 1)[1]
    assert gone.split("\n\n")[1] == f"- [Lantern Rock history]({pages.url('/lighthouse')}): gone (HTTP 410)"
    assert moved.split("\n\n")[1].strip() == (
        f"- [The keeper's log]({pages.url('/keeper')}) now leads to [The keeper's log]({pages.url('/archive/keeper')})"
    )
    # the first run read both pages (its step's evidence), so each has an earlier copy to compare with
    assert "kept no copy" not in changes
    assert second["recheck"]["gone"] == 1 and second["recheck"]["moved"] == 1


async def test_reporter_that_writes_its_own_changes_section_gets_one(
    worker_env, worker, llm, pages, script, temporal_client, schedule
):
    """A model that writes "What changed" itself (and pastes the old key
    points) does not give the report two such sections: the workflow's,
    from its own comparison, replaces the model's."""
    pages.add("/lighthouse", article(*PAGE), validators=True)
    await scheduled_run(worker_env, temporal_client, schedule, 1)
    pages.add("/lighthouse", article(*CHANGED), validators=True)

    def reporter_writes_changes(request: dict):
        if role_of(request) != "reporter":
            return script(request)
        return (
            "# Lantern Rock today\n\n## What changed since last time\n- Nothing at all changed.\n\n"
            f"## Key Points\n- {NEW_FACT}.\n\n## Key Citations\n- [Lantern Rock history]({pages.url('/lighthouse')})\n"
        )

    llm.handler = reporter_writes_changes
    second = await result_of(temporal_client, await scheduled_run(worker_env, temporal_client, schedule, 2))
    report = second["final_report"]
    assert report.startswith("# Lantern Rock today\n\n## What changed since")
    assert "Nothing at all changed" not in report and "**4417 → 5120**" in section_of(report)
    assert report.count("## Key Points") == 1  # one set of key points
