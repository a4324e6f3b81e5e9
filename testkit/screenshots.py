"""Screenshots for the docs, taken in headless Chromium against a real run on
the scripted servers:

    python -m testkit.screenshots docs/images

- ``desk.png``: the research desk showing a finished run's plan and report;
- ``temporal-ui.png``: the run's event history in the Temporal UI (compact
  view), whose summaries name each activity (``researcher · step 1 · web_search: …``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from client.devserver import DevServer, free_port
from infra.connection import Connection
from infra.settings import Settings
from infra.temporal import connect
from testkit.crash import worker_env
from testkit.llm_server import ScriptedLLM
from testkit.pages import PageServer, article
from testkit.research_script import FACT, ResearchScript
from testkit.runs import start
from testkit.search_server import ScriptedTavily
from worker import build_worker

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


async def take(out: Path) -> None:
    from playwright.async_api import async_playwright

    out.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="shots-"))
    data = folder / "data"
    data.mkdir()
    with (
        DevServer(db_file=folder / "temporal.db", ui_port=free_port(), log_file=folder / "server.log") as server,
        ScriptedLLM() as llm,
        ScriptedTavily() as tavily,
        PageServer() as pages,
    ):
        pages.add("/lighthouse", article("Lantern Rock history", ["Some history first.", FACT + ".", "More."]))
        llm.handler = ResearchScript()
        tavily.handler = lambda q, n: [
            {"title": "Lantern Rock history", "url": pages.url("/lighthouse"), "content": "A lighthouse."}
        ]
        env = worker_env(
            dict(os.environ), llm=llm, tavily=tavily, data_dir=data, address=server.address, task_queue="shots"
        )
        client = await connect(Connection(address=server.address, data_dir=data, task_queue="shots"))
        worker, held = build_worker(client, Settings.from_env(env), "shots")
        port = free_port()
        desk = subprocess.Popen(
            [str(Path(sys.executable).parent / "deepresearch"), "ui", "--port", str(port)],
            env=env | {"DEEPRESEARCH_TEMPORAL_UI_URL": server.ui_url},
        )
        try:
            async with worker:
                handle = await start(
                    client, "shots", "How busy was the Lantern Rock lighthouse in 1911?", auto_accept_plan=True
                )
                await handle.result()
                for _ in range(100):
                    try:
                        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1)
                        break
                    except OSError:
                        time.sleep(0.1)
                chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
                async with async_playwright() as p:
                    browser = await p.chromium.launch(executable_path=chromium, args=FLAGS)
                    page = await browser.new_page(viewport={"width": 1280, "height": 900})
                    await page.goto(f"http://127.0.0.1:{port}/runs/{handle.id}")
                    await page.get_by_test_id("report").wait_for()
                    await page.wait_for_timeout(500)
                    await page.screenshot(path=out / "desk.png", full_page=False)
                    # The event history, compact: one row per activity with its summary.
                    await page.set_viewport_size({"width": 1600, "height": 900})
                    await page.goto(f"{server.ui_url}/namespaces/default/workflows/{handle.id}")
                    await page.get_by_text("researcher · step 1").first.wait_for(timeout=30_000)
                    await page.get_by_text("Event History").first.click()
                    await page.get_by_text("Compact", exact=True).first.click()
                    heading = page.get_by_role("heading", name="Event History")
                    await heading.evaluate("e => e.scrollIntoView({block: 'start'})")
                    await page.wait_for_timeout(1000)
                    await page.screenshot(path=out / "temporal-ui.png", full_page=False)
                    await browser.close()
        finally:
            desk.terminate()
            desk.wait(10)
            await held.close_all()
    print(f"wrote {out / 'desk.png'} and {out / 'temporal-ui.png'}")


if __name__ == "__main__":
    asyncio.run(take(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images")))
