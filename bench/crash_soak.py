"""Crash soak: N research runs, each with its worker process SIGKILLed at a
random point and replaced by a new one; every run must complete with the
crawled fact and the computed value in its report, and no completed model
call, search or crawl may reach the scripted servers again.

    python -m bench.crash_soak --runs 20            # the issue's 20-kill soak
    python -m bench.crash_soak --runs 20 --seed 42  # repeat a sequence

Same machinery as ``tests/test_crash.py::test_kill_at_random_points`` (see
``testkit/crash.py``): a kill lands after the k-th model request of
the run (k in 1..7 of 8) plus 0-0.6 s, half of the runs wait for a plan
review sent by update. A dev server of its own is started (SQLite file in a
temporary folder) unless ``--address`` names one. Exit code 0 when all runs
pass.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from client.devserver import DevServer
from testkit.crash import plan_random_kill, random_kill_run


async def soak(address: str, folder: Path, runs: int, seed: int, parallel: int) -> int:
    rng = random.Random(seed)
    plans = [plan_random_kill(rng, i + 1) for i in range(runs)]
    limit = asyncio.Semaphore(parallel)
    began = time.monotonic()

    async def one(plan):
        async with limit:
            try:
                done = await random_kill_run(address, folder / f"run{plan.index}", plan)
            except Exception as err:  # a run that never finished is a failed run
                plan.problems = [f"{type(err).__name__}: {err}"]
                done = plan
            print(done.line(), flush=True)
            return done

    done = await asyncio.gather(*(one(p) for p in plans))
    failed = [p for p in done if p.problems]
    repeats = sum(1 for p in done for x in p.problems or [] if x.startswith("repeated: "))
    seconds = [p.seconds for p in done if not p.problems]
    print()
    print(
        f"seed {seed}: {runs - len(failed)}/{runs} runs completed after {runs} SIGKILLs; "
        f"{repeats} completed calls repeated; "
        f"{sum(1 for p in done if p.killed_during)} kills landed with an activity in flight"
    )
    if seconds:
        print(
            f"run time: median {statistics.median(seconds):.1f} s, max {max(seconds):.1f} s; "
            f"wall {time.monotonic() - began:.1f} s with {parallel} at a time"
        )
    print(f"logs: {folder}")
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--parallel", type=int, default=4, help="runs at a time")
    parser.add_argument("--address", help="an existing Temporal server (default: start a dev server)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"crash soak: {args.runs} runs, seed {seed}", flush=True)
    folder = Path(tempfile.mkdtemp(prefix="crash-soak-"))
    if args.address:
        code = asyncio.run(soak(args.address, folder, args.runs, seed, args.parallel))
    else:
        server = DevServer(db_file=folder / "temporal.db", log_file=folder / "server.log")
        with server:
            code = asyncio.run(soak(server.address, folder, args.runs, seed, args.parallel))
    sys.exit(code)


if __name__ == "__main__":
    main()
