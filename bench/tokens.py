"""6. Tokens sent to the model by the canonical run, on short and on 150 KB
pages, at a 32k and a 1M-token window: this checkout beside a DeerFlow-like
run of the same plan (bench/deerflow.py) and, with ``--before REV``, beside
the worker of another commit (bench/README.md)."""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

from bench.benchmarks import _row
from bench.deerflow import DeerFlowLike, facts_found
from bench.harness import REPO, BenchEnv, Latency
from bench.script import RESEARCH_STEPS, SHORT_PAGE, add_canonical_pages, canonical_fact

LONG_PAGE = 150_000  # characters of a long page, its fact 60 % in
WINDOWS = {"32k": "32000", "1M": "1000000"}
PAGES = {"short pages": SHORT_PAGE, "150 KB pages": LONG_PAGE}
TARGET = 0.5  # of DeerFlow's prompt tokens (issue 38)
_QUEUES = itertools.count()


async def bench_tokens(env: BenchEnv, before: str | None = None) -> dict:
    """6. Prompt tokens per canonical run, counted as a provider would (the
    largest count of cl100k and Qwen, testkit/tokenizers.py), with a
    researcher that searches, crawls the page it found (the page its step
    read) and answers, as DeerFlow's does; with simulated latency, so the
    step's passages come while it works. Every run must do its work (every
    page fact and the computed mean in the report)."""
    lat = Latency.simulated()
    env.canonical(lat)
    env.script.reads = True
    measured: dict[str, dict] = {}
    try:
        async with contextlib.AsyncExitStack() as stack:
            tree = await stack.enter_async_context(env.checkout(before)) if before else None
            for pages, size in PAGES.items():
                add_canonical_pages(env.pages, lat.crawl, size)
                deerflow = DeerFlowLike(env.script)
                found = facts_found(await deerflow.run())
                measured[f"DeerFlow-like, {pages}"] = {"prompt_tokens": deerflow.tokens(), "facts_found": found}
                for window, size_tokens in WINDOWS.items():
                    sides = [("this checkout", REPO)] + ([(f"before ({before})", tree)] if tree else [])
                    for name, checkout in sides:
                        measured[f"{name}, {pages}, {window}"] = await _one(env, name, checkout, size_tokens)
    finally:
        env.script.reads = False
        add_canonical_pages(env.pages, 0.0)
    return {"rows": _rows(measured, before), "details": {"before": before, **measured}}


async def _one(env: BenchEnv, name: str, checkout: Path, window: str) -> dict:
    queue = f"b6-{next(_QUEUES)}"
    async with env.worker_process(queue, checkout=checkout, extra_env={"DEEPRESEARCH_CONTEXT_WINDOW": window}):
        tokens_before, calls_before = env.llm.tokens_received, len(env.llm.requests)
        result = await env.run_plain(queue)
    report = result.get("final_report") or ""
    missing = [s for s in range(1, RESEARCH_STEPS + 1) if canonical_fact(s) not in report]
    if result.get("status") != "completed" or missing or "ALDOUS_MEAN=1074.0" not in report:
        raise AssertionError(f"{name}: the canonical run did not do its work ({result.get('status')}, {missing})")
    return {
        "prompt_tokens": env.llm.tokens_received - tokens_before,
        "model_calls": len(env.llm.requests) - calls_before,
        "facts_found": RESEARCH_STEPS,
        "usage": result.get("usage"),
    }


def _rows(measured: dict[str, dict], before: str | None) -> list[dict]:
    rows = []
    for pages in PAGES:
        deerflow = measured[f"DeerFlow-like, {pages}"]
        rows.append(_row(f"DeerFlow-like, {pages} (facts found {deerflow['facts_found']}/{RESEARCH_STEPS})",
                         deerflow["prompt_tokens"], "tokens"))  # fmt: skip
        for window in WINDOWS:
            for name in ["this checkout"] + ([f"before ({before})"] if before else []):
                tokens = measured[f"{name}, {pages}, {window}"]["prompt_tokens"]
                share = tokens / deerflow["prompt_tokens"]
                target, met = (f"<= {TARGET}", share <= TARGET) if name == "this checkout" else ("", None)
                rows.append(_row(f"{name}, {pages}, {window} window: tokens (/ DeerFlow-like)",
                                 f"{tokens} ({share:.2f}x)", "", target, met))  # fmt: skip
    return rows
