"""Scripted model, search results and pages for the benchmarks.

Two shapes of run:

- the *canonical* run: coordinator hands off; the planner makes 3 research
  steps and 1 processing step; every research step reads its page itself
  (the evidence the workflow gathers: one search, one crawl), beside its
  researcher's first turn; the researcher searches once and answers from
  the step's passages (2 model calls, 1 search) — or, when they have not
  come by then (no simulated latency), crawls the page its search found
  and answers (3 model calls); with ``reads``, it crawls that page anyway
  (as DeerFlow's researcher does); with ``uses_evidence`` off, it searches
  twice, crawls its page and answers (4 model calls) as if it had been
  given nothing. The coder runs one cell (which sleeps ``code_seconds``)
  and answers; the reporter quotes the findings.
- the *loop* run: one research step whose researcher crawls one of 20 large
  pages per turn, carrying the ``FACT:`` lines it has read forward in its
  own assistant message, and answers with all of them after the last page.

Latency is simulated by the servers (``ScriptedServer.latency`` and the page
server's per-route delay), not by this script, except for the code cell,
which sleeps inside the sandbox.
"""

from __future__ import annotations

import json
import random
import re

from testkit.llm_server import Reply, has_tool_result, last_user, role_of, tool_messages
from testkit.pages import PageServer, article

RESEARCH_STEPS = 3
LOOP_PAGES = 20
LOOP_PAGE_BYTES = 100_000
_FACT = re.compile(r"FACT: [^\n.]+")
_STEP = re.compile(r"## Research step (\d+)")


def first_user(request: dict) -> str:
    return next((m.get("content") or "" for m in request["messages"] if m["role"] == "user"), "")


def _calls(request: dict, name: str) -> int:
    """How many times the assistant has called ``name`` in this conversation."""
    return sum(
        1
        for m in request.get("messages", [])
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == name
    )


def user_texts(request: dict) -> list[str]:
    """The user messages: the task (with the step's passages when they came
    first) and any passages the workflow gave later."""
    return [m.get("content") or "" for m in request.get("messages", []) if m.get("role") == "user"]


def facts_in(request: dict) -> list[str]:
    """Every FACT line in the conversation (tool results, the evidence with
    the task, own notes), in order, once."""
    seen: dict[str, None] = {}
    for m in request.get("messages", []):
        if m.get("role") in ("tool", "assistant", "user"):
            for fact in _FACT.findall(m.get("content") or ""):
                seen.setdefault(fact.strip())
    return list(seen)


def canonical_fact(step: int) -> str:
    return f"FACT: step {step} found that the Aldous index rose to {1000 + 37 * step} points"


def loop_fact(page: int) -> str:
    return f"FACT: ledger page {page} records cargo tally {7919 * page + 104729} under seal QX{page:02d}Z"


def _filler(seed: int, size: int) -> list[str]:
    """Paragraphs of varied prose totalling about ``size`` characters."""
    rng = random.Random(seed)
    words = (
        "harbour survey tide ledger cargo vessel northern coastal archive keeper weather storm "
        "signal beacon record voyage merchant timber grain salt copper island channel reef "
        "inspection season report annual register clerk customs quay crane warehouse"
    ).split()
    paragraphs, total = [], 0
    while total < size:
        sentences = []
        for _ in range(rng.randint(4, 8)):
            n = rng.randint(8, 18)
            sentence = " ".join(rng.choice(words) for _ in range(n))
            sentences.append(sentence[0].upper() + sentence[1:] + ".")
        paragraph = " ".join(sentences)
        paragraphs.append(paragraph)
        total += len(paragraph) + 12
    return paragraphs


SHORT_PAGE = 3_000  # characters of a canonical page; long pages: 150 KB, the fact 60 % in


def add_canonical_pages(pages: PageServer, delay: float, size: int = SHORT_PAGE, results: int = 1) -> None:
    """Each research step's page (its fact near the start of a short page,
    60 % into a long one), and ``results`` - 1 more pages of prose a search
    for the step also finds (``/stepN-2``…)."""
    for step in range(1, RESEARCH_STEPS + 1):
        body = _filler(step, size)
        body.insert(2 if size <= SHORT_PAGE else int(len(body) * 0.6), canonical_fact(step) + ".")
        pages.add(f"/step{step}", article(f"Aldous index, part {step}", body), delay=delay)
        for k in range(2, results + 1):
            pages.add(
                f"/step{step}-{k}", article(f"Aldous notes {step}.{k}", _filler(10 * step + k, size)), delay=delay
            )


def add_loop_pages(pages: PageServer, delay: float) -> list[str]:
    paths = []
    for page in range(1, LOOP_PAGES + 1):
        body = _filler(100 + page, LOOP_PAGE_BYTES - 2000)
        body.insert(len(body) // 2, loop_fact(page) + ".")  # in the middle of the page
        html = article(f"Harbour ledger, page {page}", body)
        pages.add(f"/ledger/{page}", html, delay=delay)
        paths.append(f"/ledger/{page}")
    return paths


def plan_json(steps: list[tuple[str, str]]) -> str:
    return json.dumps(
        {
            "locale": "en-US",
            "has_enough_context": False,
            "thought": "Scripted benchmark plan.",
            "title": "Benchmark research",
            "steps": [
                {"need_search": kind == "research", "title": title, "description": f"Do: {title}", "step_type": kind}
                for title, kind in steps
            ],
        }
    )


class BenchScript:
    """The model for every role. ``mode`` is "canonical" or "loop"."""

    def __init__(self, pages: PageServer, mode: str = "canonical", code_seconds: float = 0.5) -> None:
        self.pages = pages
        self.mode = mode
        self.code_seconds = code_seconds
        self.loop_paths: list[str] = []
        self.uses_evidence = True  # False: a researcher that searches and crawls as if it had been given nothing
        self.reads = False  # True: it also crawls the page its search found (as DeerFlow's researcher does)
        self.results = 1  # pages a search finds: the step's page, then pages of prose (add_canonical_pages)

    # -- search results: each research step has its own page -----------------

    def search(self, query: str, max_results: int) -> list[dict]:
        found = re.search(r"step (\d+)", query)
        step = found.group(1) if found else "1"
        first = {
            "title": f"Aldous index, part {step}",
            "url": self.pages.url(f"/step{step}"),
            "content": f"Search result for {query}.",
            "score": 0.9,
        }
        more = [
            first | {"title": f"Aldous notes {step}.{k}", "url": self.pages.url(f"/step{step}-{k}"), "score": 0.5}
            for k in range(2, self.results + 1)
        ]
        return [first, *more][:max_results]

    # -- the model -------------------------------------------------------------

    def __call__(self, request: dict) -> Reply | str:
        return getattr(self, role_of(request))(request)

    def coordinator(self, request: dict) -> Reply | str:
        topic = last_user(request)
        return Reply(tool_calls=[("handoff_to_planner", {"research_topic": topic, "locale": "en-US"})])

    def planner(self, request: dict) -> Reply | str:
        if self.mode == "loop":
            return plan_json([("Research step 1: read the harbour ledger", "research")])
        steps = [(f"Research step {i}: the Aldous index, part {i}", "research") for i in range(1, RESEARCH_STEPS + 1)]
        steps.append(("Tabulate the Aldous index", "processing"))
        return plan_json(steps)

    def researcher(self, request: dict) -> Reply | str:
        found = _STEP.search(first_user(request))
        step = int(found.group(1)) if found else 1
        if self.mode == "loop":
            return self._loop_researcher(request)
        searches = _calls(request, "web_search")
        if self.uses_evidence:  # it searches once, then writes from the step's passages when it has them
            if searches < 1:
                return Reply(tool_calls=[("web_search", {"query": f"Aldous index step {step} part 2"})])
            given = canonical_fact(step) in "\n".join(user_texts(request))
            if (self.reads or not given) and not has_tool_result(request, "crawl"):
                return Reply(tool_calls=[("crawl", {"url": self._found(request, step)})])  # the page it found
            return self._findings(request)
        if searches < 2:
            query = f"Aldous index step {step} part {searches + 1}"
            return Reply(tool_calls=[("web_search", {"query": query})])
        if not has_tool_result(request, "crawl"):
            return Reply(tool_calls=[("crawl", {"url": self._found(request, step)})])
        return self._findings(request)

    def _found(self, request: dict, step: int) -> str:
        """The first page its searches found."""
        url = re.search(r"URL: (\S+)", "\n".join(m.get("content") or "" for m in tool_messages(request)))
        return url.group(1) if url else self.pages.url(f"/step{step}")

    def _loop_researcher(self, request: dict) -> Reply | str:
        crawled = _calls(request, "crawl")
        facts = facts_in(request)
        if crawled < len(self.loop_paths):
            notes = "Notes so far:\n" + "\n".join(f"- {f}" for f in facts) if facts else "Starting."
            url = self.pages.url(self.loop_paths[crawled])
            return Reply(content=notes, tool_calls=[("crawl", {"url": url})])
        return self._findings(request)

    def _findings(self, request: dict) -> str:
        text = "\n".join(m.get("content") or "" for m in tool_messages(request))
        given = "\n".join(user_texts(request))
        urls = sorted(set(re.findall(r"URL: (\S+)", text)) | set(re.findall(r"\]\((http[^)\s]+)\)", given)))
        return (
            "## Findings\n"
            + "\n".join(f"- {f}" for f in facts_in(request))
            + "\n\n## References\n"
            + "\n".join(f"- [Source]({u})" for u in urls)
        )

    def coder(self, request: dict) -> Reply | str:
        if not has_tool_result(request, "run_python"):
            code = (
                "import time\n"
                f"time.sleep({self.code_seconds!r})\n"
                "values = [1037, 1074, 1111]\n"
                "print('ALDOUS_MEAN=' + str(sum(values) / len(values)))"
            )
            return Reply(tool_calls=[("run_python", {"code": code})])
        output = "\n".join(m.get("content") or "" for m in tool_messages(request))
        return f"Computed with Python:\n{output}"

    def analyst(self, request: dict) -> Reply | str:
        return "Analysis: the findings agree."

    def reporter(self, request: dict) -> Reply | str:
        return f"# Benchmark Report\n\n## Detailed Analysis\n{first_user(request)}\n"

    def unknown(self, request: dict) -> Reply | str:
        return Reply(status=400, content="unscripted request")
