"""The podcast, slides and prose agents, end to end: the real CLI, a real
worker and dev server, the scripted model and a scripted speech server that
answers with real audio clips."""

from __future__ import annotations

import asyncio
import json
import math
import sys
import threading
import time
from pathlib import Path

import pytest
from pptx import Presentation
from pptx.util import Emu

from activities import audio
from testkit.research_script import FACT
from testkit.runs import start
from testkit.speech_server import SECONDS_PER_CHAR, ScriptedSpeech
from testkit.worker_process import WorkerProcess
from workflows.models import PodcastResult, SourceReport

CLI = Path(sys.executable).parent / "deepresearch"
QUESTION = "Tell me about Lantern Rock"


async def cli(env: dict, *args: str, timeout: float = 120) -> tuple[int, str, str]:
    """The real `deepresearch` CLI, without blocking the in-process worker."""
    proc = await asyncio.create_subprocess_exec(
        str(CLI), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
def speech():
    with ScriptedSpeech() as server:
        yield server


@pytest.fixture
async def side_worker(research_worker, speech):
    async with research_worker(DEEPRESEARCH_TTS_BASE_URL=speech.base_url, DEEPRESEARCH_TTS_VOICES="nova,echo") as w:
        yield w


@pytest.fixture
async def finished_run(temporal_client, task_queue, side_worker, script) -> str:
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    assert result.status == "completed" and FACT in result.final_report
    return handle.id


async def test_podcast_speaks_every_line_and_joins_them_into_one_file(finished_run, worker_env, speech, llm, tmp_path):
    code, out, err = await cli(worker_env, "podcast", finished_run, "--json", "-o", str(tmp_path / "show.mp3"))
    assert code == 0, err
    shown = json.loads(out)
    assert shown["workflow_id"] == f"{finished_run}-podcast" and shown["status"] == "completed"
    script = shown["script"]
    assert script[0]["speaker"] == "female" and any(FACT in line["text"] for line in script)
    assert all(set(line) == {"speaker", "text"} for line in script)

    # One speech call per line; the long line was split at sentence ends.
    spoken = [r["input"] for r in speech.requests]
    assert all(0 < len(text) <= 4000 for text in spoken) and len(spoken) > len(script)
    assert "".join(spoken).replace(" ", "") == "".join(line["text"] for line in script).replace(" ", "")
    voices = {r["voice"] for r in speech.requests}
    assert voices == {"nova", "echo"}  # the two hosts, from DEEPRESEARCH_TTS_VOICES

    # The joined file plays: its frames parse and it lasts as long as the clips together.
    data = Path(shown["file"]).read_bytes()
    described = audio.describe(data)
    expected = sum(len(text) * SECONDS_PER_CHAR for text in spoken)
    assert described.format == "mp3" and math.isclose(described.seconds, expected, rel_tol=0.02, abs_tol=0.5)
    assert shown["usage"]["speech_calls"] == len(spoken) and shown["usage"]["llm_calls"] == 1

    # Asking again gives the same podcast: no new model or speech call.
    calls = len(speech.requests), len(llm.calls("podcast"))
    code, out, err = await cli(worker_env, "podcast", finished_run, "-o", str(tmp_path / "again.mp3"))
    assert code == 0, err and "podcast saved to" in out
    assert (len(speech.requests), len(llm.calls("podcast"))) == calls
    assert (tmp_path / "again.mp3").read_bytes() == data

    # `result` fetches it again, days later.
    code, out, err = await cli(worker_env, "result", f"{finished_run}-podcast", "-o", str(tmp_path / "later.mp3"))
    assert code == 0, err and (tmp_path / "later.mp3").read_bytes() == data


async def test_a_wav_speech_server_gives_a_wav_podcast(finished_run, worker_env, speech, tmp_path):
    speech.audio_format = "wav"
    code, out, err = await cli(worker_env, "podcast", finished_run)
    assert code == 0, err
    path = Path(out.split("podcast saved to ")[1].split(" (")[0])
    assert path.suffix == ".wav" and path.parent == Path(worker_env["DEEPRESEARCH_DATA_DIR"]) / "reports"
    expected = sum(len(r["input"]) * SECONDS_PER_CHAR for r in speech.requests)
    assert math.isclose(audio.describe(path.read_bytes()).seconds, expected, rel_tol=0.02)


async def test_a_speech_endpoint_that_rejects_the_key_fails_in_one_line(finished_run, worker_env, speech):
    speech.api_key = "another-key"
    code, out, err = await cli(worker_env, "podcast", finished_run, timeout=60)
    texts = [r["input"] for r in speech.requests]
    assert code == 1 and 1 <= len(texts) <= 4 and len(set(texts)) == len(texts)  # the first calls, none retried
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "speech endpoint rejected the API key (HTTP 401)" in err and "OPENAI_API_KEY" in err


def overflowing(shape, font_pt_default: float = 18) -> bool:
    """Whether the text of a box needs more lines than it has room for, by
    characters per line (0.5 em a character) and 1.2 lines of height per line."""
    if not shape.has_text_frame:
        return False
    width_pt, height_pt = Emu(shape.width).pt, Emu(shape.height).pt
    lines = 0.0
    for paragraph in shape.text_frame.paragraphs:
        size = next((r.font.size.pt for r in paragraph.runs if r.font.size), font_pt_default)
        text = "".join(r.text for r in paragraph.runs)
        per_line = max(int(width_pt / (size * 0.5)), 1)
        lines += max(math.ceil(len(text) / per_line), 1) * size * 1.2
    return lines > height_pt + 1


async def test_slides_build_a_deck_with_sections_tables_notes_and_sources(finished_run, worker_env, tmp_path):
    code, out, err = await cli(worker_env, "slides", finished_run, "--json", "-o", str(tmp_path / "deck.pptx"))
    assert code == 0, err
    shown = json.loads(out)
    assert shown["workflow_id"] == f"{finished_run}-slides" and shown["format"] == "pptx"
    deck = Presentation(shown["file"])
    slides = list(deck.slides)
    assert len(slides) == shown["slides"]
    texts = [[s.text_frame.text for s in slide.shapes if s.has_text_frame] for slide in slides]
    assert texts[0][0]  # the title slide
    titles = [t[0] for t in texts[1:]]
    assert titles[:2] == ["Key findings", "In numbers"] and titles[2].startswith("Details")
    assert any(FACT in " ".join(t) for t in texts)
    # The table is a table; notes are notes.
    tables = [s for slide in slides for s in slide.shapes if s.has_table]
    assert tables and tables[0].table.cell(1, 1).text == "4417"
    assert slides[1].notes_slide.notes_text_frame.text == "Start with the facts."
    # The long details slide went on to a second slide rather than overflow.
    assert "Details (cont.)" in titles
    # The sources slide links the run's citations.
    sources = [slide for slide in slides if texts[slides.index(slide)][0].startswith("Sources")]
    links = [
        r.hyperlink.address
        for s in sources
        for sh in s.shapes
        if sh.has_text_frame
        for p in sh.text_frame.paragraphs
        for r in p.runs
        if r.hyperlink.address
    ]
    assert links and all(link.startswith("http://127.0.0.1:") for link in links)
    # No text box overflows its slide.
    width, height = deck.slide_width, deck.slide_height
    for slide in slides:
        for shape in slide.shapes:
            assert shape.left + shape.width <= width and shape.top + shape.height <= height
            assert not overflowing(shape), shape.text_frame.text[:80]

    code, out, err = await cli(worker_env, "slides", finished_run, "--format", "md", "-o", str(tmp_path / "deck.md"))
    assert code == 0, err
    assert (tmp_path / "deck.md").read_text().count("\n---") >= 3


@pytest.mark.parametrize("option", ["continue", "improve", "shorter", "longer", "fix", "zap"])
async def test_each_prose_option_returns_text(option, worker_env, side_worker):
    extra = ["--command", "make it a haiku"] if option == "zap" else []
    code, out, err = await cli(worker_env, "prose", "--option", option, "The lighthouse stood.", *extra)
    assert code == 0, err
    instruction = {"continue": "Continue", "improve": "Improve", "shorter": "Make", "longer": "Make", "fix": "Fix"}
    assert out.startswith(f"[{instruction.get(option, 'You')}]") and "The lighthouse stood." in out
    if option == "zap":
        assert "make it a haiku" in out


async def test_prose_on_a_runs_report(finished_run, worker_env):
    code, out, err = await cli(worker_env, "prose", "--option", "shorter", "--run", finished_run, "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "completed" and FACT in json.loads(out)["text"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["podcast", "no-such-run"], "no run with id no-such-run"),
        (["slides", "no-such-run"], "no run with id no-such-run"),
        (["prose", "--option", "zap", "text"], "--option zap needs --command"),
        (["prose", "--option", "fix"], "give the text to rewrite, or --run ID"),
        (["prose", "--option", "fix", "text", "--run", "x"], "give the text to rewrite, or --run ID"),
        (["prose", "--option", "fix", "   "], "invalid prose request: Value error, the text is empty"),
        (["prose", "--option", "nonsense", "text"], "invalid choice: 'nonsense'"),
    ],
)
async def test_bad_input_gets_one_line(args, message, worker_env, side_worker):
    code, out, err = await cli(worker_env, *args, timeout=60)
    assert code != 0 and message in err and len(err.strip().splitlines()) == 1, err


async def test_a_run_that_has_not_completed_is_refused(temporal_client, task_queue, worker_env, side_worker):
    handle = await start(temporal_client, task_queue, QUESTION)  # waits for review
    code, out, err = await cli(worker_env, "podcast", handle.id, timeout=60)
    assert code == 1 and f"run {handle.id} has not completed" in err and len(err.strip().splitlines()) == 1
    await handle.cancel()


async def test_a_podcast_whose_worker_is_killed_mid_speech_resumes_without_repeating_a_clip(
    temporal_client, task_queue, worker_env, script, speech, tmp_path
):
    """The real worker as a process, SIGKILLed while the seventh line is being
    spoken; a new worker finishes the podcast. No clip that was delivered
    before the kill is asked for again, and the file is whole."""
    env = worker_env | {"DEEPRESEARCH_TTS_BASE_URL": speech.base_url}
    arrived, release, answered = threading.Event(), threading.Event(), []

    def hold(body):
        if len(speech.requests) == 7 and not release.is_set():
            arrived.set()
            release.wait(30)  # the worker dies meanwhile: this answer goes nowhere
        answered.append((body["input"], time.time()))

    speech.hold = hold
    with WorkerProcess(env, tmp_path / "worker.log") as process:
        await process.ready(temporal_client)
        run = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
        result = await run.result()
        source = SourceReport(run_id=run.id, title="Lantern Rock", report=result.final_report)
        handle = await temporal_client.start_workflow(
            "Podcast", source, id=f"{run.id}-podcast", task_queue=task_queue, result_type=PodcastResult
        )
        await asyncio.to_thread(arrived.wait, 60)
        killed_at = time.time()
        process.kill()
        release.set()
        process.start()
        await process.ready(temporal_client)
        podcast = await asyncio.wait_for(handle.result(), 120)
    delivered_before = {text for text, at in answered if at < killed_at}
    asked = [r["input"] for r in speech.requests]
    repeated = [text for text in delivered_before if asked.count(text) > 1]
    assert not repeated, repeated
    # Every part spoken; the joined file lasts as long as the parts.
    parts = set(asked)
    expected = sum(len(text) * SECONDS_PER_CHAR for text in parts)
    data = (
        await __import__("infra.blobs", fromlist=["blob_store"])
        .blob_store(Path(worker_env["DEEPRESEARCH_DATA_DIR"]))
        .get_bytes(podcast.audio.blob)
    )
    assert math.isclose(audio.describe(data).seconds, expected, rel_tol=0.02)
    assert podcast.usage.speech_calls == len(parts)
