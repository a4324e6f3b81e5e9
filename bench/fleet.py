"""8. Many runs on one provider account: for each account (``FLEET``: 20 runs
on an account of 5 requests a second, 30 on one of 1), that many canonical
runs (zero simulated latency, 11 model calls each) started at once against a
scripted provider that serves the account's rate to the whole account
(``testkit/account_limit.py``: a token bucket of one second's worth, HTTP 429
with ``Retry-After`` and ``retry-after-ms`` beyond it). Each variant has a
worker process of its own, one after the other on the same dev server:

- ``before``: the baseline commit's worker (a git worktree) with
  ``DEEPRESEARCH_MODEL_RPS`` unset: 429s are waited out, each worker backs
  off on its own (concurrency and pauses);
- ``after``: this checkout's worker with ``DEEPRESEARCH_MODEL_RPS`` unset: the
  pace is learnt from the 429s and set as the model queue's rate limit on the
  server (activities/learnt_pace.py);
- ``after, next fleet``: as many runs again, on the same queue, with a new
  worker process: what the first fleet learnt is kept;
- ``after, paced``: this checkout's worker with ``DEEPRESEARCH_MODEL_RPS`` set
  to the account's rate (the first account only).

Measured per variant: runs completed, wall time from the first start to the
last run's end over the limit's pace (served requests / rate: the least time
the account allows for them), 429s per served request, and the model
queue's rate limit on the server afterwards.
"""

from __future__ import annotations

import asyncio
import subprocess
import time

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from bench.harness import REPO, BenchEnv, Latency
from bench.script import RESEARCH_STEPS, canonical_fact
from testkit.account_limit import AccountLimit
from workflows.models import ResearchResult
from workflows.rate_limits import model_queue

FLEET_BASELINE = "f1bc66b"  # the branch point of issue 36: the pace was not learnt
FLEET = "20@5,30@1"  # runs@requests a second of the account
VARIANTS = ("before", "after", "next", "paced")


def parse_fleet(spec: str) -> list[tuple[int, float]]:
    """``"20@5,30@1"`` as [(20, 5.0), (30, 1.0)]."""
    accounts = []
    for part in spec.split(","):
        runs, _, rate = part.strip().partition("@")
        accounts.append((int(runs), float(rate)))
    return accounts


def _did_its_work(result: object) -> bool:
    if not isinstance(result, ResearchResult) or result.status != "completed":
        return False
    report = result.final_report
    return all(canonical_fact(s) in report for s in range(1, RESEARCH_STEPS + 1)) and "ALDOUS_MEAN=1074.0" in report


async def _queue_limit(env: BenchEnv, task_queue: str) -> float | None:
    """The model queue's rate limit set through the server's API, if any."""
    assert env.client is not None
    described = await env.client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=env.client.namespace,
            task_queue=TaskQueue(name=model_queue(task_queue)),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            report_config=True,
        )
    )
    limit = described.config.queue_rate_limit
    return round(limit.rate_limit.requests_per_second, 3) if limit.HasField("rate_limit") else None


async def _variant(env: BenchEnv, name: str, task_queue: str, runs: int, rate: float, **worker) -> dict:
    env.llm.account = AccountLimit(rate)
    first = len(env.llm.requests)
    async with env.worker_process(task_queue, **worker):
        begin = time.perf_counter()
        handles = await asyncio.gather(*(env.start(task_queue) for _ in range(runs)))
        outcomes = await asyncio.gather(*(h.result() for h in handles), return_exceptions=True)
        wall = time.perf_counter() - begin
    statuses = [r["_status"] for r in env.llm.requests[first:]]
    served, limited = statuses.count(200), statuses.count(429)
    failures = sorted({str(getattr(o, "cause", None) or o)[:200] for o in outcomes if isinstance(o, BaseException)})
    waits = [o.usage for o in outcomes if isinstance(o, ResearchResult)]
    return {
        "variant": name,
        "runs": runs,
        "rate": rate,
        "completed": sum(_did_its_work(o) for o in outcomes),
        "wall_seconds": round(wall, 2),
        "served": served,
        "refused_429": limited,
        "limit_pace_seconds": round(served / rate, 2),
        "wall_over_pace": round(wall / (served / rate), 3) if served else None,
        "429_per_served": round(limited / served, 3) if served else None,
        "waits_in_usage": sum(u.rate_limited for u in waits),
        "seconds_waited_in_usage": round(sum(u.rate_limited_seconds for u in waits), 1),
        "queue_limit_after": await _queue_limit(env, task_queue),
        "failures": failures[:5],
    }


async def _account(env: BenchEnv, n: int, runs: int, rate: float, tree, variants) -> list[dict]:
    label = f"{runs} runs at {rate:g}/s"
    measured = []
    if "before" in variants:
        before = f"{label}, before ({FLEET_BASELINE})"
        measured.append(await _variant(env, before, f"b8-{n}-before", runs, rate, checkout=tree))
    if "after" in variants or "next" in variants:
        measured.append(await _variant(env, f"{label}, after", f"b8-{n}-after", runs, rate))
    if "next" in variants:  # a new worker process on the same queue: the pace learnt is kept
        measured.append(await _variant(env, f"{label}, after, next fleet", f"b8-{n}-after", runs, rate))
    if "paced" in variants and n == 0:
        paced = {"DEEPRESEARCH_MODEL_RPS": f"{rate:g}"}
        name = f"{label}, after, DEEPRESEARCH_MODEL_RPS={rate:g}"
        measured.append(await _variant(env, name, f"b8-{n}-paced", runs, rate, extra_env=paced))
    return measured


async def bench_fleet(
    env: BenchEnv, fleet: str = FLEET, variants: tuple[str, ...] = VARIANTS, baseline: str = FLEET_BASELINE
) -> dict:
    tree = env.root / "fleet-baseline"
    git = ["git", "-C", str(REPO)]
    if "before" in variants:
        subprocess.run([*git, "worktree", "add", "--detach", str(tree), baseline], check=True, capture_output=True)
    measured: list[dict] = []
    try:
        env.canonical(Latency())
        for n, (runs, rate) in enumerate(parse_fleet(fleet)):
            measured += await _account(env, n, runs, rate, tree, variants)
    finally:
        env.llm.account = None
        if "before" in variants:
            subprocess.run([*git, "worktree", "remove", "--force", str(tree)], capture_output=True)
    rows = []
    for m in measured:
        name, runs = m["variant"], m["runs"]
        rows.append(_row(f"{name}: runs completed", f"{m['completed']}/{runs}", "", f"{runs}/{runs}", None))
        rows[-1]["met"] = m["completed"] == runs
        paced = "DEEPRESEARCH_MODEL_RPS" in name
        ratio = m["wall_over_pace"]
        rows.append(_row(f"{name}: wall / limit's pace", ratio, "", "<= 1.25" if paced else "", None))
        rows[-1]["met"] = ratio is not None and ratio <= 1.25 if paced else None
        target = "" if "before" in name else "<= 0.25"
        per = m["429_per_served"]
        rows.append(_row(f"{name}: 429s per served request", per, "", target, None))
        rows[-1]["met"] = per is not None and per <= 0.25 if target else None
        if m["queue_limit_after"] is not None:
            rows.append(_row(f"{name}: model queue's rate limit after", m["queue_limit_after"], "/s"))
    return {"rows": rows, "details": {"fleet": fleet, "baseline": baseline, "variants": measured}}


def _row(metric: str, value, unit: str = "", target: str = "", met: bool | None = None) -> dict:
    return {"metric": metric, "value": value, "unit": unit, "target": target, "met": met}
