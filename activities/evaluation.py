"""The evaluation's scoring activity: the deterministic scores of one task's
report (infra/eval_score.py), with the judge's rubric read beside them."""

from __future__ import annotations

import asyncio
from functools import cache
from importlib import resources

from temporalio import activity

from infra.blobs import BlobNotFound, BlobStore
from infra.eval_score import parse_judge, score
from workflows.eval_models import JudgeScore, ScoreRequest, TaskScore
from workflows.models import ResearchResult

# The reporter's request around the findings (workflows/reporter.py): a report that repeats it scores nothing for it.
REPORTER_REQUEST = (
    "# Research question\n# Note\nThe research stopped early. Write the report from what was found, "
    "and say at its start that it is partial.\n# Findings\n# Sources you may cite\n"
)


@cache
def request_texts() -> tuple[str, ...]:
    """What a report may repeat of its request: every prompt and style guide
    as written in prompts/, and the reporter's request around the findings."""
    folder = resources.files("prompts")
    files = [*folder.iterdir(), *(folder / "styles").iterdir()]
    return (*(f.read_text(encoding="utf-8") for f in files if f.name.endswith(".md")), REPORTER_REQUEST)


def score_request(request: ScoreRequest, shown: str | None = None) -> TaskScore:
    result = request.result or ResearchResult(status="completed", question="", locale="", final_report="")
    scores = score(request.task, request.corpus, result, list(request_texts()), shown)
    if request.judge_reply is not None:
        scores.judge = parse_judge(request.judge_reply, request.judge_tokens)
    elif request.judge_problem:
        scores.judge = JudgeScore(problem=request.judge_problem)
    return scores


class EvalActivities:
    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs

    @activity.defn(name="score_eval_task")
    async def score_task(self, request: ScoreRequest) -> TaskScore:
        shown = None
        kept = request.result.reporter_input if request.result else None
        if kept:
            try:
                shown = await self.blobs.get(kept)
            except BlobNotFound:
                activity.logger.warning("what the reporter was shown is gone (%s): no evidence_recall", kept)
        # In a thread: regexes over a long report must not hold up the event loop.
        return await asyncio.to_thread(score_request, request, shown)
