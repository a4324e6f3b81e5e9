"""A DeerFlow-like run of the canonical plan, counted: what DeerFlow 1.x
sends its model for the same question, plan, search results and pages, so
that benchmark 6 can put our prompt tokens beside it (issue 38).

Not DeerFlow's code: its flow and message shapes as its ``main-1.x`` branch
builds them (``src/graph/nodes.py`` at ``2ab2876``), with stand-ins of the
same size for its prompts and tool schemas:

- coordinator: its system prompt and the question, tools
  ``handoff_to_planner`` and ``direct_response``;
- planner: its system prompt (rendered for 4 steps) and the question;
- each research step in turn (DeerFlow runs them one after another): the
  researcher's system prompt, a message with the plan's title, the
  findings of the steps before it and the step, and its note on citations;
  tools ``web_search`` and ``crawl_tool``. The model searches (the results
  as DeerFlow's Tavily tool gives them: a JSON list), crawls the page its
  search found (DeerFlow's crawl tool: the page's markdown, its first
  1,000 characters, in JSON) and answers with the facts it saw; every
  turn sends the whole conversation again;
- the coder: its system prompt and the same kind of message, tool
  ``python_repl_tool``; it runs its cell, then answers;
- the reporter: its system prompt, the plan's title and thought, each
  step's findings as a message, and the list of sources.

System prompts are texts of as many tokens as DeerFlow's rendered prompts
count (``PROMPT_TOKENS``, measured with the same counter on its templates
rendered for this run: en-US, 4 steps, academic style). The search results
and pages are the bench's own (the scripted search, the page server), the
page's markdown our crawler's (trafilatura, as DeerFlow's readability and
markdownify give about the same). Counted with ``testkit.llm_server.
prompt_tokens``, as the scripted provider counts our requests.
"""

from __future__ import annotations

import json
import re

import httpx

from activities.documents import CONVERTERS
from bench.script import RESEARCH_STEPS, BenchScript, canonical_fact
from testkit.llm_server import prompt_tokens
from testkit.tokenizers import faithful_count

# DeerFlow 1.x's rendered system prompts, in tokens (main-1.x at 2ab2876,
# rendered with Jinja2 for en-US, max_step_num 4, report_style academic).
PROMPT_TOKENS = {"coordinator": 1332, "planner": 3226, "researcher": 1236, "coder": 421, "reporter": 1699}
CRAWL_CHARS = 1_000  # DeerFlow's crawl tool keeps the first 1,000 characters of a page's markdown
QUESTION = "How has the Aldous index developed?"
CITING = (
    "IMPORTANT: DO NOT include inline citations in the text. Instead, track all sources and include a "
    "References section at the end using link reference format. Include an empty line between each "
    "citation for better readability. Use this format for each reference:\n- [Source Title](URL)\n\n"
    "- [Another Source](URL)"
)
_WORDS = "the research team plans steps searches the web reads pages and writes a report with its sources".split()


def stand_in(tokens: int) -> str:
    """A text of about ``tokens`` tokens, standing in for a prompt."""
    words: list[str] = []
    step = max(tokens // 2, 1)
    while faithful_count(" ".join(words)) < tokens:
        words += [_WORDS[(len(words) + n) % len(_WORDS)] for n in range(step)]
        step = max(step // 2, 1)
    return " ".join(words)


def _tool(name: str, description: str, **args: str) -> dict:
    properties = {arg: {"type": "string", "description": text} for arg, text in args.items()}
    schema = {"type": "object", "properties": properties, "required": list(args)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


HANDOFF = _tool(
    "handoff_to_planner",
    "Handoff to planner agent to do plan.",
    research_topic="The topic of the research task to be handed off.",
    locale="The user's detected language locale (e.g., en-US, zh-CN).",
)
DIRECT = _tool(
    "direct_response",
    "Respond directly to the user for greetings and small talk; never for research questions.",
    message="The response message to send directly to user.",
    locale="The user's detected language locale (e.g., en-US, zh-CN).",
)
SEARCH = _tool(
    "web_search",
    "A search engine optimized for comprehensive, accurate, and trusted results. Useful for when you need "
    "to answer questions about current events. Input should be a search query.",
    query="search query to look up",
)
CRAWL = _tool(
    "crawl_tool", "Use this to crawl a url and get a readable content in markdown format.", url="The url to crawl."
)
PYTHON = _tool(
    "python_repl_tool",
    "Use this to execute python code and do data analysis or calculation. If you want to see the output of a "
    "value, you should print it out with `print(...)`. This is visible to the user.",
    code="The python code to execute to do further analysis or calculation.",
)


class DeerFlowLike:
    """Builds and counts DeerFlow's requests for one canonical run."""

    def __init__(self, script: BenchScript) -> None:
        self.script = script
        self.requests: list[dict] = []
        self.prompts = {role: stand_in(n) for role, n in PROMPT_TOKENS.items()}
        self.sources: list[tuple[str, str]] = []  # (title, url) of what its tools found

    def send(self, role: str, messages: list[dict], tools: list[dict]) -> None:
        self.requests.append(
            {"messages": [{"role": "system", "content": self.prompts[role]}, *messages], "tools": tools}
        )

    def tokens(self) -> int:
        return sum(prompt_tokens(r) for r in self.requests)

    async def run(self) -> str:
        """The run; returns its findings, one step after the other."""
        question = {"role": "user", "content": QUESTION}
        self.send("coordinator", [question], [HANDOFF, DIRECT])
        self.send("planner", [question], [])
        plan = json.loads(self.script.planner({"messages": []}))
        findings: list[tuple[str, str]] = []
        async with httpx.AsyncClient() as client:
            for step in plan["steps"]:
                done = _completed(findings)
                if step["step_type"] == "research":
                    text = await self.researcher(client, plan["title"], step, done, len(findings) + 1)
                else:
                    text = self.coder(plan["title"], step, done)
                findings.append((step["title"], text))
        self.reporter(plan, findings)
        return "\n\n".join(text for _, text in findings)

    async def researcher(self, client: httpx.AsyncClient, title: str, step: dict, done: str, n: int) -> str:
        conversation = [_step_message(title, step, done), {"role": "user", "content": CITING}]
        tools = [SEARCH, CRAWL]
        query = f"Aldous index step {n} part 2"
        self.send("researcher", conversation, tools)
        hits = self.script.search(query, 3)
        results = [{"type": "page", "title": h["title"], "url": h["url"], "content": h["content"], "score": h["score"]}
                   for h in hits]  # fmt: skip
        self.sources += [(h["title"], h["url"]) for h in hits]
        conversation += _call("call_1", "web_search", {"query": query}, json.dumps(results, ensure_ascii=False))
        self.send("researcher", conversation, tools)
        url = hits[0]["url"]
        page = await client.get(url)
        _, markdown = CONVERTERS["text/html"](page.content, page.charset_encoding, url)
        crawled = json.dumps({"url": url, "crawled_content": markdown[:CRAWL_CHARS]}, ensure_ascii=False)
        conversation += _call("call_2", "crawl_tool", {"url": url}, crawled)
        self.send("researcher", conversation, tools)
        facts = re.findall(r"FACT: [^\n.]+", crawled)
        return "## Findings\n" + "".join(f"- {f}\n" for f in facts) + f"\n## References\n- [Source]({url})"

    def coder(self, title: str, step: dict, done: str) -> str:
        conversation = [_step_message(title, step, done)]
        self.send("coder", conversation, [PYTHON])
        code = "values = [1037, 1074, 1111]\nprint('ALDOUS_MEAN=' + str(sum(values) / len(values)))"
        conversation += _call(
            "call_3", "python_repl_tool", {"code": code}, "Successfully executed:\nALDOUS_MEAN=1074.0"
        )
        self.send("coder", conversation, [PYTHON])
        return "Computed with Python:\nALDOUS_MEAN=1074.0"

    def reporter(self, plan: dict, findings: list[tuple[str, str]]) -> None:
        messages = [{"role": "user", "content": f"# Research Requirements\n\n## Task\n\n{plan['title']}\n\n"
                                                f"## Description\n\n{plan['thought']}"}]  # fmt: skip
        messages += [
            {"role": "user", "content": f"Below are some observations for the research task:\n\n{text}"}
            for _, text in findings
        ]
        listed = "".join(
            f"{n}. **{title}**\n   - URL: {url}\n   - Domain: {httpx.URL(url).host}\n\n"
            for n, (title, url) in enumerate(dict.fromkeys(self.sources), 1)
        )
        messages.append({"role": "user", "content": f"\n\n## Available Source References (use these in References "
                                                    f"section):\n\n{listed}"})  # fmt: skip
        self.send("reporter", messages, [])


def _step_message(title: str, step: dict, done: str) -> dict:
    return {
        "role": "user",
        "content": f"# Research Topic\n\n{title}\n\n{done}# Current Step\n\n## Title\n\n{step['title']}\n\n"
        f"## Description\n\n{step['description']}\n\n## Locale\n\nen-US",
    }


def _completed(findings: list[tuple[str, str]]) -> str:
    if not findings:
        return ""
    return "# Completed Research Steps\n\n" + "".join(
        f"## Completed Step {n}: {title}\n\n<finding>\n{text}\n</finding>\n\n"
        for n, (title, text) in enumerate(findings, 1)
    )


def _call(ident: str, name: str, arguments: dict, result: str) -> list[dict]:
    call = {"id": ident, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": ident, "content": result},
    ]


def facts_found(findings: str) -> int:
    """How many of the research steps' facts the findings hold."""
    return sum(canonical_fact(s) in findings for s in range(1, RESEARCH_STEPS + 1))
