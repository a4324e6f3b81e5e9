"""8. Many runs on one provider account: ``FLEET_RUNS`` canonical runs (zero
simulated latency, 11 model calls each) started at once against a scripted
provider that serves ``FLEET_RATE`` requests a second to the whole account
(``testkit/account_limit.py``: a token bucket of one second's worth, HTTP 429
with ``Retry-After`` and ``retry-after-ms`` beyond it). Each variant has a
worker process of its own on a task queue of its own, one after the other on
the same dev server:

- ``before``: the baseline commit's worker (a git worktree): every model call
  retries its 429s within its 12 attempts;
- ``after, paced``: this checkout's worker with ``DEEPRESEARCH_MODEL_RPS`` set
  to the account's rate: the server paces the model queue, a 429 is waited out;
- ``after, unpaced``: this checkout's worker without it: only the waits and
  the worker's own back-off (activities/pacing.py).

Measured per variant: runs completed, wall time from the first start to the
last run's end over the limit's pace (served requests / rate: the least time
the account allows for them), and 429s per served request.
"""

from __future__ import annotations

import asyncio
import subprocess
import time

from bench.harness import REPO, BenchEnv, Latency
from bench.script import RESEARCH_STEPS, canonical_fact
from testkit.account_limit import AccountLimit
from workflows.models import ResearchResult

FLEET_BASELINE = "6fd0a66"  # the branch point of issue 30
FLEET_RUNS = 20
FLEET_RATE = 5.0


def _did_its_work(result: object) -> bool:
    if not isinstance(result, ResearchResult) or result.status != "completed":
        return False
    report = result.final_report
    return all(canonical_fact(s) in report for s in range(1, RESEARCH_STEPS + 1)) and "ALDOUS_MEAN=1074.0" in report


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
        "completed": sum(_did_its_work(o) for o in outcomes),
        "wall_seconds": round(wall, 2),
        "served": served,
        "refused_429": limited,
        "limit_pace_seconds": round(served / rate, 2),
        "wall_over_pace": round(wall / (served / rate), 3) if served else None,
        "429_per_served": round(limited / served, 3) if served else None,
        "waits_in_usage": sum(u.rate_limited for u in waits),
        "seconds_waited_in_usage": round(sum(u.rate_limited_seconds for u in waits), 1),
        "failures": failures[:5],
    }


async def bench_fleet(env: BenchEnv, runs: int = FLEET_RUNS, baseline: str = FLEET_BASELINE) -> dict:
    tree = env.root / "fleet-baseline"
    git = ["git", "-C", str(REPO)]
    subprocess.run([*git, "worktree", "add", "--detach", str(tree), baseline], check=True, capture_output=True)
    rate = FLEET_RATE
    paced = {"DEEPRESEARCH_MODEL_RPS": f"{rate:g}"}
    try:
        env.canonical(Latency())
        measured = [
            await _variant(env, f"before ({baseline})", "b7-before", runs, rate, checkout=tree),
            await _variant(env, "after, paced", "b7-paced", runs, rate, extra_env=paced),
            await _variant(env, "after, unpaced", "b7-unpaced", runs, rate),
        ]
    finally:
        env.llm.account = None
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], capture_output=True)
    rows = []
    for m in measured:
        name = m["variant"]
        done = m["completed"] == runs
        rows.append(_row(f"{name}: runs completed", f"{m['completed']}/{runs}", "", f"{runs}/{runs}", done))
        target = "<= 1.25" if name == "after, paced" else ""
        ratio = m["wall_over_pace"]
        rows.append(_row(f"{name}: wall / limit's pace", ratio, "", target, ratio <= 1.25 if target else None))
        target = "<= 0.25" if name == "after, paced" else ""
        per = m["429_per_served"]
        rows.append(_row(f"{name}: 429s per served request", per, "", target, per <= 0.25 if target else None))
    return {"rows": rows, "details": {"rate": rate, "runs": runs, "variants": measured}}


def _row(metric: str, value, unit: str = "", target: str = "", met: bool | None = None) -> dict:
    return {"metric": metric, "value": value, "unit": unit, "target": target, "met": met}
