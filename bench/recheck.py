"""7. What keeping a topic current costs (issue 29): the canonical run, then
a run that builds on it with ``recheck`` (as every scheduled run does) while
no page changed, then one after a page changed. Prompt tokens as the scripted
provider counts them (testkit/tokenizers.py), model calls, and the re-check's
own work (pages read again, searches run again)."""

from __future__ import annotations

from bench.harness import BenchEnv, Latency, RunRecord
from bench.script import RESEARCH_STEPS, _filler, canonical_fact
from testkit.pages import article

TARGET = 0.25  # an unchanged world: at most a quarter of a first run's prompt tokens
CHANGED_FACT = "FACT: step 2 found that the Aldous index rose to 1999 points"


async def _measured(env: BenchEnv, task_queue: str, **options) -> tuple[RunRecord, int, int]:
    tokens, calls = env.llm.tokens_received, len(env.llm.requests)
    run = await env.run(task_queue, **options)
    return run, env.llm.tokens_received - tokens, len(env.llm.requests) - calls


async def bench_recheck(env: BenchEnv) -> dict:
    async with env.worker("b7"):
        env.canonical(Latency())
        first, first_tokens, first_calls = await _measured(env, "b7")
        missing = [s for s in range(1, RESEARCH_STEPS + 1) if canonical_fact(s) not in first.result.final_report]
        if missing:
            raise AssertionError(f"the first run lacks the facts of steps {missing}")

        same, same_tokens, same_calls = await _measured(env, "b7", continue_from=first.workflow_id, recheck=True)
        found = same.result.recheck
        if found is None or found.changed or "Nothing changed" not in same.result.final_report:
            raise AssertionError(f"the unchanged re-check did not say nothing changed: {found}")

        body = _filler(2, 3000)
        body.insert(2, CHANGED_FACT + ".")
        env.pages.add("/step2", article("Aldous index, part 2", body))
        changed, changed_tokens, changed_calls = await _measured(
            env, "b7", continue_from=same.workflow_id, recheck=True
        )
        report = changed.result.final_report
        if "1074 → 1999" not in report:  # step 2's figure: 1000 + 37 * 2 became 1999
            raise AssertionError("the changed re-check did not list the old and new figure")
    ratio = same_tokens / first_tokens
    details = {
        "first_run": {
            "prompt_tokens": first_tokens,
            "model_calls": first_calls,
            "usage": first.result.usage.model_dump(),
        },
        "unchanged": {
            "prompt_tokens": same_tokens,
            "model_calls": same_calls,
            "usage": same.result.usage.model_dump(),
            "recheck": found.model_dump(),
            "wall_seconds": round(same.wall, 2),
        },
        "changed": {
            "prompt_tokens": changed_tokens,
            "model_calls": changed_calls,
            "usage": changed.result.usage.model_dump(),
            "recheck": changed.result.recheck.model_dump() if changed.result.recheck else None,
        },
    }
    rows = [
        {"metric": "first (canonical) run: prompt tokens / model calls", "value": f"{first_tokens} / {first_calls}",
         "unit": "", "target": "", "met": None},
        {"metric": "unchanged world, re-checked: prompt tokens / model calls", "value": f"{same_tokens} / {same_calls}",
         "unit": "", "target": "", "met": None},
        {"metric": "unchanged re-check / first run (prompt tokens)", "value": round(ratio, 3), "unit": "",
         "target": f"<= {TARGET}", "met": ratio <= TARGET},
        {"metric": "unchanged re-check: pages read again / searches run again",
         "value": f"{found.pages} / {found.searches}", "unit": "", "target": "", "met": None},
        {"metric": "one page changed, re-checked: prompt tokens / model calls",
         "value": f"{changed_tokens} / {changed_calls}", "unit": "", "target": "", "met": None},
    ]  # fmt: skip
    return {"rows": rows, "details": details}
