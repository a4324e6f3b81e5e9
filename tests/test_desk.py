"""The research desk in a real browser: Debian's Chromium driven by
Playwright, the desk as `deepresearch ui` in its own process, a real dev
server and worker, the scripted model and search servers.

Run locally: `./dr test tests/test_desk.py` (needs `chromium`: `.ci/run`
installs Debian's package when it is missing; set CHROMIUM to use another).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from pptx import Presentation

from client.devserver import free_port  # outside the ports the dev server picks for itself
from client.wording import usage_text
from testkit.crash import Gate
from testkit.faults import blobs_deleted_at_first_crawl
from testkit.research_script import FACT
from testkit.worker_process import WorkerProcess
from workflows.models import Usage

playwright_api = pytest.importorskip("playwright.async_api")
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    if os.environ.get("CI"):
        raise RuntimeError("Chromium is missing: .ci/run installs Debian's chromium package")
    pytest.skip("no Chromium on this machine (apt install chromium)", allow_module_level=True)

CLI = Path(sys.executable).parent / "deepresearch"
QUESTION = "Tell me about Lantern Rock"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT = 60_000  # ms


@pytest.fixture
async def worker(research_worker):
    """A worker that keeps its workflows, as a deployed one does: with none
    kept, the SDK now and then leaves a workflow task unanswered until its
    10 s timeout (seen after a review's accept: the page waited for
    "step_started" past ``WAIT`` on a loaded CI machine). Replay stays
    checked by the recorded histories and every other end-to-end test."""
    async with research_worker(cached=True) as worker:
        yield worker


@pytest.fixture
def desk(worker_env, tmp_path):
    """`deepresearch ui` on a free port; yields its base URL."""
    port = free_port()
    log = open(tmp_path / "desk.log", "wb")
    proc = subprocess.Popen([str(CLI), "ui", "--port", str(port)], env=worker_env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(base + "/api/health", timeout=1)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp_path / "desk.log").read_text()) from None
            time.sleep(0.1)
    yield base
    proc.terminate()
    proc.wait(10)
    log.close()


@pytest.fixture
async def browser():
    async with playwright_api.async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield chromium
        await chromium.close()


@pytest.fixture
async def page(browser, tmp_path):
    context = await browser.new_context(accept_downloads=True)
    page = await context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    page.dialogs = dialogs  # type: ignore[attr-defined]
    yield page
    await context.close()


async def phase_is(page, phase: str, timeout: int = WAIT) -> None:
    await playwright_api.expect(page.get_by_test_id("phase")).to_have_text(phase, timeout=timeout)


async def start_from_page(page, desk: str, question: str = QUESTION, *, clarify: bool = False) -> str:
    await page.goto(desk)
    await page.get_by_test_id("question-input").fill(question)
    if clarify:
        await page.locator("summary").click()
        await page.locator("#clarify").check()
    await page.get_by_test_id("start-button").click()
    await page.wait_for_url("**/runs/*")
    return page.url.rsplit("/", 1)[1]


async def test_start_edit_accept_and_read_the_report(page, desk, worker, script, tmp_path):
    run_id = await start_from_page(page, desk)
    await phase_is(page, "awaiting_review")
    steps = page.get_by_test_id("plan-step")
    await playwright_api.expect(steps).to_have_count(2)
    # The run is listed, with its id.
    await playwright_api.expect(page.locator(f'[data-testid="run-row"][data-run-id="{run_id}"]')).to_be_visible()

    await page.get_by_test_id("edit-input").fill("add a step on shipwrecks")
    await page.get_by_test_id("edit-button").click()
    await playwright_api.expect(steps).to_have_count(3, timeout=WAIT)  # the planner revised the plan
    await playwright_api.expect(steps.nth(1)).to_contain_text("Edited: add a step on shipwrecks")
    await phase_is(page, "awaiting_review")

    await page.get_by_test_id("accept-button").click()
    await playwright_api.expect(page.get_by_test_id("progress")).to_contain_text("step_started", timeout=WAIT)
    await phase_is(page, "completed")
    await playwright_api.expect(page.get_by_test_id("accept-button")).to_be_hidden()
    report = page.get_by_test_id("report")
    await playwright_api.expect(report).to_contain_text(FACT)
    link = report.locator('a[href^="http://127.0.0.1"]').first
    await playwright_api.expect(link).to_be_visible()
    assert await link.get_attribute("rel") == "noopener noreferrer"
    # How a statement is supported: on hover (its title) and, clicked, below the report.
    traced = report.locator('[data-testid="statement"][data-support="stated"]').first
    assert "Stated by a source" in (await traced.get_attribute("title") or "")
    await traced.click()
    detail = page.get_by_test_id("statement-detail")
    await playwright_api.expect(detail).to_contain_text("Stated by a source")
    await playwright_api.expect(detail).to_contain_text("http://127.0.0.1")
    progress = await page.get_by_test_id("progress").inner_text()
    assert "review_received" in progress and "step_finished" in progress
    # The costs read as the terminal words them ("1 search", not "1 searches").
    reply = await page.request.get(f"{desk}/api/runs/{run_id}")
    shown = (await reply.json())["result"]
    usage = Usage(**shown["usage"])
    assert shown["sources"] == 1  # the page it read and cited
    await playwright_api.expect(page.locator("#usage")).to_have_text(
        f"completed · sources cited: 1 · {usage_text(usage)}"
    )

    async with page.expect_download() as download:
        await page.get_by_test_id("download-md").click()
    path = tmp_path / "report.md"
    await (await download.value).save_as(path)
    assert FACT in path.read_text()


async def test_a_running_run_is_steered_from_the_page(page, desk, worker, script, llm):
    gate = Gate(script, "researcher", 2)  # the first step's second turn, held
    llm.handler = gate
    await page.goto(desk)
    await page.get_by_test_id("question-input").fill(QUESTION)
    await page.locator("summary").click()
    await page.locator("#auto-accept").check()
    await page.get_by_test_id("start-button").click()
    await gate.wait_reached()
    await phase_is(page, "researching")
    await page.get_by_test_id("steer-input").fill("only EU sources")
    await page.get_by_test_id("steer-button").click()
    steer = page.get_by_test_id("steer")
    await playwright_api.expect(steer).to_contain_text("waiting for the next safe point", timeout=WAIT)
    await playwright_api.expect(page.locator("#notice")).to_contain_text("steer 1 taken")
    gate.release()
    await phase_is(page, "completed")
    await playwright_api.expect(steer).to_contain_text("applied", timeout=WAIT)
    await playwright_api.expect(steer).to_contain_text("researcher · step 1, turn 3")
    await playwright_api.expect(page.get_by_test_id("steer-input")).to_be_hidden()
    await playwright_api.expect(page.get_by_test_id("report")).to_contain_text("Guidance received during the research")
    assert "steer_applied" in await page.get_by_test_id("progress").inner_text()
    # Once the run has ended, a steer is refused with one line that says what to do instead.
    late = await page.evaluate(
        """async (id) => {
            const r = await fetch(`/api/runs/${id}/steer`, {method: "POST",
                headers: {"Content-Type": "application/json"}, body: JSON.stringify({note: "too late"})});
            return [r.status, (await r.json()).error];
        }""",
        page.url.rsplit("/", 1)[1],
    )
    assert late[0] == 409 and "ask a follow-up question" in late[1]


async def test_a_clarifying_question_is_answered_on_the_page(page, desk, worker, script):
    script.clarify_rounds = 1
    await start_from_page(page, desk, clarify=True)
    await phase_is(page, "clarifying")
    await playwright_api.expect(page.locator("#pending-question")).to_contain_text("Clarifying question 1")
    await page.get_by_test_id("answer-input").fill("Only the 1911 logbook")
    await page.get_by_test_id("answer-button").click()
    await phase_is(page, "awaiting_review")
    await page.get_by_test_id("accept-button").click()
    await phase_is(page, "completed")


async def test_a_reload_mid_run_shows_every_event_so_far(page, desk, worker, script):
    run_id = await start_from_page(page, desk)
    await phase_is(page, "awaiting_review")
    # events are read once a second (client/follow.py): the phase can show first
    await playwright_api.expect(page.get_by_test_id("progress")).to_contain_text("review_requested", timeout=WAIT)
    progress = page.get_by_test_id("progress").locator("li")
    before = await progress.all_inner_texts()
    await page.goto(f"{desk}/runs/{run_id}")  # opened late: everything since the start
    # the run goes on while its plan waits (evidence gathered ahead: a crawl may come after `before`)
    await playwright_api.expect(progress.nth(len(before) - 1)).to_be_attached(timeout=WAIT)
    assert (await progress.all_inner_texts())[: len(before)] == before


async def test_the_page_follows_a_run_through_a_worker_crash(
    page, desk, worker_env, temporal_client, script, llm, tmp_path
):
    gate = Gate(script, "researcher")  # holds the first researcher call until released
    llm.handler = gate
    with WorkerProcess(worker_env, tmp_path / "worker.log") as process:
        await process.ready(temporal_client)
        await start_from_page(page, desk)
        await phase_is(page, "awaiting_review")
        await page.get_by_test_id("accept-button").click()
        await phase_is(page, "researching")
        await gate.wait_reached()
        process.kill()
        gate.release()
        process.start()
        await process.ready(temporal_client)
        await phase_is(page, "completed", timeout=120_000)  # the same page, no reload
    await playwright_api.expect(page.get_by_test_id("report")).to_contain_text(FACT)


async def test_a_failed_run_shows_what_it_found_before_it_failed(page, desk, worker_env, worker, script):
    """The partial report of a failed run (here a crawled page's blob deleted
    mid-run) is on the page under "Partial report", with the reason; nothing
    to download or ask about."""
    data = Path(worker_env["DEEPRESEARCH_DATA_DIR"])
    blobs_deleted_at_first_crawl(script, data)
    await start_from_page(page, desk)
    await phase_is(page, "awaiting_review")
    await page.get_by_test_id("accept-button").click()
    await playwright_api.expect(page.locator("#run-problem")).to_contain_text("is missing", timeout=WAIT)
    await playwright_api.expect(page.locator("#report-heading")).to_have_text("Partial report", timeout=WAIT)
    await playwright_api.expect(page.get_by_test_id("report")).to_contain_text("Scripted Report")
    await playwright_api.expect(page.get_by_test_id("download-md")).to_be_hidden()
    await playwright_api.expect(page.get_by_test_id("ask-input")).to_be_hidden()


async def test_a_run_waiting_on_the_providers_rate_limit_says_so(page, desk, worker, script, llm):
    """The coordinator's first call is refused (429, Retry-After: 8): the page
    says the run waits on the provider's limit, then, once served, no longer."""
    llm.fail_next(1, 429, retry_after=8)
    await start_from_page(page, desk, "Hello there!")
    waiting = page.get_by_test_id("rate-limited")
    await playwright_api.expect(waiting).to_contain_text("waiting on the model provider's rate limit", timeout=WAIT)
    await phase_is(page, "completed")
    await playwright_api.expect(waiting).to_be_hidden(timeout=WAIT)
    await playwright_api.expect(page.locator("#usage")).to_contain_text("1 wait on the provider's rate limit")


async def test_slides_made_on_the_page_appear_when_done_without_a_reload(page, desk, worker, script, llm, tmp_path):
    gate = Gate(script, "slides")  # holds the slides model's call until released
    llm.handler = gate
    await start_from_page(page, desk)
    await phase_is(page, "awaiting_review")
    await page.get_by_test_id("accept-button").click()
    await phase_is(page, "completed")
    await playwright_api.expect(page.get_by_test_id("report")).to_contain_text(FACT, timeout=WAIT)
    make, download = page.locator("#make-slides"), page.get_by_test_id("download-pptx")
    await playwright_api.expect(download).to_be_hidden()
    await make.click()
    await gate.wait_reached()
    await playwright_api.expect(make).to_have_text("making slides…")  # being made: said, and not asked twice
    await playwright_api.expect(make).to_be_disabled()
    gate.release()
    await playwright_api.expect(download).to_be_visible(timeout=WAIT)  # the same page, no reload
    await playwright_api.expect(make).to_be_hidden()
    async with page.expect_download() as downloaded:
        await download.click()
    path = tmp_path / "deck.pptx"
    await (await downloaded.value).save_as(path)
    deck = Presentation(str(path))
    text = " ".join(shape.text_frame.text for slide in deck.slides for shape in slide.shapes if shape.has_text_frame)
    assert FACT in text


async def test_bad_input_gets_one_clear_message(page, desk, worker, script, llm):
    gate = llm.handler = Gate(script, "researcher")  # the run stays in `researching` until released
    await page.goto(desk)
    await page.get_by_test_id("start-button").click()
    await playwright_api.expect(page.locator("#notice")).to_have_text(
        "the question is empty: type what you want researched"
    )

    await page.goto(f"{desk}/runs/no-such-run")
    await playwright_api.expect(page.locator("#notice")).to_have_text("there is no run with id 'no-such-run'")

    run_id = await start_from_page(page, desk)
    await phase_is(page, "awaiting_review")
    await page.get_by_test_id("accept-button").click()
    await phase_is(page, "researching")
    # A review when none is pending: the update's reason, one line.
    answer = await page.evaluate(
        """async (id) => {
            const r = await fetch(`/api/runs/${id}/review`, {method: "POST",
                headers: {"Content-Type": "application/json"}, body: JSON.stringify({feedback: "[ACCEPTED]"})});
            return [r.status, (await r.json()).error];
        }""",
        run_id,
    )
    assert answer[0] == 409 and answer[1].startswith("no plan is waiting for review")
    gate.release()


async def test_no_run_input_can_inject_script(page, desk, worker, script):
    hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    script.report_extra = "\n<script>alert(3)</script> [click](javascript:alert(4))"
    await start_from_page(page, desk, question=f"{QUESTION} {hostile}")
    await phase_is(page, "awaiting_review")
    await page.get_by_test_id("accept-button").click()
    await phase_is(page, "completed")
    await playwright_api.expect(page.get_by_test_id("report")).to_contain_text("<script>alert(3)</script>")
    assert await page.locator("#report script, #report img, #report a[href^='javascript']").count() == 0
    assert page.dialogs == []


def test_the_desk_refuses_other_addresses_without_a_token(worker_env):
    env = {k: v for k, v in worker_env.items() if k != "DEEPRESEARCH_UI_TOKEN"}
    done = subprocess.run([str(CLI), "ui", "--host", "0.0.0.0", "--port", "0"], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "set DEEPRESEARCH_UI_TOKEN" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


async def test_with_a_token_every_request_needs_it(worker_env, tmp_path):
    port = free_port()
    env = worker_env | {"DEEPRESEARCH_UI_TOKEN": "s3cret"}
    proc = subprocess.Popen(
        [str(CLI), "ui", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{base}/api/health?token=s3cret", timeout=1)
                break
            except OSError:
                await asyncio.sleep(0.1)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/api/runs", timeout=5)
        assert refused.value.code == 401
        ok = urllib.request.urlopen(
            urllib.request.Request(f"{base}/api/runs", headers={"Authorization": "Bearer s3cret"})
        )
        assert ok.status == 200
    finally:
        proc.terminate()
        proc.wait(10)


async def test_a_run_whose_reporter_failed_shows_its_findings_and_says_so(page, desk, worker, script):
    """The reporter fails once the research is done: the page shows the
    report built from the findings, and the warning that says why."""
    from testkit.llm_server import Reply

    script.reporter = lambda request: Reply(status=400, content="this model cannot write reports")
    await start_from_page(page, desk)
    await phase_is(page, "awaiting_review")
    await page.get_by_test_id("accept-button").click()
    await phase_is(page, "completed")
    report = page.get_by_test_id("report")
    await playwright_api.expect(report).to_contain_text("the reporter failed", timeout=WAIT)
    await playwright_api.expect(report).to_contain_text(FACT)
    warnings = page.get_by_test_id("report-warnings")
    await playwright_api.expect(warnings).to_be_visible()
    await playwright_api.expect(warnings).to_contain_text("this model cannot write reports")
