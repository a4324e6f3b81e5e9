"""The whole built-in suite end to end on the project's scripted demo model (client/demo), as a
regression baseline: its scores are recorded in bench/results/eval-scripted.json
(bench/README.md, "Evaluation baseline"); a change that makes the research
find fewer facts, cite pages the corpus does not have or fail a task shows
here. Re-record, after a deliberate change, with
    RECORD_EVAL_BASELINE=1 .venv/bin/python -m pytest -n 0 tests/test_eval_suite_builtin.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from client.demo.model import MODEL_NAME, DemoModel
from tests.test_eval_e2e import ROOT
from workflows.models import ResearchResult

BASELINE = ROOT / "bench" / "results" / "eval-scripted.json"
MARGIN = 0.1  # how far a total may fall below the baseline


@pytest.fixture
def demo_env(data_dir: Path, dev_server) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAVILY_", "DEEPRESEARCH_", "OPENAI_"))}
    with DemoModel() as model:
        yield env | {
            "PYTHONPATH": str(ROOT),
            "OPENAI_API_KEY": "demo",
            "OPENAI_BASE_URL": model.base_url,
            "DEEPRESEARCH_MODEL": MODEL_NAME,
            "DEEPRESEARCH_DATA_DIR": str(data_dir),
            "DEEPRESEARCH_SANDBOX": "local",
            "TEMPORAL_ADDRESS": dev_server.address,
        }


async def test_the_builtin_suite_runs_end_to_end_within_the_baseline(demo_env, temporal_client, tmp_path: Path):
    out = tmp_path / "builtin.json"
    command = [sys.executable, "-m", "client.cli", "eval", "--json", str(out), "--concurrency", "4"]
    done = subprocess.run(command, env=demo_env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(out.read_text())
    tasks = [json.loads(line) for line in (ROOT / "client/evaluation/builtin/tasks.jsonl").read_text().splitlines()]
    assert [r["id"] for r in data["tasks"]] == [t["id"] for t in tasks]
    assert data["totals"]["failed"] == 0
    for record in data["tasks"]:  # each verdict is the run's own report's
        result = await temporal_client.get_workflow_handle(record["run_id"], result_type=ResearchResult).result()
        assert record["status"] == result.status and record["model_calls"] == result.usage.llm_calls
        facts = record["facts"]
        assert record["fact_recall"] == (round(sum(facts.values()) / len(facts), 4) if facts else None)
    if os.environ.get("RECORD_EVAL_BASELINE") == "1":
        recorded = json.dumps(data, indent=2, ensure_ascii=False).replace(f"file://{ROOT}/", "file://<repo>/")
        BASELINE.write_text(recorded + "\n", encoding="utf-8")  # no path of the recording machine
    print(json.dumps(data["totals"]))
    baseline = json.loads(BASELINE.read_text())["totals"]
    totals = data["totals"]
    for name in ("fact_recall", "evidence_recall", "citation_validity", "citation_support", "not_in_corpus_stated"):
        if baseline.get(name) is not None:
            assert totals[name] is not None and totals[name] >= baseline[name] - MARGIN, (name, totals, baseline)
    assert totals["distractors_used"] <= baseline["distractors_used"]
