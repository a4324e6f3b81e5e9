"""`deepresearch eval` as a user runs it: a subprocess against a real Temporal
dev server, with a scripted model (testkit/eval_script.py) and a small corpus
and task file written here. The verdicts are checked against the reports the
runs really wrote, read back from Temporal."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from testkit.crash import Gate, RecordingLLM
from testkit.eval_script import EvalScript
from testkit.llm_server import Reply, role_of
from testkit.runs import keep_history
from workflows.eval_models import EvalProgress
from workflows.models import ResearchResult

ROOT = Path(__file__).resolve().parent.parent
CORPUS = {
    "towns/harrowgate.md": "# Harrowgate\n\nA fishing town.\n\nFACT: the Harrowgate harbour master is Ada Halvorsen\n",
    "companies/kestrel.md": "# Kestrel Works\n\nA foundry.\n\nFACT: Kestrel Works employs 1,250 people in its foundry\n",
    "notes/almanac.html": "<html><head><title>Old almanac</title></head><body><h1>Old almanac</h1>"
    "<p>An almanac of 1990 counted 900 workers at the Kestrel foundry.</p></body></html>",
    "lake/mirrormere.txt": "Mirrormere lake\n\nFACT: Mirrormere lake is 41 metres deep at its centre\n",
}
TASKS = [
    {
        "id": "harbour",
        "question": "Who is the Harrowgate harbour master?",
        "facts": [{"id": "name", "any": ["Ada Halvorsen"]}, {"id": "deputy", "any": ["Sigrun Vale"]}],
    },
    {
        "id": "kestrel",
        "question": "How many people does Kestrel Works employ in its foundry?",
        "facts": [{"id": "staff", "any": ["1,250 people", "1250 people"]}],
        "avoid": [{"id": "old", "any": ["900 workers"]}],
    },
    {
        "id": "lake",
        "question": "How deep is Mirrormere lake at its centre?",
        "facts": [{"id": "depth", "any": ["41 metres"]}, {"id": "eels", "any": ["silver eels of Mirrormere"]}],
    },
]
NOWHERE = {"deputy", "eels"}  # facts no corpus document holds


def write_suite(folder: Path) -> tuple[Path, Path]:
    corpus = folder / "corpus"
    for path, text in CORPUS.items():
        (corpus / path).parent.mkdir(parents=True, exist_ok=True)
        (corpus / path).write_text(text, encoding="utf-8")
    tasks = folder / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(task) + "\n" for task in TASKS), encoding="utf-8")
    return tasks, corpus


@pytest.fixture
def model():
    with RecordingLLM() as server:
        server.handler = EvalScript()
        yield server


@pytest.fixture
def eval_env(model, data_dir: Path, dev_server) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAVILY_", "DEEPRESEARCH_", "OPENAI_"))}
    return env | {
        "PYTHONPATH": str(ROOT),
        "OPENAI_API_KEY": model.api_key,
        "OPENAI_BASE_URL": model.base_url,
        "DEEPRESEARCH_MODEL": "scripted-model",
        "DEEPRESEARCH_DATA_DIR": str(data_dir),
        "TEMPORAL_ADDRESS": dev_server.address,
        "DEEPRESEARCH_SEARCH_ENGINE": "brave",  # no key: the eval searches its own offline web anyway
    }


def eval_command(tasks: Path, corpus: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "client.cli", "eval", "--tasks", str(tasks), "--corpus", str(corpus)] + [
        "--json",
        str(out),
        "--no-background-investigation",
        *extra,
    ]


def found_in(report: str, accepted: list[str]) -> bool:
    text = " ".join(report.lower().split())
    return any(" ".join(a.lower().split()) in text for a in accepted)


async def check_records(client: Client, data: dict) -> None:
    """Each verdict is what the run's own report says; recall is found / required."""
    specs = {task["id"]: task for task in TASKS}
    assert sorted(r["id"] for r in data["tasks"]) == sorted(specs)
    for record in data["tasks"]:
        spec = specs[record["id"]]
        result = await client.get_workflow_handle(record["run_id"], result_type=ResearchResult).result()
        assert result.final_report.strip()
        for fact in spec["facts"]:
            assert record["facts"][fact["id"]] == found_in(result.final_report, fact["any"]), fact
        for fact in spec.get("avoid", []):
            assert record["avoided"][fact["id"]] == (not found_in(result.final_report, fact["any"]))
        assert not any(record["facts"].get(name) for name in NOWHERE)
        found = sum(record["facts"].values())
        assert record["fact_recall"] == round(found / len(spec["facts"]), 4)
        assert record["model_calls"] == result.usage.llm_calls > 0
        assert record["searches"] == result.usage.searches


async def test_eval_scores_each_run_by_its_own_report(eval_env, temporal_client, model, tmp_path: Path):
    tasks, corpus = write_suite(tmp_path)
    out = tmp_path / "result.json"
    command = eval_command(tasks, corpus, out, "--judge-model", "judge-model")
    done = subprocess.run(command, env=eval_env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert set(data) == {"suite", "models", "tasks", "totals"}
    assert data["suite"] == "tasks" and data["models"]["reporter"] == "scripted-model"
    await check_records(temporal_client, data)
    # The scripted researcher reads the best page for each question: the facts there are found.
    assert {r["id"]: r["facts"] for r in data["tasks"]}["harbour"] == {"name": True, "deputy": False}
    assert all(r["citation_validity"] == 1.0 for r in data["tasks"])
    assert data["totals"]["tasks"] == 3 and data["totals"]["failed"] == 0
    # What the user sees: the progress bar's last state, a row per task, the totals.
    assert re.search(r"^tasks done .* 3/3 ", done.stdout, re.MULTILINE), done.stdout[-3000:]
    for record in data["tasks"]:
        row = next(line for line in done.stdout.splitlines() if f"│ {record['id']} " in line)
        cells = [cell.strip() for cell in row.split("│")[1:-1]]
        assert cells[:5] == [record["id"], "1", "completed", f"{record['fact_recall']:.2f}", _found(record["facts"])]
    recall = data["totals"]["fact_recall"]
    assert re.search(rf"│ fact_recall +│ +{recall:.2f} │", done.stdout), done.stdout[-3000:]
    # The judge's rubric, beside the scores, from the judge's model (its own reading of each report).
    assert data["models"]["judge"] == "judge-model"
    assert {r["model"] for r in model.requests if r["_role"] == "judge"} == {"judge-model"}
    for record in data["tasks"]:
        result = await temporal_client.get_workflow_handle(record["run_id"], result_type=ResearchResult).result()
        judge = record["judge"]
        assert judge["comprehensiveness"] == 7 and judge["depth"] == (8 if "FACT:" in result.final_report else 3)
        assert judge["problem"] is None and judge["reasons"]["depth"]


def test_a_bad_task_line_is_one_line_naming_file_and_line(eval_env, tmp_path: Path):
    tasks, corpus = write_suite(tmp_path)
    tasks.write_text(tasks.read_text() + '{"id": "x", "question": "?", "facts": [{"id": "f"}]}\n')
    done = subprocess.run(
        eval_command(tasks, corpus, tmp_path / "r.json"), env=eval_env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [f"error: {tasks}:4: facts.0.any: Field required"]


def test_no_model_configured_is_one_line(eval_env, tmp_path: Path):
    tasks, corpus = write_suite(tmp_path)
    env = {k: v for k, v in eval_env.items() if not k.startswith("OPENAI_")}
    env["DEEPRESEARCH_LOCAL_MODEL_URLS"] = "http://127.0.0.1:9"  # no local server either
    done = subprocess.run(
        eval_command(tasks, corpus, tmp_path / "r.json"), env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: OPENAI_API_KEY is not set and no local model server answers (127.0.0.1:9)")


async def test_a_killed_eval_finishes_without_running_a_finished_task_again(
    eval_env, temporal_client, model: RecordingLLM, tmp_path: Path
):
    tasks, corpus = write_suite(tmp_path)
    out = tmp_path / "result.json"
    command = eval_command(tasks, corpus, out, "--concurrency", "1")
    # The second task's report waits until the eval is killed: the suite cannot finish first.
    gate = model.handler = Gate(model.handler, "reporter", n=2)
    first = subprocess.Popen(
        command, env=eval_env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    suite_id, printed = None, []
    for line in first.stdout:
        printed.append(line)
        found = re.match(r"suite (\S+):", line)
        if found:
            suite_id = found.group(1)
            break
    assert suite_id, "the eval never named its suite: " + "".join(printed)[-3000:]
    # Keep reading what it prints (a full pipe would stop the eval and its worker mid-write), to show on failure.
    threading.Thread(target=lambda: printed.extend(first.stdout), daemon=True).start()
    handle = temporal_client.get_workflow_handle(suite_id)
    deadline, progress = time.monotonic() + 240, None
    while time.monotonic() < deadline and first.poll() is None:
        try:
            progress = await handle.query("progress", result_type=EvalProgress)
        except Exception:  # noqa: BLE001 - not started yet
            progress = None
        if progress and progress.done >= 1:
            break
        await asyncio.sleep(0.2)
    assert progress is not None and progress.done >= 1, (
        f"no task of the suite finished in time (eval exit code {first.poll()}): " + "".join(printed)[-3000:]
    )
    status = [sys.executable, "-m", "client.cli", "status", suite_id]
    shown = await asyncio.to_thread(subprocess.run, status, env=eval_env, cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        f"evaluation suite {suite_id}: 1 of 3 task run(s) finished",
        f"running: {suite_id}-kestrel-r1",  # held at its report by the gate
    ]
    # Into a pipe no bar is drawn: a line per finished task says how far the suite is.
    wanted = "tasks 1/3 done; running: kestrel-r1"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any(line.startswith(wanted) for line in printed):
        await asyncio.sleep(0.2)
    assert any(line.startswith(wanted) for line in printed), "".join(printed)[-3000:]
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    gate.release()
    # Its worker was in the killed eval.
    shown = await asyncio.to_thread(subprocess.run, status, env=eval_env, cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 1 and shown.stderr.strip().splitlines() == [
        f"error: evaluation suite {suite_id} waits: no `eval` serves it now; run the same `eval` command again to go on"
    ]
    finished = [f"{suite_id}-{name}" for name in progress.finished]
    assert finished and progress.done < 3, progress
    calls_before = {run: _calls(model, run) for run in finished}

    done = subprocess.run(command, env=eval_env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(out.read_text())
    await check_records(temporal_client, data)
    for record in data["tasks"]:
        assert record["run_id"] == f"{suite_id}-{record['id']}-r1"
        runs = [w async for w in temporal_client.list_workflows(f'WorkflowId = "{record["run_id"]}"')]
        assert len(runs) == 1, f"{record['run_id']} was started {len(runs)} times"
    await keep_history(handle, "eval_suite_resumed")
    for run, calls in calls_before.items():
        assert _calls(model, run) == calls, f"a model call of the finished {run} was made again"
        assert len(set(calls)) == len(calls)

    # Once more, after the suite finished: its results again, nothing run again.
    requests = len(model.requests)
    again = subprocess.run(command, env=eval_env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and f"suite {suite_id} has already finished" in again.stdout
    shown = await asyncio.to_thread(subprocess.run, status, env=eval_env, cwd=ROOT, capture_output=True, text=True)
    assert json.loads(out.read_text())["tasks"] == data["tasks"]
    assert len(model.requests) == requests
    # `status` of the finished suite: its summary, from its history (no `eval` serves it now).
    assert shown.returncode == 0, shown.stderr
    assert f"evaluation suite {suite_id} has finished: 3 task run(s)" in shown.stdout
    assert any(line.startswith("│ harbour ") and " completed " in line for line in shown.stdout.splitlines())
    as_json = await asyncio.to_thread(
        subprocess.run, [*status, "--json"], env=eval_env, cwd=ROOT, capture_output=True, text=True
    )
    assert json.loads(as_json.stdout)["tasks"] == data["tasks"]
    # `status` of one of its runs: no worker answers, but the run has ended: its status, from its result.
    run_id = data["tasks"][0]["run_id"]
    status_run = [sys.executable, "-m", "client.cli", "status", run_id]
    shown = await asyncio.to_thread(subprocess.run, status_run, env=eval_env, cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"{run_id}  completed") and "shown from its result" in shown.stdout
    assert "deep-research" not in shown.stdout + shown.stderr  # no worker of another queue is suggested


def _found(verdicts: dict[str, bool]) -> str:
    return f"{sum(verdicts.values())}/{len(verdicts)}"


def _calls(model: RecordingLLM, workflow_id: str) -> list[str]:
    """The model calls a run made: one per activity attempt (``<workflow id>/<activity id>``)."""
    return [r["_request_id"] for r in model.requests if (r.get("_request_id") or "").startswith(workflow_id + "/")]


async def test_runs_and_only(eval_env, temporal_client, tmp_path: Path):
    tasks, corpus = write_suite(tmp_path)
    out = tmp_path / "result.json"
    command = eval_command(tasks, corpus, out, "--only", "kestrel", "--runs", "2")
    done = subprocess.run(command, env=eval_env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert [(r["id"], r["run"]) for r in data["tasks"]] == [("kestrel", 1), ("kestrel", 2)]
    assert data["tasks"][0]["run_id"].endswith("-kestrel-r1") and data["tasks"][1]["run_id"].endswith("-kestrel-r2")
    assert data["totals"]["runs"] == 2 and "spread" in data["totals"]
    assert "mean ± spread over runs" in done.stdout
    for record in data["tasks"]:
        result = await temporal_client.get_workflow_handle(record["run_id"], result_type=ResearchResult).result()
        assert record["facts"]["staff"] == found_in(result.final_report, TASKS[1]["facts"][0]["any"])
    # `result` on the suite's own id: one line saying what it is (it used to fail decoding it as a run).
    suite_id = data["tasks"][0]["run_id"].removesuffix("-kestrel-r1")
    shown = subprocess.run(
        [sys.executable, "-m", "client.cli", "result", suite_id], env=eval_env, cwd=ROOT, capture_output=True, text=True
    )
    assert shown.returncode == 1 and shown.stderr.strip().splitlines() == [
        f"error: {suite_id} is not a research run but an evaluation suite: run the same `eval` command again for its table"
    ]


async def test_the_eval_offers_its_runs_no_mcp_server_of_the_user(eval_env, data_dir: Path, tmp_path: Path):
    """An MCP server in the user's data dir could reach beyond the offline
    web: the eval's worker neither starts it nor offers its tools."""
    marker = tmp_path / "mcp-server-started"
    server = {"command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'w').close()"]}
    (data_dir / "mcp.json").write_text(json.dumps({"servers": {"web": server | {"agents": ["researcher", "coder"]}}}))
    tasks, corpus = write_suite(tmp_path)
    out = tmp_path / "result.json"
    command = eval_command(tasks, corpus, out, "--only", "harbour")
    done = subprocess.run(command, env=eval_env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert json.loads(out.read_text())["tasks"][0]["status"] == "completed"
    assert not marker.exists(), "the eval started the user's MCP server"


async def test_eval_without_a_key_uses_a_local_model_server_as_run_does(eval_env, temporal_client, tmp_path: Path):
    """No OPENAI_API_KEY: `eval` finds a local server as `run` and `worker` do,
    says which, and every task's model calls go to it."""
    from testkit.local_model_server import LocalModelServer

    tasks, corpus = write_suite(tmp_path)
    out = tmp_path / "result.json"
    with LocalModelServer("llama.cpp", model="local-small", n_ctx=16384, handler=EvalScript()) as server:
        url = f"http://127.0.0.1:{server.port}"
        env = {
            k: v for k, v in eval_env.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DEEPRESEARCH_MODEL")
        }
        env["DEEPRESEARCH_LOCAL_MODEL_URLS"] = url
        command = eval_command(tasks, corpus, out, "--only", "harbour")
        done = await asyncio.to_thread(
            subprocess.run, command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        models = {r.get("model") for r in server.calls()}
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"no OPENAI_API_KEY: using the llama.cpp server at {url}/v1 (model local-small" in done.stdout
    assert models == {"local-small"}
    data = json.loads(out.read_text())
    assert data["models"]["reporter"] == "local-small"
    (record,) = data["tasks"]
    assert record["facts"]["name"] is True and record["model_calls"] > 0


async def test_a_judge_that_fails_leaves_the_task_unjudged_not_failed(eval_env, model: RecordingLLM, tmp_path: Path):
    """docs/eval.md: the judge's failure is the judge's `problem`; the run and its scores stand."""
    script = EvalScript()
    model.handler = lambda request: (
        Reply(status=400, content="no such judge model") if role_of(request) == "judge" else script(request)
    )
    tasks, corpus = write_suite(tmp_path)
    out = tmp_path / "result.json"
    command = eval_command(tasks, corpus, out, "--only", "harbour", "--judge-model", "judge-model")
    done = await asyncio.to_thread(subprocess.run, command, env=eval_env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = json.loads(out.read_text())["tasks"]
    assert record["status"] == "completed" and record["error"] is None
    assert record["facts"] == {"name": True, "deputy": False} and record["fact_recall"] == 0.5
    judge = record["judge"]
    assert (
        judge["overall"] is None
        and "the judge failed" in judge["problem"]
        and "no such judge model" in judge["problem"]
    )


async def test_cancelling_a_suite_cancels_its_running_task_and_starts_no_other(
    eval_env, temporal_client, model: RecordingLLM, tmp_path: Path
):
    tasks, corpus = write_suite(tmp_path)
    out = tmp_path / "result.json"
    gate = model.handler = Gate(model.handler, "reporter", n=1)
    command = eval_command(tasks, corpus, out, "--concurrency", "1")
    running = subprocess.Popen(
        command, env=eval_env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    printed: list[str] = []
    threading.Thread(target=lambda: printed.extend(running.stdout), daemon=True).start()
    try:
        await gate.wait_reached(120)
        suite_id = next(m.group(1) for line in printed if (m := re.match(r"suite (\S+):", line)))
        cancel = [sys.executable, "-m", "client.cli", "cancel", suite_id]
        said = await asyncio.to_thread(subprocess.run, cancel, env=eval_env, cwd=ROOT, capture_output=True, text=True)
        assert said.returncode == 0, said.stderr
        assert said.stdout.strip() == (
            f"cancel requested for {suite_id}: the suite stops; its research runs still going are cancelled "
            "(each writes a partial report) and no further task starts"
        )
        gate.release()  # the report asked before the cancel may answer now: the run is cancelled anyway
        first = f"{suite_id}-harbour-r1"
        result = await temporal_client.get_workflow_handle(first, result_type=ResearchResult).result()
        assert result.status == "cancelled" and result.final_report.strip()
        await asyncio.to_thread(running.wait, 120)
    finally:
        gate.release()
        if running.poll() is None:
            running.kill()
    assert running.returncode == 1, "".join(printed)
    assert printed[-1].strip() == (
        f"error: evaluation suite {suite_id} was cancelled: 0 of 3 task run(s) had finished; "
        "the same `eval` command runs it anew"
    ), printed[-3:]
    started = [w.id async for w in temporal_client.list_workflows(f'WorkflowId STARTS_WITH "{suite_id}-"')]
    assert started == [first], started


def held_at_report(model: RecordingLLM) -> tuple[Gate, Gate]:
    """The first researcher call is held until released (the suite is
    cancelled meanwhile), then the first reporter call, the run's partial
    report: a slow model writing it."""
    researching = Gate(model.handler, "researcher", n=1, hold=300)
    reporting = model.handler = Gate(researching, "reporter", n=1, hold=300)
    return researching, reporting


async def start_then_cancel(eval_env, tmp_path: Path, model: RecordingLLM, printed: list[str]):
    tasks, corpus = write_suite(tmp_path)
    researching, reporting = held_at_report(model)
    # Three tasks, one at a time: the two waiting end the suite at once when it is cancelled.
    command = eval_command(tasks, corpus, tmp_path / "result.json", "--concurrency", "1")
    running = subprocess.Popen(
        command, env=eval_env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    threading.Thread(target=lambda: printed.extend(running.stdout), daemon=True).start()
    await researching.wait_reached(120)
    suite_id = next(m.group(1) for line in printed if (m := re.match(r"suite (\S+):", line)))
    cancel = [sys.executable, "-m", "client.cli", "cancel", suite_id]
    said = await asyncio.to_thread(subprocess.run, cancel, env=eval_env, cwd=ROOT, capture_output=True, text=True)
    assert said.returncode == 0, said.stderr
    researching.release()
    await reporting.wait_reached(120)  # the cancelled run writes its partial report: slowly
    return running, reporting, f"{suite_id}-harbour-r1"


async def printed_line(printed: list[str], running: subprocess.Popen, text: str, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = next((line for line in printed if text in line), None)
        if found or running.poll() is not None:
            break
        await asyncio.sleep(0.2)
    assert found, f"no line with {text!r} (eval exit code {running.poll()}): " + "".join(printed)[-3000:]
    return found


async def test_a_cancelled_suite_serves_its_running_task_until_its_partial_report_is_written(
    eval_env, temporal_client, model: RecordingLLM, tmp_path: Path
):
    """The eval used to wait 120 s, then leave a slow model's run open with no worker (issue 31)."""
    printed: list[str] = []
    running, reporting, run_id = await start_then_cancel(eval_env, tmp_path, model, printed)
    try:
        await printed_line(printed, running, "serving its running task run(s) while they write", 60)
        line = await printed_line(printed, running, "still serving 1 cancelled task run(s)", 60)
        assert run_id in line and running.poll() is None
        described = await temporal_client.get_workflow_handle(run_id).describe()
        assert described.status.name == "RUNNING"
        reporting.release()
        result = await temporal_client.get_workflow_handle(run_id, result_type=ResearchResult).result()
        assert result.status == "cancelled" and result.final_report.strip()
        await asyncio.to_thread(running.wait, 60)
    finally:
        reporting.release()
        if running.poll() is None:
            running.kill()
    assert running.returncode == 1 and "was cancelled" in printed[-1], printed[-3:]


async def test_an_eval_stopped_while_it_serves_a_cancelled_run_ends_that_run(
    eval_env, temporal_client, model: RecordingLLM, tmp_path: Path
):
    printed: list[str] = []
    running, reporting, run_id = await start_then_cancel(eval_env, tmp_path, model, printed)
    try:
        await printed_line(printed, running, "the suite was cancelled;", 60)
        running.send_signal(signal.SIGTERM)
        await asyncio.to_thread(running.wait, 60)
    finally:
        reporting.release()
        if running.poll() is None:
            running.kill()
    described = await temporal_client.get_workflow_handle(run_id).describe()
    assert described.status.name == "TERMINATED", "".join(printed)[-3000:]  # not left open without a worker
    assert any(f"terminated {run_id}" in line for line in printed), printed[-5:]


async def test_a_report_that_is_its_requests_list_of_sources_scores_nothing(
    eval_env, temporal_client, model: RecordingLLM, tmp_path: Path
):
    """Gemma's "report": the reporter request's "Sources you may cite" list,
    whose page titles happen to state the answer (issue 31, item 9)."""
    corpus = tmp_path / "corpus"
    (corpus / "people").mkdir(parents=True)
    (corpus / "people/ada.md").write_text(
        "# Ada Halvorsen, harbour master of Harrowgate\n\nFACT: the Harrowgate harbour master is Ada Halvorsen\n"
    )
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASKS[0]) + "\n")
    script = model.handler

    def echoing(request: dict):
        if role_of(request) != "reporter":
            return script(request)
        asked = next(m["content"] for m in request["messages"] if m["role"] == "user")
        return asked[asked.index("# Sources you may cite") :].split("\n# Evidence", 1)[0]  # that list only

    model.handler = echoing
    out = tmp_path / "result.json"
    done = subprocess.run(
        eval_command(tasks, corpus, out), env=eval_env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = json.loads(out.read_text())["tasks"]
    result = await temporal_client.get_workflow_handle(record["run_id"], result_type=ResearchResult).result()
    assert result.final_report.startswith("# Sources you may cite") and "Ada Halvorsen" in result.final_report
    assert record["echo"] is True
    assert record["facts"] == {"name": False, "deputy": False} and record["fact_recall"] == 0.0
    assert record["citations"] == [] and record["citation_validity"] is None
