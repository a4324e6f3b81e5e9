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


# -- issue 27, item 9: the demo's answers come from its pages ------------------------------


def page_read(path: str) -> tuple[str, dict, str]:
    """A corpus page as the crawl tool's answer shows it to the researcher."""
    text = (CORPUS / path).read_text(encoding="utf-8")
    url = f"http://127.0.0.1:1/{path}"
    title = text.splitlines()[0].lstrip("# ")
    return ("crawl", {"url": url}, f"# {title}\nURL: {url}\n\n{text}")


CAPITAL = "How many people live in the capital of Vellmark and how has that changed since 2010?"


def test_a_figure_counts_with_the_sentence_before_it_that_names_its_subject():
    """The report said "The sources do not state this directly" though the
    crawled page says "Tessary is the provincial capital of Vellmark … The
    2023 census counted 23,480 residents.": the figure's sentence shares no
    word with the question but "residents", its subject is in the sentence
    before. It is found now, and comes with that sentence."""
    from client.demo.text import findings

    made = [page_read(p) for p in ("institute/tessary-institute.md", "people/ines-harrowby.md", "towns/tessary.md")]
    found = findings(CAPITAL, made)
    line = next(line for line in found.splitlines() if "23,480" in line)
    assert "Tessary is the provincial capital of Vellmark" in line and "towns/tessary.md" in line


def test_the_researcher_answers_from_passages_shown_in_its_own_request():
    """Evidence gathered before the agent's first turn comes in its request,
    not as a tool's answer: the researcher answers from it as from a page."""
    from client.demo.roles import play

    url = "http://127.0.0.1:1/towns/brackwater.md"
    task = (
        f"# Research question\n{CAPITAL}\n\n# Your step\n## The capital's population\n{CAPITAL}\n\n"
        "# Evidence found for this step\n"
        f"## Tessary\nURL: {url.replace('brackwater', 'tessary')}\n"
        "Tessary is the provincial capital of Vellmark and its largest town. The 2023 census counted 23,480 residents.\n\n"
        f"## Brackwater\nURL: {url}\nThe Greyhorn Light was first lit in 1871.\n"
    )
    request = {
        "messages": [{"role": "system", "content": "You are the researcher."}, {"role": "user", "content": task}]
    }
    turn = play(request)
    assert turn.role == "researcher" and not turn.tool_calls
    assert "23,480" in turn.content and "(http://127.0.0.1:1/towns/tessary.md)" in turn.content
    assert "1871" not in turn.content
    # What earlier steps found is no evidence gathered for this one: a researcher with tools still searches.
    later = f"# Research question\n{CAPITAL}\n\n# Your step\n## Since 2010\nThe change since 2010\n\n"
    later += "# Findings of earlier steps\n- Tessary is the capital of Vellmark and its largest town. [Tessary](http://127.0.0.1:1/t.md)\n"
    request = {"messages": [request["messages"][0], {"role": "user", "content": later}], "tools": tools("web_search")}
    assert [name for name, _ in play(request).tool_calls] == ["web_search"]


def test_the_report_puts_the_answer_first_and_says_which_year_the_sources_miss():
    from client.demo.text import NOT_FOUND, report

    capital = (
        "- Tessary is the provincial capital of Vellmark and its largest town. The 2023 census counted 23,480 "
        "residents. [Tessary](http://127.0.0.1:1/towns/tessary.md)"
    )
    seals = "- The autumn count found 1,930 grey seals on the coast. [Grey seal count](http://127.0.0.1:1/seals.md)"
    survey = (
        "- She was the lead author of the 2023 Vellmark Coastal Bird Survey and has taken part in every survey "
        "since 2008. [Dr Ines Harrowby](http://127.0.0.1:1/people/ines-harrowby.md)"
    )
    findings = f"## Step 1\n\n{survey}\n{seals}\n{capital}\n"
    text = report([f"# Research question\n{CAPITAL}\n\n# Findings\n{findings}"])
    points = text.split("## Key Points", 1)[1].split("## Analysis", 1)[0]
    assert "23,480" in points and "grey seals" not in points and "lead author" not in points
    assert NOT_FOUND not in text  # the answer is there: only 2010 itself is not
    assert "The sources found say nothing of 2010 itself" in points
    unanswered = report(["# Research question\nWhat was Tessary's population in 1950?\n\n# Findings\n" + findings])
    assert NOT_FOUND in unanswered  # a year asked about, not counted from, that no source gives


def test_the_demo_planner_applies_simple_edits_and_says_plainly_when_it_cannot():
    """An edit at review printed "revising the plan…" and showed the same plan,
    nothing saying the scripted planner ignores edits."""
    from client.demo.roles import play

    system = {"role": "system", "content": "You are the planner of a deep-research team."}
    asked = {"role": "user", "content": "# Research question\nWho designed the Greyhorn Light?"}
    first = json.loads(play({"messages": [system, asked]}).content)

    def edited(change: str) -> dict:
        edit = (
            f"The user reviewed the plan and asks for changes: {change}\nRevise the plan; it may have at most 3 steps."
        )
        plan = {"role": "assistant", "content": json.dumps(first)}
        return json.loads(play({"messages": [system, asked, plan, {"role": "user", "content": edit}]}).content)

    added = edited("add a step on the keepers of the light")
    assert [s["title"] for s in added["steps"]][-1] == "The keepers of the light"
    assert len(added["steps"]) == len(first["steps"]) + 1 and added["thought"].startswith("Revised as asked")
    removed = edited("remove step 1")
    assert removed["steps"] == first["steps"][1:]
    same = edited("make it more thorough")
    assert same["steps"] == first["steps"]
    assert "could not apply this edit" in same["thought"] and "make it more thorough" in same["thought"]


def test_the_demo_model_honours_a_steer_in_the_plan_the_steps_not_started_and_the_report():
    """`demo` documents steering its run: what the workflow sends at each
    safe point (workflows/steer_models.py), answered visibly."""
    from client.demo.roles import play
    from client.demo.text import report
    from workflows.models import Plan, Step
    from workflows.steer_models import SteerRecord, planner_guidance, reporter_guidance, revise_request

    steers = [SteerRecord(note="add a step on the keepers of the light", received_at="2026-05-01T10:00:00+00:00")]
    system = {"role": "system", "content": "You are the planner of a deep-research team."}
    asked = {"role": "user", "content": "# Research question\nWho designed the Greyhorn Light?"}
    told = {"role": "user", "content": planner_guidance(steers, replanning=False)}
    first = json.loads(play({"messages": [system, asked, told]}).content)
    assert [s["title"] for s in first["steps"]][-1] == "The keepers of the light"

    plan = Plan(
        title="Greyhorn",
        steps=[
            Step(title="Who designed it", execution_res="found"),
            Step(title="Compute the figures asked for", step_type="processing"),
        ],
    )
    revising = {"role": "user", "content": revise_request("Who designed the Greyhorn Light?", plan, [1], steers)}
    revised = json.loads(play({"messages": [system, revising]}).content)
    assert [s["title"] for s in revised["steps"]] == ["The keepers of the light", "Compute the figures asked for"]
    unchanged = [SteerRecord(note="keep it short", received_at="2026-05-01T10:00:00+00:00")]
    revising["content"] = revise_request("Who designed the Greyhorn Light?", plan, [1], unchanged)
    assert [s["title"] for s in json.loads(play({"messages": [system, revising]}).content)["steps"]] == [
        "Compute the figures asked for"
    ]

    text = report(
        [f"# Research question\nWho designed the Greyhorn Light?\n\n{reporter_guidance(steers)}\n\n# Findings\n"]
    )
    assert "> Following your guidance: add a step on the keepers of the light" in text.split("## Key Points")[0]


def test_a_follow_up_question_is_answered_from_the_findings_or_sent_to_research():
    """`ask` on a demo run: the demo model plays the follow-up role (it wrote
    a report on the thread's own request, titled "# Findings of the research run …")."""
    from client.demo.roles import play

    system = (
        "You are the followup agent of a deep-research team.\n"
        "- If what you are given does not answer the question, reply with `[NEEDS_RESEARCH]` on the first line."
    )
    given = (
        "# Findings of the research run research-1 (2026-11-26)\nIts question: Who designed the Greyhorn Light?\n\n"
        "- The light was designed by the engineer Caspar Lund and first lit in 1871. "
        "[Brackwater](http://127.0.0.1:1/towns/brackwater.md)\n\n"
        "# Sources you may cite\n- [Brackwater](http://127.0.0.1:1/towns/brackwater.md)\n\n# The question\n"
    )

    def answer(question: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": given + question}]
        return play({"messages": messages}).content

    known = answer("When was the Greyhorn Light first lit?")
    assert "1871" in known and "(http://127.0.0.1:1/towns/brackwater.md)" in known and "NEEDS" not in known
    assert answer("Who founded Olvane Instruments?").startswith("[NEEDS_RESEARCH]\n")
