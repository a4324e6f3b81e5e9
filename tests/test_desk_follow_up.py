"""The desk's question box under the report, and its downloads of PDF and
Word, in a real browser (Debian's chromium driven by Playwright)."""

from __future__ import annotations

import asyncio
import subprocess
import time

from playwright import async_api as playwright_api

from testkit.research_script import FACT

from .test_desk import CLI, WAIT, browser, desk, page, phase_is  # noqa: F401 - fixtures and helpers


async def test_a_follow_up_question_is_answered_under_the_report(page, desk, worker, script, tmp_path):  # noqa: F811
    await page.goto(desk)
    await page.get_by_test_id("question-input").fill("Tell me about Lantern Rock")
    await page.locator("summary").click()
    await page.locator("#auto-accept").check()
    await page.get_by_test_id("start-button").click()
    await page.wait_for_url("**/runs/*")
    await phase_is(page, "completed")
    await playwright_api.expect(page.get_by_test_id("report")).to_contain_text(FACT, timeout=WAIT)

    await page.get_by_test_id("ask-input").fill("How many ships did the keeper log?")
    await page.get_by_test_id("ask-button").click()
    answer = page.get_by_test_id("ask-answer")
    await playwright_api.expect(answer).to_contain_text("4417 ships", timeout=WAIT)
    link = answer.locator('a[href^="http://127.0.0.1"]').first
    await playwright_api.expect(link).to_be_visible()  # the answer's source, as a link
    assert await link.get_attribute("rel") == "noopener noreferrer"

    for fmt, magic in (("pdf", b"%PDF"), ("docx", b"PK")):
        async with page.expect_download() as download:
            await page.get_by_test_id(f"download-{fmt}").click()
        path = tmp_path / f"report.{fmt}"
        await (await download.value).save_as(path)
        assert path.read_bytes().startswith(magic)


async def test_the_desk_lists_schedules(page, desk, worker_env):  # noqa: F811
    name = f"desk-watch-{time.time_ns() % 10**8}"
    created = await asyncio.to_thread(
        subprocess.run, [str(CLI), "schedule", "create", name, "Tell me about Lantern Rock", "--every", "1w"],
        env=worker_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    try:
        await asyncio.to_thread(subprocess.run, [str(CLI), "schedule", "pause", name], env=worker_env, timeout=60)
        await page.goto(desk)
        row = page.get_by_test_id("schedule-list").locator("li", has_text=name)
        await playwright_api.expect(row).to_contain_text("every 1w · paused · 0 run(s)", timeout=WAIT)
    finally:
        await asyncio.to_thread(subprocess.run, [str(CLI), "schedule", "delete", name], env=worker_env, timeout=60)


async def test_ui_demo_researches_and_answers_follow_ups_with_no_key(page, dev_server, tmp_path):  # noqa: F811
    """Issue 27, item 8: the desk needed a worker, which needed a key. `ui --demo`
    brings the demo's worker (scripted model, offline web) and says so on the page."""
    import os
    import urllib.request
    import uuid

    from .test_desk import free_port

    port = free_port()
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep} | {
        "DEEPRESEARCH_DATA_DIR": str(tmp_path / "data"),
        "TEMPORAL_ADDRESS": dev_server.address,
    }
    queue = f"demo-desk-{uuid.uuid4().hex[:8]}"  # its own queue: no other test's worker takes its runs
    log = open(tmp_path / "desk.log", "wb")
    proc = subprocess.Popen(
        [str(CLI), "ui", "--demo", "--port", str(port), "--task-queue", queue], env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/api/health", timeout=1)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "desk.log").read_text()
                await asyncio.sleep(0.2)
        await page.goto(base)
        await playwright_api.expect(page.get_by_test_id("demo-note")).to_contain_text("DEMO: the model is scripted")
        await page.get_by_test_id("question-input").fill("Who designed the Greyhorn Light?")
        await page.locator("summary").click()
        await page.locator("#auto-accept").check()
        await page.get_by_test_id("start-button").click()
        await page.wait_for_url("**/runs/*")
        await playwright_api.expect(page.get_by_test_id("report")).to_contain_text("Caspar Lund", timeout=WAIT)
        await page.get_by_test_id("ask-input").fill("When was the Greyhorn Light first lit?")
        await page.get_by_test_id("ask-button").click()
        await playwright_api.expect(page.get_by_test_id("ask-answer")).to_contain_text("1871", timeout=WAIT)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
