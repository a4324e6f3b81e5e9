"""3. Concurrent runs on one worker process: wall time over one run's, and
the worker's peak memory; with ``--before REV`` a worker of that commit runs
the same burst in the same bench run; with ``--long-pages`` the pages are
150 KB, and with ``--pages-per-search N`` every search finds N of them
(what a fleet reading long pages costs)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
from pathlib import Path

from bench.benchmarks import _row, check_canonical
from bench.harness import REPO, BenchEnv, Latency
from bench.history import activity_spans, body_by_kind, percentile

LONG_PAGE = 150_000
WALL_TARGET = 10.0  # 20 runs: total / one run (issue 38)
MEMORY_TARGET = 450.0  # MB, the worker's peak (issue 38)


def _rss_kb(pid: int, field: str = "VmRSS") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc/<pid>/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_rss_kb(root: int) -> int:
    """RSS of ``root`` and all its descendants (the sandbox sessions)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += _rss_kb(pid)
        todo += children.get(pid, [])
    return total


async def bench_concurrent(
    env: BenchEnv, count: int, before: str | None = None, long_pages: bool = False, per_search: int = 1
) -> dict:
    """3. ``count`` concurrent canonical runs on one worker process (this
    checkout's, then, with ``before``, that commit's)."""
    size, results = env.page_size, env.script.results
    env.page_size, env.script.results = (LONG_PAGE if long_pages else size), per_search
    measured: dict[str, dict] = {}
    try:
        async with contextlib.AsyncExitStack() as stack:
            sides = {"this checkout": REPO}
            if before:
                sides[f"before ({before})"] = await stack.enter_async_context(env.checkout(before))
            for n, (name, checkout) in enumerate(sides.items()):
                measured[name] = await _burst(env, f"b3-{n}", checkout, count, exact=per_search == 1 and not long_pages)
    finally:
        env.page_size, env.script.results = size, results
    rows = []
    for name, m in measured.items():
        mine = name == "this checkout"
        prefix = "" if mine else f"{name}: "
        ratio, hwm = m["ratio"], m["worker_peak_rss_mb_vmhwm"]
        rows += [
            _row(f"{prefix}one run (same worker)", m["single_run_wall_s"], "s"),
            _row(f"{prefix}runs that did their work", f"{m['runs_that_did_their_work']}/{count}", "", f"{count}/{count}" if mine else "", m["runs_that_did_their_work"] == count if mine else None),
            _row(f"{prefix}{count} concurrent runs, total", m["total_wall_s"], "s"),
            _row(f"{prefix}total / one run", ratio, "x", f"<= {WALL_TARGET:g}" if mine else "", ratio <= WALL_TARGET if mine else None),
            _row(f"{prefix}worker peak RSS (VmHWM)", hwm, "MB", f"< {MEMORY_TARGET:g}" if mine else "", hwm < MEMORY_TARGET if mine else None),
            _row(f"{prefix}worker + sandbox processes peak RSS", m["worker_plus_sandboxes_peak_rss_mb_sampled"], "MB"),
            _row(f"{prefix}worker CPU during the burst", m["cpu_seconds_during_burst"]["worker"], "s"),
        ]  # fmt: skip
    details = {"page_chars": LONG_PAGE if long_pages else size, "pages_per_search": per_search, **measured}
    return {"rows": rows, "details": details}


async def _burst(env: BenchEnv, queue: str, checkout: Path, count: int, exact: bool) -> dict:
    lat = Latency.simulated()
    async with env.worker_process(queue, max_concurrent_activities=300, checkout=checkout) as pid:
        env.canonical(Latency())
        check_canonical(await env.run(queue), latency=False, counts=exact)  # warm-up
        env.canonical(lat)
        single = await env.run(queue)
        check_canonical(single, counts=exact)
        peak = {"worker": 0, "tree": 0}
        done = asyncio.Event()

        async def sample() -> None:
            while not done.is_set():
                peak["worker"] = max(peak["worker"], _rss_kb(pid))
                peak["tree"] = max(peak["tree"], await asyncio.to_thread(_tree_rss_kb, pid))
                await asyncio.sleep(0.25)

        sampler = asyncio.create_task(sample())
        server_pid = env.server.process.pid if env.server.process else 0
        cpu_before = (_cpu_seconds(pid), _cpu_seconds(server_pid), time.process_time())
        load = os.getloadavg()
        begin = time.perf_counter()
        records = await asyncio.gather(*(env.run(queue) for _ in range(count)))
        total = time.perf_counter() - begin
        cpu_after = (_cpu_seconds(pid), _cpu_seconds(server_pid), time.process_time())
        done.set()
        await sampler
        hwm_kb = _rss_kb(pid, "VmHWM")
    cpu = [round(after - before, 1) for before, after in zip(cpu_before, cpu_after)]
    failed = []
    for record in records:
        try:
            check_canonical(record, latency=False, counts=exact)  # (at once, a step's passages may come late)
        except AssertionError as err:  # what it found instead, for diagnosis
            found = record.result
            failed.append({"error": str(err), "status": found.status, "warnings": found.warnings,
                           "usage": found.usage.model_dump(), "observations": [o[:300] for o in found.observations],
                           "report": found.final_report[:600]})  # fmt: skip
    # Where the time went: orchestration gaps and activity bodies over all runs.
    spans = [s for r in records for s in activity_spans(await r.handle.fetch_history())]
    gaps = [s.orchestration for s in spans]
    walls = [r.wall for r in records]
    return {
        "runs": count,
        "runs_that_did_their_work": count - len(failed),
        "runs_that_did_not": failed,
        "max_concurrent_activities": 300,
        "load_average_at_start": [round(x, 2) for x in load],
        "single_run_wall_s": round(single.wall, 3),
        "total_wall_s": round(total, 3),
        "ratio": round(total / single.wall, 4),
        "run_wall_s": {
            "min": round(min(walls), 3),
            "median": round(statistics.median(walls), 3),
            "max": round(max(walls), 3),
        },
        "worker_peak_rss_mb_vmhwm": round(hwm_kb / 1024, 1),
        "worker_peak_rss_mb_sampled": round(peak["worker"] / 1024, 1),
        "worker_plus_sandboxes_peak_rss_mb_sampled": round(peak["tree"] / 1024, 1),
        # CPU seconds used during the burst (user + system); a Python worker
        # cannot use more than about one core for its own code (the GIL).
        "cpu_seconds_during_burst": {"worker": cpu[0], "dev_server": cpu[1], "bench_process": cpu[2]},
        "cpus": os.cpu_count(),
        "orchestration_gap_ms": {
            "median": round(statistics.median(gaps) * 1000, 1),
            "p90": round(percentile(gaps, 0.9) * 1000, 1),
            "max": round(max(gaps) * 1000, 1),
        },
        "activity_body_by_type": body_by_kind(spans),
        "activities_retried": sum(s.attempt > 1 for s in spans),
    }
