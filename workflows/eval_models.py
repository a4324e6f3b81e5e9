"""Data shapes of the evaluation suite (``deepresearch eval``, SPEC 3b): the
tasks as the task file gives them, the suite's input, and one scored record
per task run. Pure pydantic, no I/O: the workflow sandbox imports it."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from workflows.models import Model, ResearchResult

TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # it becomes part of a workflow id


class Number(Model):
    """A number the report must state, within ``tolerance`` (absolute)."""

    model_config = ConfigDict(extra="forbid")

    number: float = Field(allow_inf_nan=False)
    tolerance: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class FactSpec(Model):
    """A required fact (or, under ``avoid``, a distractor): found when one of
    its accepted strings or numbers is in the report."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=64)
    any: list[Number | str] = Field(min_length=1)
    # Corpus paths of the documents that hold the fact; when the task file
    # gives none, the eval fills in the documents containing an accepted string.
    sources: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _number_instead(cls, data: Any) -> Any:
        """``{"id": "f1", "number": 41.3, "tolerance": 0.5}``: a number instead of ``any``."""
        if isinstance(data, dict) and "number" in data and "any" not in data:
            data = dict(data)
            number = {"number": data.pop("number")}
            if "tolerance" in data:
                number["tolerance"] = data.pop("tolerance")
            data["any"] = [number]
        return data

    @field_validator("any")
    @classmethod
    def _no_blank(cls, value: list[Number | str]) -> list[Number | str]:
        if any(isinstance(item, str) and not item.strip() for item in value):
            raise ValueError("an accepted string is empty")
        return value


class EvalTask(Model):
    """One line of a task file (SPEC 3b)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=TASK_ID_PATTERN)
    question: str = Field(min_length=1, max_length=20_000)
    facts: list[FactSpec] = Field(default_factory=list)
    avoid: list[FactSpec] = Field(default_factory=list)
    unanswerable: bool = False
    resources: list[str] = Field(default_factory=list)  # absolute once loaded
    options: dict[str, Any] = Field(default_factory=dict)  # ResearchInput fields


class EvalSuiteInput(Model):
    suite: str  # a name for people: "builtin" or the task file's name
    tasks: list[EvalTask] = Field(min_length=1)
    corpus: list[str] = Field(default_factory=list)  # the corpus's relative paths
    options: dict[str, Any] = Field(default_factory=dict)  # run options for every task (a task's own win)
    runs: int = Field(default=1, ge=1, le=20)
    concurrency: int = Field(default=2, ge=1, le=32)
    judge: bool = False
    # The children's ids begin with this (the suite's own id when empty).
    id_prefix: str = ""


class JudgeScore(Model):
    """The judge model's rubric (1-10 each) with its reasons; beside the
    deterministic scores, never mixed into them."""

    comprehensiveness: int | None = None
    depth: int | None = None
    instruction_following: int | None = None
    readability: int | None = None
    reasons: dict[str, str] = Field(default_factory=dict)
    overall: float | None = None  # the mean of the four given
    problem: str | None = None  # why the reply could not be read, if it could not
    tokens: int = 0


class ScoreRequest(Model):
    task: EvalTask
    corpus: list[str]
    result: ResearchResult | None = None
    judge_reply: str | None = None
    judge_problem: str | None = None  # why the judge gave no reply
    judge_tokens: int = 0


class TaskScore(Model):
    """The deterministic scores of one report (activities/evaluation.py)."""

    fact_recall: float | None = None  # found / required; None when no fact is required
    facts: dict[str, bool] = Field(default_factory=dict)
    # required facts present in what the reporter was shown / required facts
    evidence_recall: float | None = None
    evidence_facts: dict[str, bool] = Field(default_factory=dict)
    avoided: dict[str, bool] = Field(default_factory=dict)  # True: the distractor was not used
    distractors_used: int = 0
    not_in_corpus_stated: bool | None = None  # only for unanswerable tasks
    citations: list[str] = Field(default_factory=list)
    citation_validity: float | None = None  # cited URLs in the corpus / cited URLs
    citation_support: float | None = None  # found facts with a cited source / found facts
    # the report's statements stated or derived / statements judged (activities/support.py); None: none judged
    statement_support: float | None = None
    judge: JudgeScore | None = None
    # The report only repeats its request (its prompts, the question) or lists
    # links: it scored nothing (infra/eval_score.py own_text).
    echo: bool = False
    unscored: list[str] = Field(default_factory=list)  # facts the question itself states: not in fact_recall


class TaskRecord(TaskScore):
    """One task run's record: what ``--json`` writes per task."""

    id: str
    run: int = 1
    run_id: str
    status: str
    tokens: int = 0
    model_calls: int = 0
    searches: int = 0
    crawls: int = 0
    seconds: float = 0.0
    rate_limited_seconds: float = 0.0  # of those, waiting on the model provider's rate limit
    error: str | None = None
    warnings: list[str] = Field(default_factory=list)  # the run's (e.g. its reporter failed)


class EvalSuiteResult(Model):
    suite: str
    records: list[TaskRecord] = Field(default_factory=list)


class EvalProgress(Model):
    """What the suite's ``progress`` query returns."""

    total: int
    done: int = 0
    running: list[str] = Field(default_factory=list)  # child workflow ids
    finished: list[str] = Field(default_factory=list)  # "<task id>-r<n>", in finishing order
