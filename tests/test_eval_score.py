"""The evaluation's scorer on hand-written reports: exactly the scores each
should get (infra/eval_score.py, docs/eval.md)."""

from __future__ import annotations

import pytest

from activities.evaluation import score_request
from infra.eval_score import Text, numbers_in, parse_judge, score, source_paths, states_not_found
from workflows.eval_models import EvalTask, FactSpec, ScoreRequest
from workflows.models import Citation, ResearchResult

CORPUS = ["people/ada.md", "towns/lantern rock.md", "archive/old-almanac.html"]
WEB = "http://127.0.0.1:5555"
TASK = EvalTask.model_validate(
    {
        "id": "keeper",
        "question": "Who kept the Lantern Rock lighthouse and how many ships did the keeper log in 1911?",
        "facts": [
            {"id": "f1", "any": ["Ada Halvorsen", "A. Halvorsen"], "sources": ["people/ada.md"]},
            {"id": "f2", "any": [{"number": 4417, "tolerance": 0}], "sources": ["towns/lantern rock.md"]},
        ],
        "avoid": [{"id": "d1", "any": [{"number": 3900}]}],
    }
)
UNANSWERABLE = EvalTask(id="salary", question="What was the keeper's salary?", unanswerable=True)
SOURCES = f"\n\n## Sources\n- [Ada Halvorsen]({WEB}/people/ada.md)\n- [Lantern Rock]({WEB}/towns/lantern%20rock.md)\n"


def result(report: str, citations: list[str] = ()) -> ResearchResult:
    return ResearchResult(
        status="completed",
        question="q",
        locale="en-US",
        final_report=report,
        citations=[Citation(url=url) for url in citations],
    )


def test_a_perfect_report():
    report = "# The keeper\n\nThe keeper was **Ada   Halvorsen**; in 1911 she logged 4,417 ships." + SOURCES
    scores = score(TASK, CORPUS, result(report))
    assert scores.fact_recall == 1.0
    assert scores.facts == {"f1": True, "f2": True}
    assert scores.avoided == {"d1": True}
    assert scores.distractors_used == 0
    assert scores.citations == [f"{WEB}/people/ada.md", f"{WEB}/towns/lantern%20rock.md"]
    assert scores.citation_validity == 1.0
    assert scores.citation_support == 1.0
    assert scores.not_in_corpus_stated is None


def test_a_report_that_invents_a_citation():
    report = (
        "The keeper was Ada Halvorsen. She logged 4417 ships in 1911 ([records](https://example.com/records))."
        + SOURCES
        + f"- [Harbour log]({WEB}/harbour/log.md)\n"
    )
    scores = score(TASK, CORPUS, result(report))
    assert scores.fact_recall == 1.0
    assert len(scores.citations) == 4
    assert scores.citation_validity == 0.5  # example.com and a page the corpus does not have
    assert scores.citation_support == 1.0


def test_a_report_that_uses_the_distractor():
    report = f"The keeper was A. Halvorsen, who logged 3,900 ships in 1911.\n\n[1]: {WEB}/people/ada.md"
    scores = score(TASK, CORPUS, result(report))
    assert scores.facts == {"f1": True, "f2": False}
    assert scores.fact_recall == 0.5
    assert scores.avoided == {"d1": False}
    assert scores.distractors_used == 1
    assert scores.citation_validity == 1.0
    assert scores.citation_support == 1.0


def test_a_report_that_misses_a_fact_and_cites_the_wrong_page():
    report = "The keeper of Lantern Rock was Ada Halvorsen. The log of 1911 is lost."
    scores = score(TASK, CORPUS, result(report, ["http://localhost:9999/towns/lantern%20rock.md"]))
    assert scores.facts == {"f1": True, "f2": False}
    assert scores.fact_recall == 0.5
    assert scores.citations == ["http://localhost:9999/towns/lantern%20rock.md"]  # the result's citations count
    assert scores.citation_validity == 1.0  # any port
    assert scores.citation_support == 0.0  # f1's page is not cited


def test_a_report_that_answers_an_unanswerable_task():
    scores = score(UNANSWERABLE, CORPUS, result("The keeper earned 40 crowns a year, paid in silver."))
    assert scores.not_in_corpus_stated is False
    assert scores.fact_recall is None
    assert scores.citations == [] and scores.citation_validity is None and scores.citation_support is None


@pytest.mark.parametrize(
    "report",
    [
        "The keeper's salary could not be found in the sources.",
        "There is NO information   about the salary in the documents.",
        "The sources don’t give a salary.",
        "资料中没有关于薪水的信息。",
        "关于守塔人的薪水，未找到相关记录。",
    ],
)
def test_a_report_that_says_the_answer_is_not_in_the_corpus(report: str):
    assert score(UNANSWERABLE, CORPUS, result(report)).not_in_corpus_stated is True


def test_no_statement_is_seen_where_there_is_none():
    assert not states_not_found("The keeper found 12 ships and informed the harbour.")


def test_numbers_as_reports_write_them():
    text = "Growth was 12.5% (from 1,234,567.5 to −3.2); 2019-2023; v1.2.3; 4\u202f417 ships; 4417ms"
    assert numbers_in(text) == [12.5, 1234567.5, -3.2, 2019, 2023, 4417, 4417]


def test_a_number_within_its_tolerance():
    fact = FactSpec(id="g", any=[{"number": 12.5, "tolerance": 0.1}])
    found = [Text(t).has(fact.any[0]) for t in ("rose 12.46 %", "rose 12.6%", "rose 12.7%", "rose 125%")]
    assert found == [True, True, False, False]


def test_a_facts_sources_are_the_documents_that_hold_it_unless_given():
    documents = {"a.md": Text("Ada HALVORSEN kept the light."), "b.md": Text("Nothing here."), "c.md": Text("4,417")}
    fact = FactSpec(id="f", any=["ada halvorsen", {"number": 4417}])
    assert source_paths(fact, documents) == ["a.md", "c.md"]
    assert source_paths(fact.model_copy(update={"sources": ["b.md"]}), documents) == ["b.md"]


def test_the_judges_rubric_is_read_beside_the_scores():
    reply = (
        '```json\n{"comprehensiveness": {"score": 8, "reason": "covers both"}, "depth": {"score": 6, "reason": "thin"},'
        ' "instruction_following": {"score": 9, "reason": "ok"}, "readability": {"score": 7, "reason": "clear"}}\n```'
    )
    scores = score_request(ScoreRequest(task=TASK, corpus=CORPUS, result=result("x"), judge_reply=reply))
    assert scores.fact_recall == 0.0  # the judge changes nothing of the deterministic scores
    assert scores.judge.comprehensiveness == 8 and scores.judge.readability == 7
    assert scores.judge.overall == 7.5 and scores.judge.problem is None
    assert scores.judge.reasons["depth"] == "thin"
    bad = parse_judge("I liked it a lot, 11/10")
    assert bad.overall is None and bad.problem


def test_a_fact_no_web_page_holds_is_left_out_of_citation_support():
    task = TASK.model_copy(update={"facts": [*TASK.facts, FactSpec(id="memo", any=["board memo"])]})
    report = "Ada Halvorsen logged 4417 ships, says the board memo." + SOURCES
    scores = score(task, CORPUS, result(report))
    assert scores.fact_recall == 1.0 and scores.citation_support == 1.0


def test_a_citation_of_the_tasks_own_local_document_is_valid():
    task = TASK.model_copy(update={"resources": ["/data/local", "/data/memo.md"]})
    urls = [
        "file:///data/local/board%20memo.md#part",
        "file:///data/memo.md",
        "file:///etc/passwd",
        "file:///data/localx",
    ]
    scores = score(task, CORPUS, result("Ada Halvorsen.", urls))
    assert scores.citation_validity == 0.5


def test_a_number_only_in_a_link_is_not_stated():
    """The offline web's host (127.0.0.1), its port and the years in corpus
    paths are in every report that cites a page: no number fact is found there."""
    task = EvalTask.model_validate(
        {
            "id": "furnaces",
            "question": "How many furnaces were there in 1890?",
            "facts": [
                {"id": "host", "number": 127},
                {"id": "port", "number": 5555},
                {"id": "year", "number": 2023, "tolerance": 0},
                {"id": "local", "number": 77},
                {"id": "stated", "number": 4417},
            ],
        }
    )
    report = (
        "The keeper logged 4,417 ships.\n\n## Key Citations\n"
        f"- [Census]({WEB}/surveys/census-2023.md)\n\n- <{WEB}/towns/lantern%20rock.md>\n\n"
        "- [Memo](file:///data/run-77/memo.md)\n"
    )
    scores = score(task, CORPUS, result(report))
    assert scores.facts == {"host": False, "port": False, "year": False, "local": False, "stated": True}
    assert scores.fact_recall == 0.2


def test_a_list_number_or_citation_marker_is_not_stated():
    """ "1.", "2)" before list items and "[3]", "[^4]" citation markers count nothing;
    the numbers in the items do."""
    facts = [{"id": f"n{n}", "number": n} for n in (1, 2, 3, 4, 17, 12)]
    task = EvalTask.model_validate({"id": "kilns", "question": "How many kilns?", "facts": facts})
    report = "Key points:\n\n1. The works runs 17 kilns [3].\n  2) It opened in 1903[^4].\n10. Twelve: 12.\n"
    scores = score(task, CORPUS, result(report))
    assert scores.facts == {"n1": False, "n2": False, "n3": False, "n4": False, "n17": True, "n12": True}


# --- issue 31, item 9: what a report repeats of its request scores nothing ------------


def scored(task: EvalTask, report: str, citations: list[str] = ()):
    """As the scoring activity scores: with the prompts as the request's text."""
    return score_request(ScoreRequest(task=task, corpus=CORPUS, result=result(report, citations)))


def test_a_number_written_against_chinese_characters_is_read():
    task = EvalTask.model_validate(
        {"id": "zh", "question": "人口增长了多少？", "facts": [{"id": "g", "number": 36.5, "tolerance": 0.05}]}
    )
    assert numbers_in("人口增长了36.5%，达到23,480人（2023年）") == [36.5, 23480, 2023]
    assert scored(task, "自2010年以来，人口增长了36.5%。").facts == {"g": True}


def test_a_report_that_is_the_reporters_list_of_sources_scores_nothing():
    """Gemma's "report": the request's source list, whose page titles happen to be answers."""
    report = (
        "# Sources you may cite\n"
        f"- [Ada Halvorsen, keeper of Lantern Rock]({WEB}/people/ada.md)\n"
        f"- [Lantern Rock: 4,417 ships logged in 1911]({WEB}/towns/lantern%20rock.md)\n"
    )
    scores = scored(TASK, report, [f"{WEB}/people/ada.md"])
    assert scores.echo is True
    assert scores.facts == {"f1": False, "f2": False} and scores.fact_recall == 0.0
    assert scores.citations == [] and scores.citation_validity is None and scores.citation_support is None


def test_a_report_that_echoes_the_reporters_instructions_scores_nothing():
    from activities.llm import render_prompt

    instructions = render_prompt("reporter", {"locale": "en-US", "current_time": "2026-11-26", "report_style": "news"})
    scores = scored(TASK, instructions + "\n\nAda Halvorsen, 4417." + SOURCES)
    assert scores.echo is True and scores.fact_recall == 0.0 and scores.citation_validity is None


def test_a_source_lists_titles_are_not_findings_but_its_links_are_citations():
    report = (
        "# The keeper\n\nThe records of the lighthouse were read for this report.\n\n## Key Citations\n"
        f"- [Ada Halvorsen]({WEB}/people/ada.md)\n- [4,417 ships in 1911]({WEB}/towns/lantern%20rock.md)\n"
    )
    scores = scored(TASK, report)
    assert scores.echo is False and scores.facts == {"f1": False, "f2": False}
    assert scores.citation_validity == 1.0 and len(scores.citations) == 2


def test_a_fact_the_question_states_is_not_credited_and_not_required():
    task = EvalTask.model_validate(
        {
            "id": "given",
            "question": "The keeper logged 4,417 ships in 1911. Who was the keeper of Lantern Rock?",
            "facts": [
                {"id": "keeper", "any": ["Ada Halvorsen"]},
                {"id": "ships", "any": [{"number": 4417}, "4,417 ships"]},
            ],
        }
    )
    echoed = scored(task, "The keeper logged 4,417 ships in 1911. Who was the keeper of Lantern Rock? Unknown.")
    assert echoed.facts == {"keeper": False, "ships": False} and echoed.unscored == ["ships"]
    assert echoed.fact_recall == 0.0  # one fact required; the other is the question's own
    answered = scored(task, "The keeper of Lantern Rock in 1911 was Ada Halvorsen, who logged 4,417 ships.")
    assert answered.facts == {"keeper": True, "ships": False} and answered.fact_recall == 1.0


def test_a_report_that_repeats_the_question_before_answering_keeps_its_answer():
    report = "Who kept the Lantern Rock lighthouse and how many ships did the keeper log in 1911? Ada Halvorsen did."
    scores = scored(TASK, report)
    assert scores.echo is False and scores.facts == {"f1": True, "f2": False}
