"""The podcast, slides and prose agents, end to end: the real CLI, a real
worker and dev server, the scripted model and a scripted speech server that
answers with real audio clips."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import sys
import threading
import time
from pathlib import Path

import pytest
from pptx import Presentation
from pptx.util import Emu
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from activities import audio
from infra.blobs import blob_store
from testkit.crash import activities
from testkit.research_script import FACT
from testkit.runs import keep_history, start
from testkit.speech_server import SECONDS_PER_CHAR, ScriptedSpeech
from testkit.worker_process import WorkerProcess
from workflows.side_models import PodcastResult, SideStatus, SourceReport

CLI = Path(sys.executable).parent / "deepresearch"
QUESTION = "Tell me about Lantern Rock"


async def cli(env: dict, *args: str, timeout: float = 120) -> tuple[int, str, str]:
    """The real `deepresearch` CLI, without blocking the in-process worker."""
    proc = await asyncio.create_subprocess_exec(
        str(CLI), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode, out.decode(), err.decode()


def in_script_order(spoken: list[str], lines: list[str]) -> bool:
    """Whether the speech calls, which arrive in any order since several run at
    once, put together give every script line whole and nothing more: each
    line is rebuilt from its start out of the pieces not used yet."""
    left = [piece.replace(" ", "") for piece in spoken]
    for line in lines:
        rest = line.replace(" ", "")
        while rest:
            fits = [piece for piece in left if piece and rest.startswith(piece)]
            if not fits:
                return False
            piece = max(fits, key=len)
            left.remove(piece)
            rest = rest[len(piece) :]
    return not left


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


async def test_podcast_speaks_every_line_and_joins_them_into_one_file(
    finished_run, worker_env, speech, llm, temporal_client, tmp_path
):
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
    assert in_script_order(spoken, [line["text"] for line in script])  # every line, all of it, nothing else
    voices = {r["voice"] for r in speech.requests}
    assert voices == {"nova", "echo"}  # the two hosts, from DEEPRESEARCH_TTS_VOICES

    # The joined file plays: its frames parse and it lasts as long as the clips together.
    data = Path(shown["file"]).read_bytes()
    described = audio.describe(data)
    expected = sum(len(text) * SECONDS_PER_CHAR for text in spoken)
    assert described.format == "mp3" and math.isclose(described.seconds, expected, rel_tol=0.02, abs_tol=0.5)
    assert shown["usage"]["speech_calls"] == len(spoken) and shown["usage"]["llm_calls"] == 1

    # Asking again gives the same podcast: the same workflow, no new model or speech call.
    calls = len(speech.requests), len(llm.calls("podcast"))
    first = (await temporal_client.get_workflow_handle(shown["workflow_id"]).describe()).run_id
    code, out, err = await cli(worker_env, "podcast", finished_run, "-o", str(tmp_path / "again.mp3"))
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"podcast {finished_run}-podcast: ")  # the same workflow
    assert f"podcast saved to {tmp_path / 'again.mp3'} (" in out
    assert (await temporal_client.get_workflow_handle(shown["workflow_id"]).describe()).run_id == first
    assert (len(speech.requests), len(llm.calls("podcast"))) == calls
    assert (tmp_path / "again.mp3").read_bytes() == data

    # `result` fetches it again, days later.
    code, out, err = await cli(worker_env, "result", f"{finished_run}-podcast", "-o", str(tmp_path / "later.mp3"))
    assert code == 0, err
    assert f"podcast saved to {tmp_path / 'later.mp3'} (" in out
    assert (tmp_path / "later.mp3").read_bytes() == data
    await keep_history(temporal_client.get_workflow_handle(shown["workflow_id"]), "podcast")


async def test_side_outputs_and_follow_ups_wait_out_rate_limits(finished_run, worker_env, speech, llm, temporal_client):
    """The podcast's model and speech endpoints, prose and a follow-up
    question each meet a 429: each waits what the provider asked and goes on,
    counting the waits in its usage (issue 30)."""
    llm.fail_next(1, 429, retry_after=1)  # the podcast's script
    speech.fail_next(2, 429, retry_after=1)  # two of its lines
    code, out, err = await cli(worker_env, "podcast", finished_run, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["status"] == "completed"
    assert shown["usage"]["rate_limited"] == 3 and shown["usage"]["rate_limited_seconds"] >= 3
    assert shown["usage"]["llm_calls"] == 1

    llm.fail_next(1, 429, retry_after=1)
    code, out, err = await cli(worker_env, "prose", "--option", "shorter", "The lighthouse stood.", "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["status"] == "completed" and shown["usage"]["rate_limited"] == 1

    asked = len(llm.calls("followup"))
    llm.fail_next(1, 429, retry_after=1)
    code, out, err = await cli(worker_env, "ask", finished_run, "How many ships did the keeper log?", "--json")
    assert code == 0, err
    assert "4417" in json.loads(out)["answer"]
    statuses = [r["_status"] for r in llm.calls("followup")[asked:]]
    assert statuses == [429, 200]


async def test_a_wav_speech_server_gives_a_wav_podcast(finished_run, worker_env, speech, tmp_path):
    speech.audio_format = "wav"
    code, out, err = await cli(worker_env, "podcast", finished_run)
    assert code == 0, err
    path = Path(out.split("podcast saved to ")[1].split(" (")[0])
    assert path.suffix == ".wav" and path.parent == Path(worker_env["DEEPRESEARCH_DATA_DIR"]) / "reports"
    expected = sum(len(r["input"]) * SECONDS_PER_CHAR for r in speech.requests)
    assert math.isclose(audio.describe(path.read_bytes()).seconds, expected, rel_tol=0.02)


async def test_status_and_watch_follow_a_podcast_line_by_line(finished_run, worker_env, speech, temporal_client):
    """The speech server answers two lines and holds the rest: `status` shows
    the podcast's phase and "line 2 of N spoken" (a podcast's status query
    answers a SideStatus, not a run's status); `watch` prints each line as
    it is spoken and ends by saving the file where `podcast` saves it."""
    podcast_id = f"{finished_run}-podcast"
    answered, release = itertools.count(), threading.Event()
    speech.hold = lambda body: next(answered) >= 2 and release.wait(60)
    try:
        making = asyncio.create_task(cli(worker_env, "podcast", finished_run))
        handle = temporal_client.get_workflow_handle(podcast_id)
        async with asyncio.timeout(60):
            while True:
                try:
                    status = await handle.query("status", result_type=SideStatus)
                    if status.done == 2:
                        break
                except (RPCError, WorkflowQueryFailedError):  # not started yet
                    pass
                await asyncio.sleep(0.2)
        assert status.phase == "speaking" and status.total > 2
        total = status.total

        code, out, err = await cli(worker_env, "status", podcast_id)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[:3] == [
            f"podcast {podcast_id} of run {finished_run} (running)",
            "phase: speaking",
            f"line 2 of {total} spoken",
        ]
        assert lines[3].startswith("follow it with `") and f" watch {podcast_id}`" in lines[3]

        watching = asyncio.create_task(cli(worker_env, "watch", podcast_id))
        await asyncio.sleep(2)  # it has caught up with the stream and waits for more
    finally:
        release.set()
    code, out, err = await watching
    assert code == 0, err
    assert [f"note: line {n} of {total} spoken" for n in range(1, total + 1)] == [
        line for line in out.splitlines() if line.startswith("note: line ")
    ]
    path = Path(worker_env["DEEPRESEARCH_DATA_DIR"]) / "reports" / f"{finished_run}.mp3"
    assert out.splitlines()[-1].startswith(f"podcast saved to {path} (")
    code, made, err = await making
    assert code == 0, err
    assert made.splitlines()[-1].startswith(f"podcast saved to {path} (")
    assert audio.describe(path.read_bytes()).seconds > 0

    code, out, err = await cli(worker_env, "status", podcast_id)
    assert code == 0, err
    assert out.splitlines()[:3] == [
        f"podcast {podcast_id} of run {finished_run} (completed)",
        "phase: completed",
        f"line {total} of {total} spoken",
    ]
    assert f" result {podcast_id}`" in out.splitlines()[3]
    code, out, err = await cli(worker_env, "status", podcast_id, "--json")
    assert code == 0, err
    assert json.loads(out) == {
        "workflow_id": podcast_id,
        "state": "completed",
        "kind": "podcast",
        "phase": "completed",
        "run_id": finished_run,
        "done": total,
        "total": total,
        "error": None,
        "rate_limited_since": None,  # no call waits on a provider's rate limit
    }


async def test_status_and_watch_on_slides(finished_run, worker_env):
    code, out, err = await cli(worker_env, "slides", finished_run)
    assert code == 0, err
    slides_id = f"{finished_run}-slides"
    path = Path(worker_env["DEEPRESEARCH_DATA_DIR"]) / "reports" / f"{finished_run}.pptx"
    made = path.read_bytes()

    code, out, err = await cli(worker_env, "status", slides_id)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == [f"slides {slides_id} of run {finished_run} (completed)", "phase: completed"]
    assert len(lines) == 3 and f" result {slides_id}`" in lines[2]

    # Watching a finished deck replays its progress, then saves the file again.
    path.unlink()
    code, out, err = await cli(worker_env, "watch", slides_id)
    assert code == 0, err
    lines = out.splitlines()
    assert "phase: building" in lines and lines[-2].startswith("phase: completed: ")
    slides = len(list(Presentation(str(path)).slides))
    assert lines[-1] == f"slides saved to {path} ({slides} slides, pptx)"
    assert path.read_bytes() == made


async def test_list_shows_podcast_and_slides_under_their_run(finished_run, worker_env, temporal_client, task_queue):
    """A newer run is listed first; the older run's podcast and slides,
    though started after it, come right under their own run, indented."""
    newer = await start(temporal_client, task_queue, "Tell me more about Lantern Rock", auto_accept_plan=True)
    assert (await newer.result()).status == "completed"
    for kind in ("slides", "podcast"):
        code, out, err = await cli(worker_env, kind, finished_run)
        assert code == 0, err

    # Other tests' runs share the server: past the default 20 rows, a busy CI pushed this run off the list.
    code, out, err = await cli(worker_env | {"COLUMNS": "200"}, "list", "--limit", "1000")
    assert code == 0, err
    # The table's rows, without the question's second line.
    cells = [line.split("│")[1:-1] for line in out.splitlines() if line.startswith("│")]
    ours = (newer.id, finished_run)
    rows = [row for row in cells if row[0].strip().startswith(ours)]
    ids = [row[0].rstrip()[1:] for row in rows]
    assert ids == [newer.id, finished_run, f"  {finished_run}-podcast", f"  {finished_run}-slides"]
    assert [row[1].strip() for row in rows] == ["completed"] * 4
    assert [row[3].strip() for row in rows[2:]] == ["podcast", "slides"]


async def test_a_speech_endpoint_that_rejects_the_key_fails_in_one_line(finished_run, worker_env, speech):
    speech.api_key = "another-key"
    code, out, err = await cli(worker_env, "podcast", finished_run, timeout=60)
    texts = [r["input"] for r in speech.requests]
    assert code == 1 and 1 <= len(texts) <= 4 and len(set(texts)) == len(texts)  # the first calls, none retried
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "speech endpoint rejected the API key (HTTP 401)" in err and "OPENAI_API_KEY" in err

    # `status` says where it stopped and what to do; `watch` gives the failure in one line.
    podcast_id = f"{finished_run}-podcast"
    code, out, err = await cli(worker_env, "status", podcast_id, timeout=60)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == [f"podcast {podcast_id} of run {finished_run} (failed)", "phase: failed"]
    assert lines[-2].startswith("error: ") and "rejected the API key" in lines[-2]
    assert lines[-1].startswith("start it again with `") and lines[-1].endswith(f" podcast {finished_run}`")
    code, out, err = await cli(worker_env, "watch", podcast_id, timeout=60)
    assert code == 1 and "phase: failed: " in out
    assert err.startswith(f"error: the podcast {podcast_id} failed: ") and len(err.strip().splitlines()) == 1
    assert "rejected the API key" in err


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


async def test_slides_build_a_deck_with_sections_tables_notes_and_sources(
    finished_run, worker_env, tmp_path, temporal_client
):
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
    await keep_history(temporal_client.get_workflow_handle(shown["workflow_id"]), "slides")


@pytest.mark.parametrize("option", ["continue", "improve", "shorter", "longer", "fix", "zap"])
async def test_each_prose_option_returns_text(option, worker_env, side_worker):
    extra = ["--command", "make it a haiku"] if option == "zap" else []
    code, out, err = await cli(worker_env, "prose", "--option", option, "The lighthouse stood.", *extra)
    assert code == 0, err
    instruction = {"continue": "Continue", "improve": "Improve", "shorter": "Make", "longer": "Make", "fix": "Fix"}
    assert out.startswith(f"[{instruction.get(option, 'You')}]") and "The lighthouse stood." in out
    if option == "zap":
        assert "make it a haiku" in out


async def test_prose_on_a_runs_report(finished_run, worker_env, temporal_client):
    code, out, err = await cli(worker_env, "prose", "--option", "shorter", "--run", finished_run, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["status"] == "completed" and FACT in shown["text"]
    await keep_history(temporal_client.get_workflow_handle(shown["workflow_id"]), "prose")

    # `status` and `watch` know a prose workflow too.
    code, out, err = await cli(worker_env, "status", shown["workflow_id"])
    assert code == 0, err
    assert out.splitlines()[:2] == [
        f"prose {shown['workflow_id']} of run {finished_run} (completed)",
        "phase: completed",
    ]
    code, out, err = await cli(worker_env, "watch", shown["workflow_id"])
    assert code == 0, err
    assert out == shown["text"] + "\n"


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
    assert code == 1 and f"run {handle.id} is still running" in err and len(err.strip().splitlines()) == 1
    await handle.cancel()


async def test_a_podcast_whose_worker_is_killed_mid_speech_resumes_without_repeating_a_clip(
    temporal_client, task_queue, worker_env, script, speech, tmp_path
):
    """The real worker as a process, SIGKILLed while the third speech call is
    being answered; a new worker finishes the podcast. No clip that was
    delivered before the kill is asked for again, and the file is whole."""
    env = worker_env | {"DEEPRESEARCH_TTS_BASE_URL": speech.base_url}
    arrived, release, answered = threading.Event(), threading.Event(), []

    def hold(body):
        if len(answered) == 2 and not arrived.is_set():
            arrived.set()
            release.wait(30)  # the worker dies meanwhile: this answer goes nowhere
        answered.append(body["input"])

    speech.hold = hold
    with WorkerProcess(env, tmp_path / "worker.log") as process:
        await process.ready(temporal_client)
        run = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
        result = await run.result()
        source = SourceReport(run_id=run.id, title="Lantern Rock", report=result.final_report)
        handle = await temporal_client.start_workflow(
            "Podcast", source, id=f"{run.id}-podcast", task_queue=task_queue, result_type=PodcastResult
        )
        assert await asyncio.to_thread(arrived.wait, 60), "the third speech call never came"
        # The clips answered so far may not be recorded yet: kill once one is.
        for _ in range(300):
            if any(a.name == "speak" and a.completed_at for a in activities(await handle.fetch_history())):
                break
            await asyncio.sleep(0.1)
        killed_at = time.time()
        assert not (await handle.describe()).close_time  # killed in the middle, not after the end
        process.kill()
        release.set()
        process.start()
        await process.ready(temporal_client)
        podcast = await asyncio.wait_for(handle.result(), 120)
    # A clip whose speech activity had completed before the kill is never asked for again.
    done_before = [
        a.input["text"]
        for a in activities(await handle.fetch_history())
        if a.name == "speak" and a.completed_at and a.completed_at < killed_at
    ]
    asked = [r["input"] for r in speech.requests]
    repeated = [text for text in done_before if asked.count(text) > 1]
    assert len(done_before) >= 1 and not repeated, repeated
    # Every part spoken; the joined file lasts as long as the parts.
    parts = set(asked)
    expected = sum(len(text) * SECONDS_PER_CHAR for text in parts)
    data = await blob_store(Path(worker_env["DEEPRESEARCH_DATA_DIR"])).get_bytes(podcast.audio.blob)
    assert math.isclose(audio.describe(data).seconds, expected, rel_tol=0.02)
    assert podcast.usage.speech_calls == len(parts)
