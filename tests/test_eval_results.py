"""What `deepresearch eval` prints and writes: totals with mean and spread
over runs, and `--compare` of two results (client/evaluation/results.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from client.errors import CliError
from client.evaluation import results


def record(task: str, run: int, recall: float | None, support: float | None, tokens: int, **extra) -> dict:
    return {
        "id": task,
        "run": run,
        "run_id": f"s-{task}-r{run}",
        "status": "completed",
        "fact_recall": recall,
        "facts": {},
        "avoided": {},
        "distractors_used": extra.get("distractors", 0),
        "not_in_corpus_stated": extra.get("stated"),
        "citations": [],
        "citation_validity": 1.0,
        "citation_support": support,
        "tokens": tokens,
        "model_calls": 5,
        "searches": 1,
        "crawls": 1,
        "seconds": 2.0,
        "judge": None,
        "error": None,
    }


def test_totals_are_each_runs_then_their_mean_and_spread():
    records = [
        record("a", 1, 1.0, 1.0, 100),
        record("b", 1, 0.5, None, 300),
        record("u", 1, None, None, 50, stated=True),
        record("a", 2, 0.5, 1.0, 200),
        record("b", 2, 0.0, None, 100, distractors=1),
        record("u", 2, None, None, 50, stated=False),
    ]
    total = results.totals(records)
    assert total["tasks"] == 3 and total["runs"] == 2 and total["failed"] == 0
    assert total["fact_recall"] == 0.5  # run 1: 0.75, run 2: 0.25
    assert total["spread"]["fact_recall"] == 0.25
    assert total["tokens"] == 400  # run 1: 450, run 2: 350
    assert total["not_in_corpus_stated"] == 0.5
    assert total["distractors_used"] == 0.5
    data = results.suite_json("s", {"reporter": "m"}, records)
    assert set(data) == {"suite", "models", "tasks", "totals"} and len(data["tasks"]) == 6
    results.show(Console(file=open("/dev/null", "w")), data)


def test_in_a_pipe_the_tables_keep_every_cell_whole(tmp_path: Path):
    """Piped (`eval … | tee`), rich squeezed the 15 columns into 80 and cut
    task ids and numbers; each row is now on one line, whole."""
    records = [record("a-rather-long-task-identifier", 1, 0.6667, 0.5, 123_456)]
    out = tmp_path / "shown.txt"
    with out.open("w") as file:
        results.show(Console(file=file, width=80), results.suite_json("s", {}, records))
    row = next(line for line in out.read_text().splitlines() if "a-rather-long-task-identifier" in line)
    assert "0.67" in row and "123456" in row and "completed" in row


def test_compare_says_which_wins_task_by_task(tmp_path: Path):
    a = results.suite_json("s", {"reporter": "small"}, [record("t1", 1, 1.0, 1.0, 900), record("t2", 1, 0.5, 1.0, 10)])
    b = results.suite_json("s", {"reporter": "big"}, [record("t1", 1, 0.5, 1.0, 100), record("t2", 1, 0.5, 1.0, 5)])
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    console = Console(record=True, width=200)
    results.compare(console, tmp_path / "a.json", tmp_path / "b.json")
    text = console.export_text()
    rows = {line.split("│")[1].strip(): line.split("│")[-2].strip() for line in text.splitlines() if "│ t" in line}
    assert rows == {"t1": "A", "t2": "B"}  # t1: more facts; t2: same scores, fewer tokens
    assert "tasks won: A 1, B 1, ties 0; overall: A" in text
    assert "small" in text and "big" in text


def test_compare_refuses_a_file_that_is_not_a_result(tmp_path: Path):
    (tmp_path / "x.json").write_text('{"hello": 1}')
    with pytest.raises(CliError, match="not an eval result"):
        results.compare(Console(), tmp_path / "x.json", tmp_path / "x.json")


@pytest.mark.parametrize(
    "tasks, problem",
    [
        ([1], "task 1 is not an object"),
        ([{"x": 2}], "task 1 has no id"),
        ([{"id": "a", "fact_recall": "high"}], "task 1 (a): fact_recall is not a number"),
        ([{"id": "a", "tokens": [1]}], "task 1 (a): tokens is not a number"),
        ([{"id": "a", "run": "one"}], "task 1 (a): run is not a number"),
        ([{"id": "a", "judge": "great"}], "task 1 (a): judge is not an object"),
    ],
)
def test_compare_names_a_broken_task_record_in_one_line(tmp_path: Path, tasks: list, problem: str):
    """A hand-edited or foreign result file: one line naming the record, not a traceback."""
    (tmp_path / "x.json").write_text(json.dumps({"tasks": tasks}))
    good = results.suite_json("s", {}, [record("a", 1, 1.0, 1.0, 10)])
    (tmp_path / "good.json").write_text(json.dumps(good))
    with pytest.raises(CliError) as raised:
        results.compare(Console(file=open("/dev/null", "w")), tmp_path / "x.json", tmp_path / "good.json")
    assert str(raised.value) == f"{tmp_path / 'x.json'} is not an eval result (--json output): {problem}"


def test_time_waiting_on_the_providers_rate_limit_is_reported_apart():
    """Issue 30: each task's seconds spent waiting on the provider's rate
    limit are in its record and summed in the totals; older result files,
    which lack them, still load and add up."""
    waited = [dict(record("a", 1, 1.0, 1.0, 100), rate_limited_seconds=2.5), record("b", 1, 1.0, 1.0, 100)]
    data = results.suite_json("s", {"reporter": "m"}, waited)
    assert [t["rate_limited_seconds"] for t in data["tasks"]] == [2.5, None]
    assert data["totals"]["rate_limited_seconds"] == 2.5
