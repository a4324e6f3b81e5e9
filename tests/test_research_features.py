"""Research at full strength, run end to end: clarification, report styles,
citations that were really retrieved, local documents, small context windows."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateFailedError

from testkit.pages import article
from testkit.research_script import FACT
from testkit.runs import start, wait_for_phase
from workflows.models import REPORT_STYLES
from workflows.reporter import UNVERIFIED

CORPUS = Path(__file__).parent / "corpus"
STYLE_MARKERS = {  # a phrase from each style guide in prompts/styles/
    "academic": "precise, formal and objective",
    "popular_science": "curious non-experts",
    "news": "who, what, when, where, why",
    "social_media": "short, punchy and engaging",
    "strategic_investment": "investors and decision makers",
}


async def test_clarification_over_two_rounds(temporal_client, task_queue, worker, llm, script):
    handle = await start(
        temporal_client,
        task_queue,
        "Research lighthouses",
        enable_clarification=True,
        max_clarification_rounds=3,
        auto_accept_plan=True,
    )
    status = await wait_for_phase(handle, "clarifying")
    assert status.pending_question == "Clarifying question 1: which aspect matters most?"
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update("answer_clarification", "   ", result_type=str)
    await handle.execute_update("answer_clarification", "Their history", result_type=str)

    status = await wait_for_phase(handle, "clarifying", answers=1)
    assert status.pending_question.startswith("Clarifying question 2")
    await handle.signal("clarify", "Only in Norway")  # the signal works too

    result = await handle.result()
    assert result.status == "completed"
    planner_input = llm.calls("planner")[0]["messages"][1]["content"]
    assert "Their history" in planner_input and "Only in Norway" in planner_input
    assert len(llm.calls("coordinator")) == 3


@pytest.mark.parametrize("style", REPORT_STYLES)
async def test_each_report_style_reaches_the_reporter(style, temporal_client, task_queue, worker, llm, script):
    handle = await start(
        temporal_client, task_queue, "Tell me about Lantern Rock", report_style=style, auto_accept_plan=True
    )
    result = await handle.result()
    assert result.status == "completed"
    reporter_prompt = llm.calls("reporter")[0]["messages"][0]["content"]
    assert STYLE_MARKERS[style] in reporter_prompt
    others = [m for s, m in STYLE_MARKERS.items() if s != style]
    assert not any(m in reporter_prompt for m in others)


async def test_invented_citation_is_removed_and_citations_are_only_retrieved_sources(
    temporal_client, task_queue, worker, script, pages
):
    script.report_extra = "\n## Key Citations\n- [A paper](https://invented.example/paper)\n"
    handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
    result = await handle.result()
    assert "invented.example" not in result.final_report
    assert f"A paper {UNVERIFIED}" in result.final_report
    assert [c.url for c in result.citations] == [pages.url("/lighthouse")]


async def test_local_documents_are_searched_and_cited(temporal_client, task_queue, worker, llm, script):
    handle = await start(
        temporal_client,
        task_queue,
        "How did the Halvorsen turbine perform?",
        resources=[str(CORPUS)],
        auto_accept_plan=True,
    )
    result = await handle.result()
    assert "produced 4.7 megawatts" in result.final_report  # only in the corpus PDF
    assert any(c.url.startswith(f"file://{CORPUS}/turbine-report.pdf") for c in result.citations)
    researcher_tools = [t["function"]["name"] for t in llm.calls("researcher")[0]["tools"]]
    assert researcher_tools[0] == "local_search"


async def test_small_context_window_with_huge_pages(temporal_client, task_queue, research_worker, llm, script, pages):
    window = 8192
    filler = [f"Paragraph {i} about the coast, the sea and ships passing by the rocks." * 8 for i in range(400)]
    pages.add("/lighthouse", article("Lantern Rock history", [FACT + "."] + filler))  # ~250 KB
    llm.context_window = window  # a larger request is refused, as a provider would
    async with research_worker(DEEPRESEARCH_CONTEXT_WINDOW=str(window)):
        handle = await start(temporal_client, task_queue, "Tell me about Lantern Rock", auto_accept_plan=True)
        result = await handle.result()
    assert result.status == "completed"
    assert FACT in result.final_report
    assert llm.rejected == [] and 0 < llm.largest_prompt <= window  # counted by real tokenizers
