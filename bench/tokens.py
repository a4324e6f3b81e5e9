"""6. Tokens sent to the model by the canonical run, on short and on 150 KB
pages, this checkout against a baseline commit (bench/README.md)."""

from __future__ import annotations

import subprocess

from bench.benchmarks import _row
from bench.harness import REPO, BenchEnv, Latency
from bench.script import RESEARCH_STEPS, canonical_fact

# The landed main before every research step gathered its own evidence (the
# "today" of the evidence work's targets, bench/README.md).
TOKENS_BASELINE = "c88edfb"
LONG_PAGE = 150_000  # characters of a long page, its fact 60 % in
LONG_WINDOW = "1000000"  # the context window assumed for gpt-4.1-mini
IGNORED = "this checkout, short pages, a researcher that ignores the evidence"


async def bench_tokens(env: BenchEnv, baseline: str = TOKENS_BASELINE) -> dict:
    """6. Tokens sent to the model by the canonical run, counted as a provider
    would (the largest count of cl100k and Qwen, testkit/tokenizers.py): on
    short pages and on 150 KB pages at a 1,000,000-token window, with this
    checkout's worker and a baseline commit's (a git worktree), all four on
    the same scripted servers."""
    from bench.script import SHORT_PAGE, add_canonical_pages

    tree = env.root / "baseline"
    git = ["git", "-C", str(REPO)]
    subprocess.run([*git, "worktree", "add", "--detach", str(tree), baseline], check=True, capture_output=True)
    measured: dict[str, dict] = {}
    try:
        env.canonical(Latency())
        for pages, size in (("short pages", SHORT_PAGE), ("150 KB pages", LONG_PAGE)):
            add_canonical_pages(env.pages, 0.0, size)
            for name, checkout in (("baseline", tree), ("this checkout", REPO)):
                queue = f"b6-{len(measured)}"
                async with env.worker_process(
                    queue, checkout=checkout, extra_env={"DEEPRESEARCH_CONTEXT_WINDOW": LONG_WINDOW}
                ):
                    measured[f"{name}, {pages}"] = await _tokens_of_one_run(env, queue, name)
        # For comparison: a researcher that ignores what it was given (searches twice, crawls, answers).
        add_canonical_pages(env.pages, 0.0, SHORT_PAGE)
        env.script.uses_evidence = False
        async with env.worker_process("b6-ignores", extra_env={"DEEPRESEARCH_CONTEXT_WINDOW": LONG_WINDOW}):
            measured[IGNORED] = await _tokens_of_one_run(env, "b6-ignores", IGNORED)
    finally:
        env.script.uses_evidence = True
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], capture_output=True)
        add_canonical_pages(env.pages, 0.0)
    tokens = {name: m["prompt_tokens"] for name, m in measured.items()}
    short = tokens["this checkout, short pages"] / tokens["baseline, short pages"]
    long_now = tokens["this checkout, 150 KB pages"] / tokens["this checkout, short pages"]
    long_before = tokens["baseline, 150 KB pages"] / tokens["baseline, short pages"]
    rows = [_row(f"prompt tokens per canonical run, {name}", value, "tokens") for name, value in tokens.items()]
    rows.append(_row(f"{IGNORED} / baseline", tokens[IGNORED] / tokens["baseline, short pages"], ""))
    rows += [
        _row(f"short pages: this checkout / baseline {baseline}", short, "", "<= 1.2", short <= 1.2),
        _row("150 KB pages / short pages, this checkout", long_now, "", "<= 3", long_now <= 3),
        _row(f"150 KB pages / short pages, baseline {baseline}", long_before, ""),
    ]
    return {"rows": rows, "details": {"baseline": baseline, "window": int(LONG_WINDOW), **measured}}


async def _tokens_of_one_run(env: BenchEnv, queue: str, name: str) -> dict:
    tokens_before, calls_before = env.llm.tokens_received, len(env.llm.requests)
    result = await env.run_plain(queue)
    report = result.get("final_report") or ""
    missing = [s for s in range(1, RESEARCH_STEPS + 1) if canonical_fact(s) not in report]
    if result.get("status") != "completed" or missing or "ALDOUS_MEAN=1074.0" not in report:
        raise AssertionError(f"{name}: the canonical run did not do its work ({result.get('status')}, {missing})")
    return {
        "prompt_tokens": env.llm.tokens_received - tokens_before,
        "model_calls": len(env.llm.requests) - calls_before,
        "usage": result.get("usage"),
    }
