"""Per-user limits, kept by the runs themselves (workflows/owner_limits.py)
on the real dev server with a real worker: a user's run beyond their
concurrent runs waits until one ends, another user's does not; a run over
its owner's daily token budget writes the budget's partial report, and the
owner's next run that day waits for the next day."""

from __future__ import annotations

import asyncio
import json
import uuid

from testkit.runs import keep_history, polled, start, wait_for_phase
from workflows.models import RunStatus

QUESTION = "Tell me about Lantern Rock"


async def status(handle) -> RunStatus:
    return await handle.query("status", result_type=RunStatus)


def user(name: str) -> str:
    """A name no other test's runs have: the limits count an owner's runs on
    the whole server, and other tests leave runs of alice waiting there."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def test_a_users_runs_beyond_the_limit_wait_their_turn(temporal_client, task_queue, research_worker, script):
    alice, bob = user("alice"), user("bob")
    async with research_worker(DEEPRESEARCH_USER_MAX_RUNS="1"):
        first = await start(temporal_client, task_queue, QUESTION, owner=alice)
        await wait_for_phase(first, "awaiting_review")
        second = await start(temporal_client, task_queue, QUESTION, owner=alice, auto_accept_plan=True)
        held = await polled(lambda: status(second), lambda s: s.owner_wait is not None)
        assert held.phase == "coordinating" and held.owner_wait == (
            f"{alice} has 1 run(s) going and the limit is 1 per user: this run starts when one of them ends"
        )
        # Another user's run is not held by alice's.
        other = await start(temporal_client, task_queue, QUESTION, owner=bob, auto_accept_plan=True)
        assert (await asyncio.wait_for(other.result(), 90)).status == "completed"
        assert (await status(second)).owner_wait is not None  # still alice's turn to wait

        await first.execute_update("submit_review", {"feedback": "[ACCEPTED]", "by": alice}, result_type=str)
        assert (await asyncio.wait_for(first.result(), 90)).status == "completed"
        result = await asyncio.wait_for(second.result(), 120)  # looks again within 15 s of the first's end
        assert result.status == "completed" and not result.budget_exhausted
        assert (await status(second)).owner_wait is None
        await keep_history(second, "owner_limits_waited")


async def test_a_run_over_its_owners_daily_budget_stops_and_the_next_waits_for_tomorrow(
    temporal_client, task_queue, research_worker, script, llm
):
    dora = user("dora")
    async with research_worker(DEEPRESEARCH_USER_DAILY_TOKENS="1"):
        first = await start(temporal_client, task_queue, QUESTION, owner=dora, auto_accept_plan=True)
        result = await asyncio.wait_for(first.result(), 90)
        assert result.status == "completed" and result.budget_exhausted
        reporter = json.dumps(llm.calls("reporter")[0])  # told why the report is partial, as --token-budget does
        assert f"The research stopped early ({dora}'s daily token budget was reached)" in reporter
        assert not llm.calls("researcher")  # no research turn started past the budget

        second = await start(temporal_client, task_queue, QUESTION, owner=dora, auto_accept_plan=True)
        held = await polled(lambda: status(second), lambda s: s.owner_wait is not None)
        used = result.usage.prompt_tokens + result.usage.completion_tokens
        assert held.owner_wait.startswith(f"{dora} has used {used:,} tokens today and the limit is 1 per user a day")
        assert "this run starts after" in held.owner_wait and held.owner_wait.endswith("00:00 UTC")
        await second.cancel()
        assert (await asyncio.wait_for(second.result(), 90)).status == "cancelled"
