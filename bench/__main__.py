"""Run the benchmarks:

    python -m bench                 # all nine (about 10 minutes)
    python -m bench --only 1,4      # a selection
    python -m bench --quick         # fewer repetitions

Prints a table and writes JSON to bench/results/latest.json.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import os
import platform
import shlex
import sys
import time
from pathlib import Path

from bench.benchmarks import bench_cli, bench_history, bench_overhead, bench_parallel
from bench.concurrent import bench_concurrent
from bench.fleet import FLEET, VARIANTS, bench_fleet
from bench.harness import BenchEnv
from bench.recheck import bench_recheck
from bench.retrieval import bench_retrieval
from bench.tokens import bench_tokens

RESULTS = Path(__file__).resolve().parent / "results"
TITLES = {
    "1": "canonical run: parallel vs sequential",
    "2": "orchestration overhead per activity",
    "3": "concurrent runs on one worker",
    "4": "history size",
    "5": "command-line response time",
    "6": "tokens sent per canonical run",
    "7": "keeping a topic current: an unchanged world",
    "8": "many runs on one rate-limited provider account",
    "9": "what a research step's own reading finds (no model)",
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Benchmarks of the research workflow.")
    parser.add_argument("--only", default="1,2,3,4,5,6,7,8,9", help="comma-separated benchmark numbers (default: all)")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--runs", type=int, help="repetitions per mode for benchmarks 1 and 2")
    parser.add_argument("--cli-repeats", type=int, help="timed runs of each command in benchmark 5 (default 7)")
    parser.add_argument("--concurrent", type=int, default=50, help="runs started at once in benchmark 3")
    parser.add_argument(
        "--before",
        metavar="REV",
        help="benchmarks 1, 3 and 6 also run a worker of commit REV (a git worktree), beside this checkout's",
    )
    parser.add_argument("--long-pages", action="store_true", help="benchmark 3: pages of 150 KB (default: 3 KB)")
    parser.add_argument(
        "--pages-per-search", type=int, default=1, metavar="N", help="benchmark 3: pages each search finds (default 1)"
    )
    parser.add_argument(
        "--fleet",
        default=FLEET,
        help=f"benchmark 8's accounts: runs started at once @ requests a second (default {FLEET})",
    )
    parser.add_argument(
        "--fleet-variants",
        default=",".join(VARIANTS),
        help=f"benchmark 8's variants (default {','.join(VARIANTS)})",
    )
    parser.add_argument("--output", type=Path, default=RESULTS / "latest.json", help="JSON file to write")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (server db, logs, blobs)")
    parser.add_argument(
        "--server-args",
        default="",
        help="extra arguments for the dev server, e.g. '--sqlite-pragma journal_mode=wal' (what-if runs)",
    )
    args = parser.parse_args(argv)
    args.only = sorted({part.strip() for part in args.only.split(",") if part.strip()})
    unknown = [n for n in args.only if n not in TITLES]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(TITLES)}")
    return args


async def run(args: argparse.Namespace) -> dict:
    runs1 = args.runs or (1 if args.quick else 2)
    runs2 = args.runs or (2 if args.quick else 5)
    repeats5 = args.cli_repeats or (3 if args.quick else 7)
    results: dict[str, dict] = {}
    async with BenchEnv(keep=args.keep, server_args=tuple(shlex.split(args.server_args))) as env:
        args.server_command = " ".join(env.server.command())
        if args.keep:
            print(f"temp dir: {env.root}", file=sys.stderr)
        for number in args.only:
            print(f"[{number}] {TITLES[number]} ...", file=sys.stderr, flush=True)
            begin = time.perf_counter()
            if number == "1":
                out = await bench_parallel(env, runs1, args.before)
            elif number == "2":
                out = await bench_overhead(env, runs2)
            elif number == "3":
                out = await bench_concurrent(env, args.concurrent, args.before, args.long_pages, args.pages_per_search)
            elif number == "5":
                out = await bench_cli(env, repeats5)
            elif number == "6":
                out = await bench_tokens(env, args.before)
            elif number == "7":
                out = await bench_recheck(env)
            elif number == "8":
                out = await bench_fleet(env, args.fleet, tuple(args.fleet_variants.split(",")))
            elif number == "9":
                out = await asyncio.to_thread(bench_retrieval)
            else:
                out = await bench_history(env)
            out["seconds"] = round(time.perf_counter() - begin, 1)
            results[number] = out
            print(f"[{number}] done in {out['seconds']} s", file=sys.stderr, flush=True)
    return results


def table(results: dict[str, dict]) -> str:
    header = ("#", "metric", "value", "target", "met")
    lines = [header]
    for number, out in results.items():
        for row in out["rows"]:
            value = f"{row['value']} {row['unit']}".strip()
            met = "" if row["met"] is None else ("yes" if row["met"] else "NO")
            lines.append((number, row["metric"], value, row["target"], met))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    fmt = lambda line: "| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths)) + " |"  # noqa: E731
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([fmt(lines[0]), rule] + [fmt(line) for line in lines[1:]])


def git_state() -> dict:
    """The commit measured, and whether files outside bench/ differed from it."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args],
                cwd=Path(__file__).resolve().parent.parent,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.rstrip("\n")
        except (OSError, subprocess.SubprocessError):
            return ""

    changed = [line[3:] for line in git("status", "--porcelain").splitlines() if not line[3:].startswith("bench/")]
    return {"commit": git("rev-parse", "--short", "HEAD").strip(), "uncommitted_files_outside_bench": changed}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    started = dt.datetime.now(dt.UTC)
    load_start = [round(x, 2) for x in os.getloadavg()]
    begin = time.perf_counter()
    try:
        results = asyncio.run(run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        os._exit(130)
    except Exception:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)  # sdk-python #300: skip interpreter teardown of the client
    print(table(results))
    document = {
        "date": started.isoformat(timespec="seconds"),
        "command": "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            # Other work on the machine skews timings; the load is recorded.
            "load_average_at_start": load_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "code": git_state(),
        "dev_server": args.server_command.replace(sys.prefix, "<venv>"),
        "wall_seconds": round(time.perf_counter() - begin, 1),
        "benchmarks": {n: {"title": TITLES[n], **out} for n, out in results.items()},
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    sys.stdout.flush()
    os._exit(0)  # sdk-python #300: skip interpreter teardown of the client


if __name__ == "__main__":
    main()
