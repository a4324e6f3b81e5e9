"""What ``deepresearch eval`` shows and writes: the table per task, the
totals (mean and spread over ``--runs``), the ``--json`` file (SPEC 3b) and
``--compare`` of two such files."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from client.errors import CliError

RATES = ("fact_recall", "evidence_recall", "citation_validity", "citation_support", "statement_support")
COSTS = ("tokens", "model_calls", "searches", "crawls", "seconds", "rate_limited_seconds")
JSON_FIELDS = (
    "id",
    "run",
    "run_id",
    "status",
    "fact_recall",
    "facts",
    "evidence_recall",
    "evidence_facts",
    "avoided",
    "distractors_used",
    "not_in_corpus_stated",
    "citations",
    "citation_validity",
    "citation_support",
    "statement_support",
    "tokens",
    "model_calls",
    "searches",
    "crawls",
    "seconds",
    "rate_limited_seconds",
    "judge",
    "error",
    "echo",
    "unscored",
    "warnings",
)


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def _spread(values: list[float]) -> float | None:
    return round(statistics.pstdev(values), 4) if len(values) > 1 else None


def run_totals(records: list[dict]) -> dict[str, Any]:
    """One run of the suite summed up: rates averaged over the tasks that
    have them, costs summed."""
    out: dict[str, Any] = {}
    for name in RATES:
        out[name] = _mean([r[name] for r in records if r.get(name) is not None])
    out["distractors_used"] = sum(r.get("distractors_used") or 0 for r in records)
    unanswerable = [r["not_in_corpus_stated"] for r in records if r.get("not_in_corpus_stated") is not None]
    out["not_in_corpus_stated"] = _mean([1.0 if v else 0.0 for v in unanswerable])
    for name in COSTS:
        out[name] = round(sum(r.get(name) or 0 for r in records), 3)
    out["judge"] = _mean([r["judge"]["overall"] for r in records if r.get("judge") and r["judge"].get("overall")])
    return out


def totals(records: list[dict]) -> dict[str, Any]:
    """The suite's totals: each run's, then their mean (and spread over runs)."""
    by_run: dict[int, list[dict]] = defaultdict(list)
    for record in records:
        by_run[record.get("run", 1)].append(record)
    runs = [run_totals(by_run[n]) for n in sorted(by_run)]
    out: dict[str, Any] = {
        "tasks": len({r["id"] for r in records}),
        "runs": len(runs),
        "completed": sum(1 for r in records if not r.get("error")),
        "failed": sum(1 for r in records if r.get("error")),
    }
    spread: dict[str, float | None] = {}
    for name in runs[0] if runs else ():
        values = [run[name] for run in runs if run[name] is not None]
        out[name] = values[0] if len(values) == 1 else _mean(values)
        spread[name] = _spread(values)
    if len(runs) > 1:
        out["spread"] = spread
    return out


def suite_json(suite: str, models: dict[str, str], records: list[dict]) -> dict[str, Any]:
    tasks = [{name: record.get(name) for name in JSON_FIELDS} for record in records]
    return {"suite": suite, "models": models, "tasks": tasks, "totals": totals(records)}


def write_json(path: Path, data: dict[str, Any]) -> None:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as err:
        raise CliError(f"cannot write {path}: {err.strerror or err}") from None


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _found(mapping: dict[str, bool]) -> str:
    return f"{sum(mapping.values())}/{len(mapping)}" if mapping else "-"


def task_table(records: list[dict]) -> Table:
    table = Table(title="Tasks", show_lines=False)
    for name in (
        "task",
        "run",
        "status",
        "recall",
        "facts",
        "shown",
        "avoided",
        "not in corpus",
        "cites valid",
        "support",
        "traced",
    ):
        table.add_column(name)
    for name in ("tokens", "calls", "searches", "crawls", "seconds", "judge"):
        table.add_column(name, justify="right")
    for r in records:
        judge = r.get("judge") or {}
        stated = r.get("not_in_corpus_stated")
        table.add_row(
            r["id"],
            str(r.get("run", 1)),
            r["status"] if not r.get("error") else f"failed: {r['error'][:60]}",
            _rate(r.get("fact_recall")),
            _found(r.get("facts") or {}),
            _rate(r.get("evidence_recall")),
            _found(r.get("avoided") or {}),
            "-" if stated is None else ("yes" if stated else "NO"),
            _rate(r.get("citation_validity")),
            _rate(r.get("citation_support")),
            _rate(r.get("statement_support")),
            str(r.get("tokens", 0)),
            str(r.get("model_calls", 0)),
            str(r.get("searches", 0)),
            str(r.get("crawls", 0)),
            f"{r.get('seconds', 0):.1f}",
            "-" if judge.get("overall") is None else f"{judge['overall']:.1f}",
        )
    return table


def totals_table(total: dict[str, Any]) -> Table:
    spread = total.get("spread") or {}
    table = Table(title=f"Totals ({total['tasks']} tasks, {total['runs']} run(s) each; mean ± spread over runs)")
    table.add_column("score")
    table.add_column("value", justify="right")
    for name in (*RATES, "not_in_corpus_stated", "judge", *COSTS):
        value = total.get(name)
        text = "-" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))
        if spread.get(name) is not None:
            text += f" ± {spread[name]:.2f}"
        table.add_row(name, text)
    table.add_row("distractors_used", str(total.get("distractors_used")))
    table.add_row("failed tasks", str(total.get("failed")))
    return table


def summary_table(records: list[dict]) -> Table:
    """With --runs N: each task's scores as mean ± spread over its runs."""
    grouped: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        grouped[record["id"]].append(record)
    table = Table(title="Per task, mean ± spread over runs")
    table.add_column("task")
    for name in (*RATES, "tokens", "seconds"):
        table.add_column(name, justify="right")
    for task, runs in grouped.items():
        cells = []
        for name in (*RATES, "tokens", "seconds"):
            values = [r[name] for r in runs if r.get(name) is not None]
            mean, spread = _mean(values), _spread(values)
            cells.append("-" if mean is None else f"{mean:.2f}" + (f" ± {spread:.2f}" if spread is not None else ""))
        table.add_row(task, *cells)
    return table


def show(console: Console, data: dict[str, Any]) -> None:
    put(console, task_table(data["tasks"]))
    if data["totals"].get("runs", 1) > 1:
        put(console, summary_table(data["tasks"]))
    put(console, totals_table(data["totals"]))


def put(console: Console, table: Table) -> None:
    """On a terminal, fitted to its width; in a pipe or a file, as wide as
    the table needs (rich would squeeze it to 80 columns, cutting cells)."""
    if console.is_terminal:
        console.print(table)
    else:
        natural = console.measure(table, options=console.options.update_width(1_000)).maximum
        width = console.width
        console.width = max(width, natural)  # print's own width= is capped at the console's
        try:
            console.print(table)
        finally:
            console.width = width


# --- --compare ----------------------------------------------------------------


def load_result(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CliError(f"{path} is not an eval result (--json output): {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise CliError(f"{path} is not an eval result (--json output): no task list")
    for number, record in enumerate(data["tasks"], 1):
        if (problem := _record_problem(record)) is not None:
            raise CliError(f"{path} is not an eval result (--json output): task {number}{problem}")
    return data


NUMBERS = ("run", *RATES, "distractors_used", *COSTS)


def _record_problem(record: Any) -> str | None:
    """What makes one task record of a result file unusable (said after "task N"), if anything."""
    if not isinstance(record, dict):
        return " is not an object"
    if not isinstance(record.get("id"), str):
        return " has no id"
    named = f" ({record['id']}): "
    for name in NUMBERS:
        if record.get(name) is not None and not isinstance(record[name], int | float):
            return f"{named}{name} is not a number"
    judge = record.get("judge")
    if judge is not None and not isinstance(judge, dict):
        return f"{named}judge is not an object"
    if judge and judge.get("overall") is not None and not isinstance(judge["overall"], int | float):
        return f"{named}judge.overall is not a number"
    return None


def _per_task(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    grouped: dict[str, list[dict]] = defaultdict(list)
    for record in data["tasks"]:
        if isinstance(record, dict) and "id" in record:
            grouped[str(record["id"])].append(record)
    return {task: run_totals(records) for task, records in grouped.items()}


def _key(scores: dict[str, Any]) -> tuple:
    """Better is: more facts, better supported, fewer distractors, cheaper."""
    return (
        scores.get("fact_recall") or 0,
        scores.get("not_in_corpus_stated") or 0,
        scores.get("citation_support") or 0,
        -(scores.get("distractors_used") or 0),
        scores.get("citation_validity") or 0,
        -(scores.get("tokens") or 0),
    )


def winner(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    if a is None or b is None:
        return "-"
    return "A" if _key(a) > _key(b) else "B" if _key(b) > _key(a) else "tie"


def compare(console: Console, path_a: Path, path_b: Path) -> None:
    a, b = load_result(path_a), load_result(path_b)
    tasks_a, tasks_b = _per_task(a), _per_task(b)
    table = Table(title=f"A: {path_a} ({_models(a)})  vs  B: {path_b} ({_models(b)})")
    for name in ("task", "recall A", "recall B", "support A", "support B", "distr. A", "distr. B"):
        table.add_column(name)
    table.add_column("tokens A", justify="right")
    table.add_column("tokens B", justify="right")
    table.add_column("wins")
    wins = {"A": 0, "B": 0, "tie": 0, "-": 0}
    for task in list(tasks_a) + [t for t in tasks_b if t not in tasks_a]:
        ta, tb = tasks_a.get(task), tasks_b.get(task)
        won = winner(ta, tb)
        wins[won] += 1
        cell = lambda scores, name: "-" if scores is None else _rate(scores.get(name))  # noqa: E731
        table.add_row(
            task,
            cell(ta, "fact_recall"),
            cell(tb, "fact_recall"),
            cell(ta, "citation_support"),
            cell(tb, "citation_support"),
            "-" if ta is None else str(ta["distractors_used"]),
            "-" if tb is None else str(tb["distractors_used"]),
            "-" if ta is None else str(int(ta["tokens"])),
            "-" if tb is None else str(int(tb["tokens"])),
            won,
        )
    overall = winner(totals(a["tasks"]), totals(b["tasks"]))
    put(console, table)
    verdict = {"A": f"A ({path_a}) wins", "B": f"B ({path_b}) wins", "tie": "a tie"}.get(overall, "no verdict")
    console.print(
        f"tasks won: A {wins['A']}, B {wins['B']}, ties {wins['tie']}; overall: {verdict} "
        "(by fact recall, then unanswerable tasks, citation support, distractors, citation validity, tokens)",
        markup=False,
    )


def _models(data: dict[str, Any]) -> str:
    models = data.get("models") or {}
    names = sorted({str(v) for v in models.values()}) if isinstance(models, dict) else []
    return ", ".join(names) or "models unknown"
