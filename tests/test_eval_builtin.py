"""The built-in evaluation suite is sound: a varied corpus, tasks of every
kind the suite promises, and every accepted answer where the tasks say it is
(and every distractor or unanswerable figure where it is not)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from client.evaluation.corpus import load_corpus
from client.evaluation.web import CorpusWeb

BUILTIN = Path(__file__).resolve().parent.parent / "client" / "evaluation" / "builtin"
CORPUS = BUILTIN / "corpus"
DOCUMENTS = {document.path: document for document in load_corpus(CORPUS)}
TASKS = [json.loads(line) for line in (BUILTIN / "tasks.jsonl").read_text(encoding="utf-8").splitlines() if line]
BY_ID = {task["id"]: task for task in TASKS}


def normal(text: str) -> str:
    return " ".join(text.lower().split())


def holds(text: str, accepted: list[str]) -> bool:
    return any(normal(a) in normal(text) for a in accepted)


def resource_text(task: dict) -> str:
    return "\n".join((BUILTIN / r).read_text(encoding="utf-8") for r in task.get("resources", []))


def sources_of(fact: dict) -> list[str]:
    if "sources" in fact:
        return fact["sources"]
    return [path for path, d in DOCUMENTS.items() if holds(d.text, fact.get("any", []))]


def test_corpus_is_varied_and_modest():
    assert len(DOCUMENTS) >= 40
    kinds = {Path(path).suffix for path in DOCUMENTS}
    assert {".md", ".html", ".pdf", ".txt"} <= kinds
    assert sum(1 for d in DOCUMENTS.values() if re.search(r"[\u4e00-\u9fff]{10}", d.text)) >= 3  # Chinese pages
    assert max(len(d.text) for d in DOCUMENTS.values()) > 40_000  # a page well past a small window
    pdf = DOCUMENTS["surveys/vellmark-coastal-bird-survey-2023.pdf"]
    assert "kittiwake" in pdf.text and pdf.title.startswith("Vellmark Coastal Bird Survey 2023")
    size = sum(f.stat().st_size for f in BUILTIN.rglob("*") if f.is_file())
    assert size < 1_500_000
    assert all(d.title and d.title != Path(d.path).stem for d in DOCUMENTS.values())


def test_tasks_are_well_formed_and_cover_every_kind():
    assert len(TASKS) >= 15
    assert len(BY_ID) == len(TASKS)
    for task in TASKS:
        assert set(task) <= {"id", "question", "facts", "avoid", "unanswerable", "resources", "options"}, task["id"]
        assert task["question"].strip()
        assert task["facts"] or task["unanswerable"], task["id"]
        for fact in task["facts"]:
            assert ("any" in fact) != ("number" in fact), (task["id"], fact)
            assert all(isinstance(a, str) and a.strip() for a in fact.get("any", [])), fact
            assert all(s in DOCUMENTS for s in fact.get("sources", [])), (task["id"], fact)
        assert len({f["id"] for f in task["facts"] + task["avoid"]}) == len(task["facts"]) + len(task["avoid"])
    assert any("number" in f for t in TASKS for f in t["facts"])  # computed
    assert any(t["unanswerable"] for t in TASKS)
    assert any(t["avoid"] for t in TASKS)  # an outdated figure to avoid
    assert any(t.get("resources") for t in TASKS)  # local documents
    assert any(re.search(r"[\u4e00-\u9fff]", t["question"]) for t in TASKS)  # Chinese
    assert any("table" in t["question"].lower() for t in TASKS)  # comparison
    multi = [t for t in TASKS if len({s for f in t["facts"] for s in f.get("sources", [])}) >= 2]
    assert multi  # facts from two documents


@pytest.mark.parametrize("task", [t for t in TASKS if not t["unanswerable"]], ids=lambda t: t["id"])
def test_every_fact_is_in_its_sources(task):
    for fact in task["facts"]:
        if "number" in fact:
            continue  # computed: see the tests below
        sources = sources_of(fact)
        if not sources:  # only in the task's own resources
            assert holds(resource_text(task), fact["any"]), (task["id"], fact)
            continue
        for path in sources:
            assert holds(DOCUMENTS[path].text, fact["any"]), (task["id"], fact["id"], path)


def test_avoided_figures_are_only_on_distractor_pages():
    for task in TASKS:
        right = {path for fact in task["facts"] for path in sources_of(fact)}
        for avoid in task["avoid"]:
            where = {path for path, d in DOCUMENTS.items() if holds(d.text, avoid["any"])}
            assert where, (task["id"], avoid)  # a real distractor somewhere in the corpus
            assert not where & right, (task["id"], avoid, where & right)


def test_unanswerable_tasks_have_no_answer_in_the_corpus():
    hallow = [d for d in DOCUMENTS.values() if "hallow point" in d.text.lower()]
    assert not any(
        re.search(r"hallow point[^.\n|]{0,40}\b(population|residents|inhabitants)\b", normal(d.text)) for d in hallow
    )
    census = DOCUMENTS["surveys/vellmark-census-2023.html"].text
    assert "Hallow Point" not in census and "under 5,000 (aggregate)" in census
    assert not any("2012" in d.text for d in DOCUMENTS.values() if "olvane" in d.text.lower())
    for task in TASKS:
        if task["unanswerable"]:
            for fact in task["facts"]:
                assert not any(holds(d.text, fact.get("any", [])) for d in DOCUMENTS.values())


def test_local_resources_are_not_on_the_web():
    task = BY_ID["tern5-memo"]
    for resource in task["resources"]:
        file = BUILTIN / resource
        assert file.is_file() and CORPUS not in file.resolve().parents
    assert not any("tern-5" in d.text.lower() for d in DOCUMENTS.values())
    assert holds(resource_text(task), task["facts"][0]["any"])


def table_numbers(text: str, label: str) -> list[float]:
    """The numbers in the row that starts with ``label``."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == label:
            return [float(c.replace(",", "")) for c in cells[1:] if re.fullmatch(r"[\d,.]+", c)]
    raise AssertionError(f"no row {label!r}")


def test_revenue_growth_is_computed_from_the_report():
    report = DOCUMENTS["firms/olvane-annual-report-2023.md"].text
    (fact,) = BY_ID["olvane-revenue-growth"]["facts"]
    growth = (table_numbers(report, "2023")[0] / table_numbers(report, "2021")[0] - 1) * 100
    assert abs(growth - fact["number"]) <= 0.05 < fact["tolerance"]
    assert not re.search(r"41\.3|41 ?%", report)  # the coder must compute it


def test_ferry_average_is_computed_from_the_table():
    page = DOCUMENTS["firms/harrowgate-ferries.html"].text
    months = ["January", "February", "March", "April", "May", "June"]
    average = sum(table_numbers(page, m)[0] for m in months) / 6
    (fact,) = BY_ID["ferry-average"]["facts"]
    assert abs(average - fact["number"]) < 0.01 < fact["tolerance"]


def test_the_long_page_hides_its_fact_deep_inside():
    minutes = DOCUMENTS["council/brackwater-harbour-board-minutes.html"].text
    assert minutes.find("Aldane Marine Works") > 30_000
    assert [path for path, d in DOCUMENTS.items() if "aldane" in d.text.lower() and "3.2 million" in d.text] == [
        "council/brackwater-harbour-board-minutes.html"
    ]


def test_search_finds_a_source_of_every_answerable_task():
    missed = []
    with CorpusWeb(CORPUS, documents=list(DOCUMENTS.values())) as web:
        for task in TASKS:
            wanted = {path for fact in task["facts"] for path in sources_of(fact)}
            if task["unanswerable"] or not wanted:
                continue
            found = {web.path_for(hit["url"]) for hit in web.search(task["question"], 5)["results"]}
            if not found & wanted:
                missed.append(task["id"])
    assert not missed
