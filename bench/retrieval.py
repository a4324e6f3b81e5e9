"""9. What a research step's own reading finds, without a model (issue 28).

Every task of the built-in eval suite, its question as the one research step
(what a planner that fails gives: SmolLM2's plans, in the real-model eval),
gathered the way ``workflows/evidence.py`` gathers: the step's queries
(``step_queries``), the eval's search engine over its corpus (the one
``eval`` serves, ``client/evaluation/web.py``), the pages to read
(``candidates``), each read by the crawler's converters, ranked within the
evidence budget (``rank_evidence``'s ``evidence_set``), and the lead followed
(``activities/leads.py``). Scored like the eval's ``evidence_recall``: the
required facts present in the passages. Settings side by side: 3 pages (the
default before issue 28's last round), 5 pages, 5 pages and the lead.

A task's own documents (``resources``) stand in whole for what its
``local_search`` finds. No Temporal, no model: a few seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from activities.documents import CONVERTERS
from activities.evidence import LOCAL_TITLE, Source, evidence_set
from bench.benchmarks import _row
from client.evaluation.corpus import load_corpus
from client.evaluation.web import Index
from infra.eval_score import score
from workflows.eval_models import EvalTask
from workflows.evidence import LEAD_PAGES, candidates, focus, step_queries
from workflows.evidence_models import GatherRequest
from workflows.models import Citation, ResearchResult, Step
from workflows.tool_models import ToolResult

SUITE = Path(__file__).resolve().parent.parent / "client" / "evaluation" / "builtin"
HOST = "http://corpus.invalid/"
TARGET = 0.8  # the real-model eval's evidence_recall target (issue 28)
SETTINGS = (("3 pages", 3, False), ("5 pages", 5, False), ("5 pages + lead", 5, True))
MIME = {".html": "text/html", ".pdf": "application/pdf"}


@dataclass
class Corpus:
    index: Index
    paths: list[str]

    def search(self, query: str, results: int) -> ToolResult:
        hits = self.index.search(query, results)
        return ToolResult(content="", sources=[Citation(title=d.title, url=HOST + d.path) for d, _, _ in hits])


def read(url: str) -> Source:
    path = url.removeprefix(HOST)
    body = (SUITE / "corpus" / path).read_bytes()
    title, markdown = CONVERTERS[MIME.get(Path(path).suffix, "text/plain")](body, "utf-8", url)
    return Source(title or path, url, markdown)


def gathered(corpus: Corpus, task: EvalTask, pages: int, lead: bool) -> tuple[str, int, int]:
    """The passages a step asking the task's question gathers, pages read, searches."""
    step = Step(title=task.question)
    queries = step_queries(task.question, step)
    found = [corpus.search(q, pages) for q in queries]
    sources = [read(url) for url, _ in candidates(found, pages, set())]
    local = "\n\n".join((SUITE / r).read_text(encoding="utf-8") for r in task.resources)
    extra = [Source(LOCAL_TITLE, "", local)] if local else []
    request = GatherRequest(focus=focus(task.question, step), queries=queries, budget=3_000)
    ranked = evidence_set(request, sources + extra)
    searches = len(queries)
    if lead and ranked.lead:
        searches += 1
        more = candidates([corpus.search(ranked.lead, pages)], LEAD_PAGES, {s.url for s in sources})
        sources += [read(url) for url, _ in more]
        ranked = evidence_set(request, sources + extra)
    return ranked.text, len(sources), searches


def recall(task: EvalTask, paths: list[str], shown: str) -> float | None:
    result = ResearchResult(status="completed", question=task.question, locale="en-US", final_report="")
    return score(task, paths, result, [], shown).evidence_recall


def bench_retrieval() -> dict:
    documents = load_corpus(SUITE / "corpus")
    corpus = Corpus(Index(documents), [d.path for d in documents])
    lines = (SUITE / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    tasks = [t for t in (EvalTask.model_validate(json.loads(line)) for line in lines if line.strip()) if t.facts]
    rows, per_task = [], {}
    for name, pages, lead in SETTINGS:
        scores, read_pages, searches = [], 0, 0
        for task in tasks:
            text, n, s = gathered(corpus, task, pages, lead)
            value = recall(task, corpus.paths, text)
            per_task.setdefault(task.id, {})[name] = value
            scores += [value] if value is not None else []
            read_pages, searches = read_pages + n, searches + s
        mean = round(sum(scores) / len(scores), 3)
        met = mean >= TARGET if lead else None
        rows.append(_row(f"evidence recall, {name}", mean, "", f">= {TARGET}" if lead else "", met))
        rows.append(_row(f"pages read per task, {name}", round(read_pages / len(tasks), 2)))
        rows.append(_row(f"searches per task, {name}", round(searches / len(tasks), 2)))
    return {"rows": rows, "tasks": per_task}
