"""A scripted model for evaluation suites: ``ResearchScript`` whose plan is
one research step on the question itself and whose researcher searches for
the question, crawls the first result and reports its ``FACT:`` lines. So a
report holds what the offline web's best page for the question says, and
nothing the corpus does not."""

from __future__ import annotations

import json
import re

from testkit.llm_server import Reply, has_tool_result, tool_messages
from testkit.research_script import ResearchScript, first_user, plan_json


class EvalScript(ResearchScript):
    def planner(self, request: dict) -> Reply | str:
        topic = (first_user(request).split("\n") + ["", ""])[1].strip() or "the question"
        return plan_json("Scripted evaluation", [(f"Look up: {topic}", "research")])

    def researcher(self, request: dict) -> Reply | str:
        found = re.search(r"Look up: ([^\n]+)", first_user(request))
        query = found.group(1) if found else first_user(request)[:200]
        if not has_tool_result(request, "web_search"):
            return Reply(tool_calls=[("web_search", {"query": query})])
        text = "\n".join(m.get("content") or "" for m in tool_messages(request))
        if not has_tool_result(request, "crawl"):
            url = re.search(r"URL: (\S+)", text)
            return Reply(tool_calls=[("crawl", {"url": url.group(1) if url else "http://none.invalid/"})])
        facts = re.findall(r"FACT: [^\n]+", text)
        urls = re.findall(r"URL: (\S+)", text)[-1:]  # the page it crawled
        return (
            "## Findings\n"
            + "\n".join(f"- {f}" for f in facts)
            + "\n\n## References\n"
            + "\n".join(f"- [Source]({u})" for u in urls)
        )

    def judge(self, request: dict) -> Reply | str:
        """A rubric that depends on the report: 8 for depth when it found facts."""
        report = request["messages"][-1]["content"]
        depth = 8 if "FACT:" in report else 3
        rubric = {"score": 7, "reason": "scripted"}
        return json.dumps(
            {
                "comprehensiveness": rubric,
                "depth": {"score": depth, "reason": "facts found" if depth == 8 else "no facts"},
                "instruction_following": rubric,
                "readability": rubric,
            }
        )
