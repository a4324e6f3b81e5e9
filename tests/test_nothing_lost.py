"""Nothing the user or the sources said is lost, end to end on the scripted
servers with the real worker and dev server."""

from __future__ import annotations

import asyncio
import re

from testkit.llm_server import Reply, has_tool_result, last_user
from testkit.pages import article
from testkit.research_script import FACT
from testkit.runs import keep_history, start, wait_for_phase

QUESTION = "Tell me about Lantern Rock"


async def test_clarification_answers_reach_the_planner_word_for_word(temporal_client, task_queue, worker, llm, script):
    """The hand-off topic repeats neither answer; the planner still gets both."""
    asked = []

    def coordinator(request):
        asked.append(request)
        if len(asked) <= 2:
            return f"Question {len(asked)}: what matters most?"
        return Reply(
            tool_calls=[("handoff_after_clarification", {"research_topic": "Lantern Rock", "locale": "en-US"})]
        )

    script.coordinator = coordinator
    handle = await start(
        temporal_client,
        task_queue,
        QUESTION,
        enable_clarification=True,
        max_clarification_rounds=3,
        auto_accept_plan=True,
    )
    await wait_for_phase(handle, "clarifying")
    await handle.execute_update("answer_clarification", "Only the keeper's logbook of 1911", result_type=str)
    await wait_for_phase(handle, "clarifying", answers=1)
    await handle.signal("clarify", "Ships counted, not weather")
    async with asyncio.timeout(60):
        result = await handle.result()

    first_plan_request = llm.calls("planner")[0]["messages"][1]["content"]
    assert "Only the keeper's logbook of 1911" in first_plan_request
    assert "Ships counted, not weather" in first_plan_request
    assert QUESTION in first_plan_request and "Question 1: what matters most?" in first_plan_request
    assert [(c.question, c.answer) for c in result.clarifications] == [
        ("Question 1: what matters most?", "Only the keeper's logbook of 1911"),
        ("Question 2: what matters most?", "Ships counted, not weather"),
    ]
    assert result.status == "completed" and FACT in result.final_report


async def test_a_repeated_query_costs_one_search(temporal_client, task_queue, worker, llm, script, tavily):
    """Two research steps in parallel and a second turn ask the same query."""
    normal = script.researcher

    def researcher(request):
        if not has_tool_result(request, "web_search"):
            return Reply(tool_calls=[("web_search", {"query": "Lantern Rock lighthouse"})])
        if sum(1 for m in request["messages"] if m["role"] == "tool") == 1:
            return Reply(tool_calls=[("web_search", {"query": "  lantern rock   LIGHTHOUSE "})])
        return normal(request)

    script.researcher = researcher
    script.steps = [("Find the lighthouse fact", "research"), ("Find the lighthouse history", "research")]
    handle = await start(
        temporal_client, task_queue, QUESTION, auto_accept_plan=True, enable_background_investigation=False
    )
    async with asyncio.timeout(60):
        result = await handle.result()
    # Besides each step's evidence search and the lead of its page (its byline's "Jane Reporter", asked once):
    leads = [r["query"] for r in tavily.requests if r["query"].startswith("Jane Reporter")]
    own = [r["query"] for r in tavily.requests if r["query"] not in leads]
    queries = [q for q in own if "history" not in q and "fact" not in q]
    assert queries == ["Lantern Rock lighthouse"]  # four asks, one search
    assert len(leads) == len(set(leads)) >= 1
    assert result.usage.searches == 3 + len(leads) and result.usage.cache_hits >= 3


# Ninety different sentences (a reply of one sentence again and again is cut as a loop), no digits.
FILLER = " ".join(
    f"Sentence {a}{b}{n % 7 * 'x'} gives background of little use."
    for n, (a, b) in enumerate([(a, b) for a in "bcdfghk" for b in "aeiou" * 3][:90])
)


async def test_a_six_step_report_under_an_8k_window_keeps_every_steps_fact(
    temporal_client, task_queue, research_worker, llm, script
):
    """Six long findings do not fit the reporter's window together: each is
    condensed first, and every step's key fact reaches the report."""
    script.steps = [(f"Aspect {i}", "research") for i in range(6)]

    def researcher(request):
        step = re.search(r"## (Aspect \d)", request["messages"][1]["content"]).group(1)
        return f"{FILLER}\nFACT: {step} measured {int(step[-1]) * 111 + 7} units\n{FILLER}"

    script.researcher = researcher
    llm.context_window = 8000  # anything larger is refused, as a provider would
    async with research_worker(DEEPRESEARCH_CONTEXT_WINDOW="8000"):
        handle = await start(
            temporal_client,
            task_queue,
            QUESTION,
            auto_accept_plan=True,
            max_step_num=6,
            enable_background_investigation=False,
        )
        async with asyncio.timeout(120):
            result = await handle.result()
    assert result.status == "completed"
    for i in range(6):
        assert f"FACT: Aspect {i} measured {i * 111 + 7} units" in result.final_report
    assert len(llm.calls("editor")) >= 6  # each step condensed
    assert llm.rejected == []


async def test_a_condensation_that_states_what_its_findings_do_not_is_not_used(
    temporal_client, task_queue, research_worker, llm, script
):
    """The editor condenses each step's findings and adds a buyer and a sum
    that no finding holds (as SmolLM2 added "The Ocean Life 2.0 … founded in
    2016" to olvane-revenue-growth's): its condensation is not used, each
    step's findings are shortened by the workflow instead, and the invention
    reaches neither the reporter nor the report."""
    script.steps = [(f"Aspect {i}", "research") for i in range(4)]

    def researcher(request):
        step = re.search(r"## (Aspect \d)", request["messages"][1]["content"]).group(1)
        return f"FACT: {step} measured {int(step[-1]) * 111 + 7} units\n\n{FILLER}\n\n{FILLER}"

    def editor(request):
        fact = re.search(r"FACT: [^\n]+", request["messages"][-1]["content"])
        return f"{fact.group(0) if fact else ''}\nThe Zorblax Consortium bought it for 9,876,543 units in 1871."

    script.researcher, script.editor = researcher, editor
    llm.context_window = 8000
    async with research_worker(DEEPRESEARCH_CONTEXT_WINDOW="8000"):
        handle = await start(
            temporal_client, task_queue, QUESTION, auto_accept_plan=True, max_step_num=4,
            enable_background_investigation=False,
        )  # fmt: skip
        async with asyncio.timeout(120):
            result = await handle.result()
    await keep_history(handle, "condensed_invention_shortened")
    assert result.status == "completed" and len(llm.calls("editor")) >= 4  # each step's condensing was asked for
    reporter = [last_user(r) for r in llm.calls("reporter")]
    assert reporter and not any("Zorblax" in text or "9,876,543" in text for text in reporter)
    assert "Zorblax" not in result.final_report and "9,876,543" not in result.final_report
    for i in range(4):  # each step's first paragraph, its fact, kept by the workflow's shortening
        assert f"FACT: Aspect {i} measured {i * 111 + 7} units" in result.final_report


# --- long pages under a small window --------------------------------------------------

FILLER_WORDS = (
    "harbour tide granite gull ferry storm beacon chart mooring quay fog lantern reef cliff "
    "signal rope anchor crew harbourmaster weather lamp glass oil wick gallery stair tower"
).split()


def long_page(name: str, facts: list[str], size: int = 150_000, chinese: bool = False) -> str:
    """A page of about ``size`` bytes (UTF-8) with a fact at the start, one in
    the middle and one at the end, and filler that shares none of their words
    (English, or Chinese without spaces)."""
    import random

    rng = random.Random(name)
    paragraphs: list[str] = []
    length = 0
    while length < size:
        words = [rng.choice(FILLER_ZH if chinese else FILLER_WORDS) for _ in range(rng.randint(40, 90))]
        paragraph = "".join(words) + "。" if chinese else " ".join(words).capitalize() + "."
        paragraphs.append(paragraph)
        length += len(paragraph.encode()) + 1
    paragraphs.insert(1, facts[0])
    paragraphs.insert(len(paragraphs) // 2, facts[1])
    paragraphs.insert(len(paragraphs) - 1, facts[2])
    return article(f"灯塔档案{name}" if chinese else f"Lantern Rock records {name}", paragraphs)


async def test_facts_anywhere_in_three_long_pages_reach_the_report_with_an_8k_window(
    temporal_client, task_queue, research_worker, llm, script, tavily, pages
):
    facts = {
        name: [
            f"FACT: register {name} says the keeper logged {n} ships in {year}."
            for n, year in zip(counts, (1901, 1911, 1921))
        ]
        for name, counts in (("A", (101, 202, 303)), ("B", (404, 505, 606)), ("C", (707, 808, 909)))
    }
    for name, lines in facts.items():
        pages.add(f"/records-{name}", long_page(name, lines))
    tavily.handler = lambda query, n: [
        {"title": f"Lantern Rock records {x}", "url": pages.url(f"/records-{x}"), "content": "Records.", "score": 0.9}
        for x in "ABC"
    ]
    script.steps = [("How many ships did the keeper log each year", "research")]
    turns = []

    def researcher(request):
        turns.append(request)
        if not has_tool_result(request, "web_search"):
            return Reply(tool_calls=[("web_search", {"query": "Lantern Rock keeper logged ships"})])
        if not has_tool_result(request, "crawl"):
            return Reply(tool_calls=[("crawl", {"url": pages.url(f"/records-{x}")}) for x in "ABC"])
        seen = "\n".join(m.get("content") or "" for m in request["messages"] if m["role"] == "tool")
        if not has_tool_result(request, "find_in_page"):  # look for what the views may have left out
            return Reply(
                tool_calls=[
                    ("find_in_page", {"url": pages.url(f"/records-{x}"), "query": "keeper logged ships"}) for x in "ABC"
                ],
                content="Notes so far:\n" + "\n".join(re.findall(r"FACT: [^\n]+?ships in \d+\.", seen)),
            )
        notes = "\n".join(m.get("content") or "" for m in request["messages"] if m["role"] in ("assistant", "tool"))
        return "## Findings\n" + "\n".join(sorted(set(re.findall(r"FACT: [^\n]+?ships in \d+\.", notes))))

    script.researcher = researcher
    llm.context_window = 8000  # anything larger is rejected, as a provider would
    async with research_worker(DEEPRESEARCH_CONTEXT_WINDOW="8000"):
        handle = await start(
            temporal_client, task_queue, QUESTION, auto_accept_plan=True, enable_background_investigation=False
        )
        async with asyncio.timeout(120):
            result = await handle.result()
    assert result.status == "completed" and llm.largest_prompt <= 8000
    for lines in facts.values():
        for fact in lines:
            assert fact in result.final_report, fact
    await keep_history(handle, "long_pages_read_in_parts")
    crawl_views = [m["content"] for m in turns[2]["messages"][-3:]]  # the answers to the three crawls
    for view in crawl_views:  # where it is, how to read on
        assert "is long:" in view and "parts" in view and "read_page(" in view and "find_in_page(" in view


async def test_a_token_budget_passed_mid_research_stops_new_turns_and_reports_what_was_found(
    temporal_client, task_queue, worker, llm, script, tavily
):
    """A researcher that would search for ever: once the run's tokens pass the
    budget no new turn starts, the step answers from what it found, and the
    reporter writes a partial report."""
    searched = []

    def researcher(request):
        if request.get("tool_choice") == "none":  # the turn after the budget ran out: answer
            seen = re.findall(r"FINDING \d+", "\n".join(m.get("content") or "" for m in request["messages"]))
            return "## Findings\n" + "\n".join(sorted(set(seen)))
        searched.append(len(searched) + 1)
        return Reply(tool_calls=[("web_search", {"query": f"lantern rock question {len(searched)}"})])

    tavily.handler = lambda query, n: [
        {
            "title": "Result",
            "url": "https://example.org/" + query.split()[-1],
            "content": f"FINDING {query.split()[-1]}",
        }
    ]
    script.researcher = researcher
    script.steps = [("Search for ever", "research")]
    handle = await start(
        temporal_client,
        task_queue,
        QUESTION,
        auto_accept_plan=True,
        enable_background_investigation=False,
        agent_max_turns=25,
        token_budget=6_000,
    )
    async with asyncio.timeout(120):
        result = await handle.result()
    assert result.status == "completed" and result.budget_exhausted
    assert 1 <= len(searched) < 24  # stopped well before its 25 turns
    assert result.usage.prompt_tokens + result.usage.completion_tokens > 6_000
    assert "FINDING 1" in result.final_report  # what was found before the budget ran out
    assert "partial" in result.final_report.lower()


# --- any language, any window ------------------------------------------------------------

# Everyday words that share no two-character sequence with the facts below.
FILLER_ZH = (
    "天气 晴朗 海风 吹过 岩石 沙滩 渔民 早晨 市场 热闹 孩子 学校 老师 花园 树木 山坡 河流 桥梁 城市 道路 "
    "汽车 工厂 午饭 米饭 面条 茶叶 书本 图书馆 音乐 电影 朋友 家庭 节日 春天 夏天 秋天 冬天 雨水 云朵"
).split()


async def test_a_chinese_run_reading_three_long_pages_at_once_fits_a_16k_window(
    temporal_client, task_queue, research_worker, llm, script, tavily, pages
):
    """Three 150 KB Chinese pages crawled in one turn: every request fits the
    window by the count of real tokenizers (cl100k, Qwen), nothing is refused,
    and the facts at the start, middle and end of each page reach the report."""
    facts = {
        name: [
            f"事实：{name}册记载，灯塔看守人在{year}年登记了{n}艘船。" for n, year in zip(counts, (1901, 1911, 1921))
        ]
        for name, counts in (("甲", (101, 202, 303)), ("乙", (404, 505, 606)), ("丙", (707, 808, 909)))
    }
    for n, (name, lines) in enumerate(facts.items()):
        pages.add(f"/zh-{n}", long_page(name, lines, chinese=True))
    tavily.handler = lambda query, k: [
        {"title": f"灯塔档案{n}", "url": pages.url(f"/zh-{n}"), "content": "档案。", "score": 0.9} for n in range(3)
    ]
    script.steps = [("灯塔看守人每年登记了多少艘船", "research")]

    def researcher(request):
        if not has_tool_result(request, "web_search"):
            return Reply(tool_calls=[("web_search", {"query": "灯塔看守人登记船只"})])
        if not has_tool_result(request, "crawl"):
            return Reply(tool_calls=[("crawl", {"url": pages.url(f"/zh-{n}")}) for n in range(3)])
        seen = "\n".join(m.get("content") or "" for m in request["messages"] if m["role"] == "tool")
        return "## 发现\n" + "\n".join(sorted(set(re.findall(r"事实：[^。]+。", seen))))

    script.researcher = researcher
    llm.context_window = 16_000
    async with research_worker(DEEPRESEARCH_CONTEXT_WINDOW="16000"):
        handle = await start(
            temporal_client,
            task_queue,
            "灯塔看守人每年登记了多少艘船？",
            locale="zh-CN",
            auto_accept_plan=True,
            enable_background_investigation=False,
        )
        async with asyncio.timeout(120):
            result = await handle.result()
    assert result.status == "completed"
    assert llm.rejected == [] and llm.largest_prompt <= 16_000  # never over the window, by a real count
    assert len(llm.calls("researcher")) == 3  # search, crawl three at once, findings
    for lines in facts.values():
        for fact in lines:
            assert fact in result.final_report, fact


async def test_a_context_length_error_is_fitted_again_and_the_window_kept_for_the_run(
    temporal_client, task_queue, research_worker, llm, script, tavily, pages
):
    """The worker believes the model has 32k tokens; the provider has 6k and
    says so with a 400. The request is fitted again to what it stated, the
    run completes, and that role is not refused a second time."""
    pages.add("/records-A", long_page("A", [f"FACT: register A says the keeper logged {n} ships." for n in (1, 2, 3)]))
    tavily.handler = lambda query, n: [
        {"title": "Lantern Rock records A", "url": pages.url("/records-A"), "content": "Records.", "score": 0.9}
    ]
    normal = script.researcher

    def researcher(request):
        if has_tool_result(request, "crawl") and not has_tool_result(request, "read_page"):
            return Reply(tool_calls=[("read_page", {"url": pages.url("/records-A"), "part": 2})])
        return normal(request)

    script.researcher = researcher
    llm.context_window = 6_000
    async with research_worker(DEEPRESEARCH_CONTEXT_WINDOW="32000"):
        handle = await start(  # a page may take a quarter of what the worker believes the window is
            temporal_client,
            task_queue,
            QUESTION,
            auto_accept_plan=True,
            enable_background_investigation=False,
            evidence_tokens=20_000,
        )
        async with asyncio.timeout(120):
            result = await handle.result()
    assert result.status == "completed"
    refused = [role for role, _ in llm.rejected]
    assert "researcher" in refused  # the crawled page overflowed the real window once
    assert all(refused.count(role) == 1 for role in refused)  # then the learned window held
    assert "FACT: register A says the keeper logged 1 ships" in result.final_report
    await keep_history(handle, "context_window_learned")
    assert llm.largest_prompt > 6_000  # the refused request really was too large
