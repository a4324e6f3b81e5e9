"""Every research step reads before its first model turn, whatever the model
does (workflows/evidence.py), end to end on the dev server with the real
worker, crawler and scripted model and search servers."""

from __future__ import annotations

import random
import re

import pytest

from testkit.llm_server import prompt_tokens
from testkit.pages import article
from testkit.research_script import FACT, plan_json
from testkit.research_script import first_user as first_user_text
from testkit.runs import finished, keep_history, start

QUESTION = "Tell me about Lantern Rock"
WORDS = (
    "harbour survey tide ledger cargo vessel northern coastal archive weather storm signal beacon record voyage "
    "merchant timber grain salt copper island channel reef inspection season annual register clerk customs quay"
).split()


def filler(seed: int, size: int) -> list[str]:
    """Paragraphs of prose that share no word with the step or the fact."""
    rng = random.Random(seed)
    out, total = [], 0
    while total < size:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 90)))
        out.append(sentence.capitalize() + ".")
        total += len(sentence) + 12
    return out


def facts_in(text: str) -> list[str]:
    return sorted(set(re.findall(r"FACT: [^\n.]+", text)))


def toolless_researcher(request: dict) -> str:
    """A weak model: never calls a tool, writes the FACT lines it was shown
    (without saying where they came from), or a guess."""
    found = facts_in(first_user_text(request))
    return "## Findings\n" + ("\n".join(f"- {f}" for f in found) if found else "- It was probably built long ago.")


async def test_a_researcher_that_never_calls_a_tool_writes_from_the_pages_its_step_read(
    temporal_client, task_queue, worker, llm, script, pages, tavily
):
    script.researcher = toolless_researcher
    script.steps = [("How many ships did the Lantern Rock keeper log in 1911", "research")]
    handle = await start(
        temporal_client, task_queue, QUESTION, auto_accept_plan=True, enable_background_investigation=False
    )
    result = await finished(handle)
    await keep_history(handle, "evidence_gathered")
    page = pages.url("/lighthouse")
    # Its first turn started beside the step's reading; it answered without a
    # tool before it saw the passages, so it was asked again with them.
    asked, answered = (first_user_text(r) for r in llm.calls("researcher"))
    assert FACT not in asked and FACT in answered and page in answered
    # The step's own search, then its lead (a name the page introduces), which finds no page not read yet.
    searched = [r["query"] for r in tavily.requests]
    assert searched[0] == "How many ships did the Lantern Rock keeper log in 1911" and len(searched) == 2
    assert searched[1].startswith("Jane Reporter ")
    assert len(llm.calls("researcher")) == 2 and result.usage.crawls == 1
    # The finding it wrote without a source now names the page that holds it.
    assert f"- {FACT} ([source]({page}))" in result.observations[0]
    assert FACT in result.final_report and [c.url for c in result.citations] == [page]
    assert result.warnings == []


async def test_evidence_pages_zero_is_the_pure_agent_loop(temporal_client, task_queue, worker, llm, script, pages):
    script.researcher = toolless_researcher
    handle = await start(
        temporal_client,
        task_queue,
        QUESTION,
        auto_accept_plan=True,
        enable_background_investigation=False,
        evidence_pages=0,
    )
    result = await finished(handle)
    assert pages.hits == [] and result.usage.crawls == 0 and result.usage.searches == 0
    assert FACT not in first_user_text(llm.calls("researcher")[0])


@pytest.mark.parametrize("window", [1_000_000, 6_000])
async def test_a_fact_sixty_percent_into_a_150_kb_page_is_read_at_any_window(
    temporal_client, task_queue, research_worker, llm, script, pages, window
):
    body = filler(7, 150_000)
    body.insert(int(len(body) * 0.6), FACT + ".")
    pages.add("/lighthouse", article("Lantern Rock history", body))
    script.researcher = toolless_researcher
    script.steps = [("How many ships did the Lantern Rock keeper log in 1911", "research")]
    llm.context_window = window
    async with research_worker(DEEPRESEARCH_CONTEXT_WINDOW=str(window)):
        handle = await start(
            temporal_client, task_queue, QUESTION, auto_accept_plan=True, enable_background_investigation=False
        )
        result = await finished(handle, 120)
    researcher = llm.calls("researcher")[-1]  # (asked again with the passages: it calls no tool)
    assert FACT in first_user_text(researcher)
    assert FACT in result.final_report and llm.rejected == []
    # What the page puts into the prompt is its worth, not the window's room:
    # the 150 KB page (~35,000 tokens) costs at most the evidence budget.
    assert prompt_tokens(researcher) < 3_000 + 2_500


async def test_a_page_the_agent_crawls_costs_its_evidence_budget_not_the_window(
    temporal_client, task_queue, research_worker, llm, script, pages
):
    body = filler(8, 150_000)
    body.insert(int(len(body) * 0.6), FACT + ".")
    pages.add("/lighthouse", article("Lantern Rock history", body))
    script.steps = [("How many ships did the Lantern Rock keeper log in 1911", "research")]
    async with research_worker(DEEPRESEARCH_CONTEXT_WINDOW="1000000"):
        handle = await start(
            temporal_client,
            task_queue,
            QUESTION,
            auto_accept_plan=True,
            enable_background_investigation=False,
            evidence_pages=0,
            evidence_tokens=2_000,
        )
        result = await finished(handle, 120)
    last = llm.calls("researcher")[-1]  # after its search and its crawl
    page = next(m for m in last["messages"] if m["role"] == "tool" and m["content"].startswith("# Lantern Rock"))
    assert prompt_tokens({"messages": [page]}) <= 2_100  # the whole page is about 35,000 tokens
    assert FACT in page["content"] and "find_in_page" in page["content"]  # its best passages, how to read on
    assert FACT in result.final_report


async def test_a_run_that_read_nothing_says_so(temporal_client, task_queue, worker, llm, script, tavily):
    tavily.fail_rate(1.0, statuses=(503,))  # the search engine is down
    guesses = []

    def researcher(request):
        guesses.append(request)
        return "## Findings\n- This research has been submitted to Scopus and confirmed by experts."

    script.researcher = researcher
    script.steps = [("Find the lighthouse fact", "research")]
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finished(handle, 120)
    await keep_history(handle, "nothing_read")
    status = await handle.query("status")
    assert result.status == "completed"
    assert result.observations[0].startswith("**No evidence was gathered for this step** (the search failed")
    assert "Scopus" not in result.observations[0]
    assert result.final_report.startswith("> **Warning:** this report rests on no source")
    assert result.warnings and "rests on no source" in result.warnings[0]
    assert status["warnings"] == result.warnings


async def test_enough_context_with_nothing_read_does_not_end_the_research(
    temporal_client, task_queue, worker, llm, script, pages
):
    script.planner = lambda request: plan_json("Nothing to do", [], enough=True)
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finished(handle)
    await keep_history(handle, "enough_context_researched")
    assert result.status == "completed" and pages.hits  # the question was researched as one step
    assert [s.title for s in result.plan.steps] == [QUESTION]
    assert FACT in result.final_report and len(llm.calls("researcher")) >= 1


async def test_the_fallback_step_and_the_reporter_see_the_background_search(
    temporal_client, task_queue, worker, llm, script, tavily, pages
):
    snippet = "The keeper's log counted SNIPPET-ONLY-4417 ships."
    tavily.handler = lambda query, n: [
        {"title": "Lantern Rock history", "url": pages.url("/lighthouse"), "content": snippet, "score": 0.9}
    ]
    script.planner = lambda request: "I cannot write a plan."
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await finished(handle)
    assert result.status == "completed" and len(result.plan.steps) == 1
    assert "SNIPPET-ONLY-4417" in first_user_text(llm.calls("researcher")[0])
    assert "SNIPPET-ONLY-4417" in first_user_text(llm.calls("reporter")[0])


async def test_a_failed_reporter_leaves_what_the_pages_say_beside_weak_findings(
    temporal_client, task_queue, worker, llm, script, pages
):
    """Findings that lost the fact, a reporter that fails: the report the
    workflow writes holds the passages the findings rest on, with their page."""
    from testkit.llm_server import Reply

    script.steps = [("How many ships did the Lantern Rock keeper log in 1911", "research")]
    script.researcher = lambda request: "## Findings\n- The Lantern Rock keeper logged ships in 1911."
    script.reporter = lambda request: Reply(status=400, content="this model cannot write reports")
    handle = await start(
        temporal_client, task_queue, QUESTION, auto_accept_plan=True, enable_background_investigation=False
    )
    result = await finished(handle)
    await keep_history(handle, "reporter_failed_with_passages")
    assert FACT not in result.observations[0]  # the researcher lost the figure
    assert result.status == "completed" and "the reporter failed" in result.final_report[:800]
    pages_say = result.final_report.split("## What the pages say", 1)[1]
    assert f"[Lantern Rock history]({pages.url('/lighthouse')}): " in pages_say and FACT in pages_say


async def test_a_report_that_names_no_page_ends_with_the_pages_the_run_read(
    temporal_client, task_queue, worker, llm, script, pages
):
    """A weak model's findings and report without a single link (what
    SmolLM2 writes): the reader still gets the pages the research read. The
    report states the page's figure (a report stating nothing over passages
    that hold one is asked again; tests/test_report_support.py)."""
    script.researcher = lambda request: "## Findings\n- It was probably built long ago."
    script.reporter = lambda request: "The Lantern Rock keeper logged 4417 ships in 1911."
    script.steps = [("How many ships did the Lantern Rock keeper log in 1911", "research")]
    handle = await start(
        temporal_client, task_queue, QUESTION, auto_accept_plan=True, enable_background_investigation=False
    )
    result = await finished(handle)
    report = result.final_report
    assert report.startswith("The Lantern Rock keeper logged 4417 ships in 1911.")
    assert "## Pages this research read" in report and f"]({pages.url('/lighthouse')})" in report


async def test_a_step_reads_its_evidence_pages_when_search_results_are_fewer(
    temporal_client, task_queue, worker, llm, script, pages, tavily
):
    """One query, `--max-search-results 2`, `--evidence-pages 4`: the step's
    own search asks for four results, so four pages are read (the fact is on
    the fourth), not two."""
    for n in range(1, 4):
        pages.add(f"/other{n}", article(f"Lantern Rock notes {n}", ["The lamp was painted white."]))
    order = ["/other1", "/other2", "/other3", "/lighthouse"]
    tavily.handler = lambda query, n: [
        {"title": f"Lantern Rock {p}", "url": pages.url(p), "content": "Lantern Rock.", "score": 0.9} for p in order
    ][:n]
    script.researcher = toolless_researcher
    script.steps = [("How many ships did the Lantern Rock keeper log in 1911", "research")]
    handle = await start(
        temporal_client,
        task_queue,
        QUESTION,
        auto_accept_plan=True,
        enable_background_investigation=False,
        max_search_results=2,
        evidence_pages=4,
    )
    result = await finished(handle)
    assert tavily.requests[0]["max_results"] == 4  # (then its lead's search, as wide)
    assert result.usage.crawls == 4 and FACT in first_user_text(llm.calls("researcher")[-1])
    assert FACT in result.final_report


async def test_a_step_follows_the_lead_its_pages_give_to_the_page_of_the_second_hop(
    temporal_client, task_queue, worker, llm, script, pages, tavily
):
    """Two hops: the step's search finds the seal count, which names the
    site; only a search for that site finds the ferry. The workflow follows
    the lead beside the agent's loop, so a researcher that never calls a tool
    still has the ferry's page behind its findings, and the report holds it."""
    survey = "The autumn survey counted seals along the whole coast, from the northern cliffs to the southern sands."
    pages.add(
        "/seals",
        article("Grey seal count", [survey, "Hallow Point remains by far the largest grey seal colony on the coast."]),
    )
    timetable = "Our boats sail all year round from the harbour pier; tickets are sold at the gate and on board."
    pages.add(
        "/ferries",
        article("Ferry routes", [timetable, "The MV Selkie sails from the harbour to Hallow Point in 35 minutes."]),
    )
    hit = {"seals": ("Grey seal count", "/seals"), "ferries": ("Ferry routes", "/ferries")}

    def search(query: str, n: int) -> list[dict]:
        title, path = hit["ferries" if "Hallow Point" in query else "seals"]
        return [{"title": title, "url": pages.url(path), "content": title, "score": 0.9}]

    tavily.handler = search
    script.researcher = lambda request: "## Findings\n- The largest colony was counted."
    script.steps = [
        ("Which ferry serves the site of the largest grey seal colony, and how long is the crossing", "research")
    ]
    handle = await start(
        temporal_client, task_queue, QUESTION, auto_accept_plan=True, enable_background_investigation=False
    )
    result = await finished(handle)
    await keep_history(handle, "lead_followed")
    searched = [r["query"] for r in tavily.requests]
    assert len(searched) == 2 and searched[1].startswith("Hallow Point ") and "ferry" in searched[1]
    assert sorted(pages.hits) == ["/ferries", "/seals"] and result.usage.crawls == 2
    assert "MV Selkie" not in first_user_text(llm.calls("researcher")[0])  # found beside its turn, not before
    reporter = first_user_text(llm.calls("reporter")[0])
    assert "MV Selkie" in reporter and pages.url("/ferries") in reporter
    assert "MV Selkie" in result.final_report
