"""Side outputs belong to the run they were made from, and say all they
were asked: a long script is spoken to its last line (issue 20, items 8 and
9). The real CLI, worker, dev server and scripted model and speech servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from client.runs import start_research
from infra.connection import Connection
from testkit.speech_server import MP3_FRAME_SAMPLES, MP3_RATE, SECONDS_PER_CHAR
from tests.test_side_outputs import QUESTION, cli, finished_run, side_worker, speech  # noqa: F401 (fixtures)
from workflows.models import ResearchInput
from workflows.side_models import PodcastResult, SourceReport

LINES = 401  # more than the 400 speech calls a podcast was silently cut to


@pytest.mark.timeout(600)  # 401 speech activities: 96 s in a clean-clone CI run here, more on a busier machine
async def test_a_long_script_is_spoken_to_its_last_line(finished_run, worker_env, speech, script):  # noqa: F811
    lines = [{"speaker": "female" if n % 2 else "male", "paragraph": f"Line {n}."} for n in range(LINES - 1)]
    lines.append({"speaker": "female", "paragraph": "And that was the closing line."})
    script.podcast = lambda request: json.dumps({"locale": "en-US", "lines": lines})
    code, out, err = await cli(worker_env, "podcast", finished_run, "--json", timeout=400)
    assert code == 0, err
    shown = json.loads(out)
    assert shown["script"] == [{"speaker": line["speaker"], "text": line["paragraph"]} for line in lines]
    spoken = sorted(r["input"] for r in speech.requests)
    assert spoken == sorted(line["paragraph"] for line in lines)  # each line once, the last one too
    assert shown["usage"]["speech_calls"] == LINES
    expected = sum(len(line["paragraph"]) * SECONDS_PER_CHAR for line in lines)
    frame = MP3_FRAME_SAMPLES / MP3_RATE  # each clip is whole frames: up to one more
    assert expected - 0.01 <= shown["seconds"] <= expected + LINES * frame


async def side_input(client, workflow_id: str) -> tuple[str, SourceReport]:
    """The run id of the side output's workflow and the report it was made from."""
    handle = client.get_workflow_handle(workflow_id)
    history = await handle.fetch_history()
    first = history.events[0].workflow_execution_started_event_attributes
    source = client.data_converter.payload_converter.from_payloads(first.input.payloads, [SourceReport])[0]
    return first.original_execution_run_id, source


async def test_a_reused_id_gets_its_own_podcast_and_slides(
    finished_run,  # noqa: F811
    worker_env,
    temporal_client,
    task_queue,
):
    made = {}
    for kind in ("podcast", "slides"):
        code, out, err = await cli(worker_env, kind, finished_run)
        assert code == 0, err
        made[kind] = await side_input(temporal_client, f"{finished_run}-{kind}")

    # A new run under the same id, with another question: another report.
    conn = Connection(address="unused", task_queue=task_queue)
    request = ResearchInput(question=f"{QUESTION}, once more and differently", auto_accept_plan=True)
    again = await (await start_research(temporal_client, conn, request, finished_run)).result()
    assert again.status == "completed" and again.final_report != made["podcast"][1].report

    for kind in ("podcast", "slides"):
        code, out, err = await cli(worker_env, kind, finished_run)
        assert code == 0, err
        run_id, source = await side_input(temporal_client, f"{finished_run}-{kind}")
        assert run_id != made[kind][0] and source.report == again.final_report
        # Asked again, it is this run's: fetched, not made once more.
        code, out, err = await cli(worker_env, kind, finished_run)
        assert code == 0, err
        assert (await side_input(temporal_client, f"{finished_run}-{kind}"))[0] == run_id


async def test_a_podcast_whose_audio_is_gone_says_which_blob_in_one_line(
    finished_run,  # noqa: F811
    worker_env,
    temporal_client,
    tmp_path,
):
    code, out, err = await cli(worker_env, "podcast", finished_run, "--json", "-o", str(tmp_path / "show.mp3"))
    assert code == 0, err
    handle = temporal_client.get_workflow_handle(f"{finished_run}-podcast", result_type=PodcastResult)
    blob = (await handle.result()).audio.blob
    digest = blob.removeprefix("sha256:")
    (Path(worker_env["DEEPRESEARCH_DATA_DIR"]) / "blobs" / digest[:2] / digest).unlink()
    for args in (["podcast", finished_run], ["result", handle.id]):
        code, out, err = await cli(worker_env, *args, "-o", str(tmp_path / "again.mp3"))
        assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert f"blob {blob} is missing from " in err


def test_a_script_beyond_the_cap_is_cut_at_a_whole_line_and_the_script_says_so():
    """Only a script over MAX_PARTS speech calls is cut: at a whole line, and
    the script returned is the lines spoken."""
    from workflows.podcast import MAX_PARTS, spoken_lines
    from workflows.side_models import PodcastScript

    long = "A sentence. " * 500  # 6,000 characters: two speech calls
    script = PodcastScript.model_validate(
        {"lines": [{"speaker": "male", "paragraph": "Hello."}, {"speaker": "female", "paragraph": long}] * 3}
    )
    kept, parts = spoken_lines(script, max_parts=4)
    assert [line.paragraph for line in kept.lines] == [line.paragraph for line in script.lines[:3]]
    assert len(parts) == 4  # the third line (one call) fits, the fourth (two calls) would not: the rest is cut
    kept, parts = spoken_lines(script)
    assert kept == script and len(parts) == 9 <= MAX_PARTS
