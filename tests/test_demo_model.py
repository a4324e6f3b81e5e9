"""The scripted demo model: an OpenAI-compatible server (plain and streamed
answers, through the real openai client) playing every role by rules, and a
real research run on it: real Temporal dev server, real worker, the built-in
corpus served as the offline web."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from openai import AsyncOpenAI

from client.demo.model import DemoModel
from client.evaluation.web import CorpusWeb
from infra.settings import Settings
from testkit.runs import start
from worker import build_worker

CORPUS = Path(__file__).resolve().parent.parent / "client" / "evaluation" / "builtin" / "corpus"
TOOLS = {
    t["name"]: t for t in json.loads((Path(__file__).resolve().parent.parent / "prompts" / "tools.json").read_text())
}


def tools(*names: str) -> list[dict]:
    return [{"type": "function", "function": TOOLS[name]} for name in names]


@pytest.fixture
def model():
    with DemoModel() as server:
        yield server


@pytest.fixture
def web():
    with CorpusWeb(CORPUS) as server:
        yield server


async def ask(model: DemoModel, system: str, user: str, *, stream: bool = False, **extra):
    client = AsyncOpenAI(base_url=model.base_url, api_key="demo-key", max_retries=0)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    if not stream:
        reply = await client.chat.completions.create(model="demo-scripted", messages=messages, **extra)
        await client.close()
        return reply.choices[0].message, reply.usage
    chunks = await client.chat.completions.create(
        model="demo-scripted", messages=messages, stream=True, stream_options={"include_usage": True}, **extra
    )
    content, calls, usage = "", {}, None
    async for chunk in chunks:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                calls.setdefault(call.index, [call.function.name, ""])[1] += call.function.arguments or ""
    await client.close()
    return (content, calls), usage


async def test_coordinator_hands_the_question_to_the_planner(model):
    question = "Who founded Olvane Instruments?"
    message, usage = await ask(
        model, "You are the coordinator of a deep-research team.", question, tools=tools("handoff_to_planner")
    )
    (call,) = message.tool_calls
    assert call.function.name == "handoff_to_planner"
    assert json.loads(call.function.arguments) == {"research_topic": question, "locale": "en-US"}
    assert usage.total_tokens > 0


async def test_streamed_answers_carry_tool_calls_and_usage(model):
    (content, calls), usage = await ask(
        model, "You are the coordinator of a deep-research team.", "澄波公司成立于哪一年？", stream=True,
        tools=tools("handoff_to_planner"),
    )  # fmt: skip
    assert calls[0][0] == "handoff_to_planner"
    assert json.loads(calls[0][1])["locale"] == "zh-CN"
    assert usage is not None and usage.completion_tokens > 0


async def test_planner_adds_a_processing_step_when_asked_to_compute(model):
    system = "You are the planner of a deep-research team."
    message, _ = await ask(model, system, "# Research question\nWhat is the average of the monthly counts?")
    plan = json.loads(message.content)
    assert [s["step_type"] for s in plan["steps"]] == ["research", "processing"]
    assert plan["has_enough_context"] is False
    (content, _), _ = await ask(model, system, "# Research question\nWho designed the Greyhorn Light?", stream=True)
    assert [s["step_type"] for s in json.loads(content)["steps"]] == ["research"]


async def test_researcher_searches_then_crawls(model):
    system = "You are the researcher of a deep-research team."
    task = (
        "# Research question\nWho designed the Greyhorn Light?\n\n# Your step\n## Find the designer\nWho designed it?"
    )
    message, _ = await ask(model, system, task, tools=tools("web_search", "crawl"))
    (call,) = message.tool_calls
    assert call.function.name == "web_search"
    assert "designer" in json.loads(call.function.arguments)["query"].lower()


def test_findings_leave_out_the_reading_tools_own_notes():
    """A long page comes with the reading tool's notes; they are no sentence
    of the page (the demo's report once quoted one as a key point)."""
    from activities.reading import view
    from client.demo.text import findings

    page = "# Greyhorn Light\n\n" + "\n\n".join(
        f"Paragraph {n} tells of the harbour walls and the weather." for n in range(400)
    )
    page += "\n\nThe Greyhorn Light was designed by the engineer Mara Quell in 1871.\n"
    url = "http://127.0.0.1:1/greyhorn.md"
    shown = view(page, 600, source=url, query="Greyhorn Light designed")
    assert shown.startswith("[Passages of ")
    found = findings("Who designed the Greyhorn Light?", [("find_in_page", {"url": url}, shown)])
    assert "Mara Quell" in found
    assert "read_page" not in found and "[Passages" not in found


def test_a_name_in_the_question_counts_only_whole():
    """The demo once answered a question on the Kessel Point plant with
    ferry sailings to Hallow Point ("point", "run"): a name matches whole."""
    from client.demo.text import findings

    question = "How many turbines does the Kessel Point plant run?"
    ferries = "# Ferries\n\nHarrowgate Ferries will run eight sailings a day to Hallow Point from June.\n"
    made = [("crawl", {"url": "http://127.0.0.1:1/ferries.md"}, ferries)]
    assert "Nothing I read answers this step" in findings(question, made)
    plant = "# Kessel Point\n\nThe Kessel Point plant runs 16 turbines in the sound.\n"
    made.append(("crawl", {"url": "http://127.0.0.1:1/kessel.md"}, plant))
    found = findings(question, made)
    assert "16 turbines" in found and "Hallow Point" not in found


def test_a_table_read_without_its_header_still_renders_as_a_table():
    """An HTML table of labels and values comes out of the page as rows with
    no header rule: the findings give it an empty header so it renders."""
    from markdown_it import MarkdownIt

    from client.demo.text import findings

    page = (
        "# Carrick Bank\n\nThe Carrick Bank turbines and who makes them:\n\n"
        "| Turbines | 48 |\n| Turbine manufacturer | Haldane Turbine Works |\n"
    )
    found = findings("Who makes the Carrick Bank turbines?", [("crawl", {"url": "http://127.0.0.1:1/cb.html"}, page)])
    html = MarkdownIt().enable("table").render(found)
    assert "<td>Turbine manufacturer</td>" in html and "<td>Haldane Turbine Works</td>" in html


async def test_coder_computes_growth_from_a_table(model):
    from client.demo.text import program_for

    material = (
        "# Research question\nBy what percentage did revenue grow from 2021 to 2023?\n\n# Findings of earlier steps\n"
        "| Year | Revenue |\n|---|---|\n| 2021 | 18.4 |\n| 2022 | 21.7 |\n| 2023 | 26.0 |\n"
    )
    printed: list[str] = []
    exec(program_for(material), {"print": lambda *a: printed.append(" ".join(map(str, a)))})  # noqa: S102
    assert printed == ["Growth from 2021 to 2023: 18.4 -> 26 = 41.3%"]


async def test_a_research_run_on_the_demo_model_finds_and_cites_a_fact(
    model, web, temporal_client, data_dir, dev_server, task_queue
):
    settings = Settings.from_env(
        {
            "OPENAI_API_KEY": "demo-key-never-leaves-loopback",
            "OPENAI_BASE_URL": model.base_url,
            "DEEPRESEARCH_MODEL": "demo-scripted",
            "DEEPRESEARCH_SEARCH_ENGINE": "tavily",
            "TAVILY_API_KEY": "demo",
            "TAVILY_BASE_URL": web.base_url,
            "DEEPRESEARCH_ALLOW_PRIVATE_URLS": "1",
            "DEEPRESEARCH_SANDBOX": "local",
            "DEEPRESEARCH_DATA_DIR": str(data_dir),
        }
    )
    settings.check()
    worker, held = build_worker(temporal_client, settings, task_queue, max_cached_workflows=0)
    try:
        async with worker:
            question = "By what percentage did Olvane Instruments' revenue grow from 2021 to 2023?"
            handle = await start(temporal_client, task_queue, question, auto_accept_plan=True)
            result = await handle.result()
    finally:
        await held.close_all()
    assert result.status == "completed"
    report = result.final_report
    assert "41.3%" in report  # computed by the coder in the real sandbox from the report's table
    assert "18.4" in report and "26.0" in report
    page = web.url_for("firms/olvane-annual-report-2023.md")
    assert re.search(r"\]\(" + re.escape(page) + r"\)", report)  # cited
    assert web.searches  # the real search activity asked the offline web
    assert model.calls.get("coder") and model.calls.get("reporter") == 1


async def test_reporter_says_when_the_findings_do_not_answer(model):
    system = "You are the reporter of a deep-research team."
    findings = (
        "# Findings\n## Revenue\n## Findings\n\n"
        "- Olvane's revenue was £26.0 million in 2023. [Annual report](http://127.0.0.1:1/report.md)\n\n"
        "# Sources you may cite\n- [Annual report](http://127.0.0.1:1/report.md)"
    )
    missing, _ = await ask(model, system, "# Research question\nWhat was Olvane's revenue in 2012?\n\n" + findings)
    assert "not found in the available sources" in missing.content
    assert "[Annual report](http://127.0.0.1:1/report.md)" in missing.content
    there, _ = await ask(model, system, "# Research question\nWhat was Olvane's revenue in 2023?\n\n" + findings)
    assert "not found" not in there.content and "£26.0 million" in there.content
