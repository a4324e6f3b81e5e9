"""Data shapes shared by the workflow, the activities and the client.

Pure pydantic, no I/O: the workflow sandbox imports this module. The JSON
shapes of ``Step``, ``Plan``, ``ResearchInput``, ``ResearchResult`` and
``RunStatus`` are public: the CLI, other Temporal clients and the README's
"Results" rely on them.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from temporalio.common import SearchAttributeKey

from workflows.model_base import Model, build_schemas  # noqa: F401 (re-exported)
from workflows.support_models import Statement, SupportCounts
from workflows.user_names import MAX_SHARES, name_problem, share_problem

StepType = Literal["research", "processing", "analysis"]
ReportStyle = Literal["academic", "popular_science", "news", "social_media", "strategic_investment"]
REPORT_STYLES: tuple[str, ...] = (
    "academic",
    "popular_science",
    "news",
    "social_media",
    "strategic_investment",
)
Phase = Literal[
    "coordinating",
    "clarifying",
    "investigating",
    "planning",
    "awaiting_review",
    "researching",
    "reporting",
    "completed",
    "cancelled",  # ended by `deepresearch cancel` (its result says so too)
    "failed",
]
RunOutcome = Literal["completed", "answered_directly", "rejected", "plan_failed", "review_timed_out", "cancelled"]


# --- the plan ---------------------------------------------------------------


class Step(Model):
    model_config = ConfigDict(populate_by_name=True, coerce_numbers_to_str=True)

    # Part of the plan's contract: the planner is asked for it
    # (prompts/planner.md), ``need_web_search`` is accepted for it, and stored
    # plans carry it. The flow routes by ``step_type`` and never reads it
    # (model_output only uses it to guess a missing step_type); kept so
    # plans keep their shape in and out.
    need_search: bool = Field(default=True, validation_alias=AliasChoices("need_search", "need_web_search"))
    title: str
    description: str = ""
    step_type: StepType = "research"
    execution_res: str | None = None

    @field_validator("step_type", mode="before")
    @classmethod
    def _default_step_type(cls, value: Any) -> Any:
        # Models often omit or misspell the type; research is the safe default.
        if value is None or value == "":
            return "research"
        if isinstance(value, str):
            value = value.strip().lower()
            if value not in ("research", "processing", "analysis"):  # "search", "calculation", "Analyse"…
                value = _step_type_like(value)
        return value


def _step_type_like(word: str) -> str:
    """The step type a weak model meant by another word (plain substring tests)."""
    if any(part in word for part in ("process", "calc", "comput", "code", "python", "math", "statist")):
        return "processing"
    if any(part in word for part in ("analy", "reason", "synthe", "compar", "think")):
        return "analysis"
    return "research"


class Plan(Model):
    model_config = ConfigDict(coerce_numbers_to_str=True)

    locale: str = "en-US"
    has_enough_context: bool = False
    thought: str = ""
    title: str
    steps: list[Step] = Field(default_factory=list)


# --- run settings and result -------------------------------------------------


MAX_REVIEW_HOURS = 24 * 366 * 10  # ten years; longer is "no timeout"


class Clarification(Model):
    question: str
    answer: str


class ResearchInput(Model):
    """Workflow input. Everything but ``question`` is optional."""

    model_config = ConfigDict(extra="forbid")  # a misspelt option is an error, not ignored

    question: str = Field(min_length=1, max_length=20_000)
    locale: str | None = None
    max_plan_iterations: int = Field(default=1, ge=1, le=10)
    max_step_num: int = Field(default=3, ge=1, le=20)
    max_search_results: int = Field(default=3, ge=1, le=20)
    auto_accept_plan: bool = False
    enable_background_investigation: bool = True
    enable_clarification: bool = False
    max_clarification_rounds: int = Field(default=3, ge=0, le=10)
    enable_deep_thinking: bool = False
    report_style: ReportStyle = "academic"
    agent_max_turns: int = Field(default=25, ge=1, le=100)
    resources: list[str] = Field(default_factory=list)
    parallel_research: bool = True
    max_parallel_steps: int = Field(default=4, ge=1, le=32)
    # Without a timeout a plan waits for review indefinitely (durably).
    review_timeout_hours: float | None = Field(default=None, gt=0, le=MAX_REVIEW_HOURS, allow_inf_nan=False)
    on_review_timeout: Literal["accept", "end"] = "end"
    # Past this many prompt + completion tokens no new research turn starts
    # and the reporter writes from what was found.
    token_budget: int | None = Field(default=None, ge=1)
    # Build on a finished run (`--continue-from ID`), or on the last completed
    # run of the schedule that started this one (workflows/continuation.py).
    continue_from: str | None = Field(default=None, min_length=1, max_length=1000)
    schedule: str | None = Field(default=None, min_length=1, max_length=200)
    # Evidence each research step gathers before its first model turn
    # (workflows/evidence.py): pages read (0: the pure agent loop), and the
    # tokens one page or evidence set may put into a prompt.
    evidence_pages: int = Field(default=5, ge=0, le=10)
    evidence_tokens: int = Field(default=3_000, ge=200, le=200_000)
    # Re-read the earlier run's sources and re-run its searches before
    # planning (`--recheck`; a scheduled run always does: workflows/recheck.py).
    recheck: bool = False
    # Who the run belongs to (a user name), and the users and teams
    # (``team:NAME``) who may read it (workflows/ownership.py).
    owner: str | None = None
    shared_with: list[str] = Field(default_factory=list, max_length=MAX_SHARES)

    @field_validator("owner")
    @classmethod
    def _owner_is_a_name(cls, value: str | None) -> str | None:
        if value is not None and (problem := name_problem(value, "owner")):
            raise ValueError(problem)
        return value

    @field_validator("shared_with")
    @classmethod
    def _shares_are_names(cls, value: list[str]) -> list[str]:
        for entry in value:
            if problem := share_problem(entry):
                raise ValueError(problem)
        return list(dict.fromkeys(value))

    @field_validator("recheck")
    @classmethod
    def _recheck_builds_on_a_run(cls, value: bool, info: ValidationInfo) -> bool:
        if value and not (info.data.get("continue_from") or info.data.get("schedule")):
            raise ValueError("re-checking needs an earlier run: give --continue-from ID")
        return value

    @field_validator("question")
    @classmethod
    def _question_has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is empty")
        return value.strip()

    @field_validator("locale")
    @classmethod
    def _locale_tag(cls, value: str | None) -> str | None:
        if value is None:
            return None
        tag = value.strip().replace("_", "-")
        if not re.fullmatch(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*", tag):
            raise ValueError(f"locale must be a language tag such as en-US or zh-CN, got {value!r}")
        return tag


def input_problem(raw: object) -> str | None:
    """None if ``raw`` is valid run settings, else one line naming the problem."""
    try:
        ResearchInput.model_validate(raw)
    except ValidationError as err:
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in err.errors()[:5])
    return None


class Usage(Model):
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    searches: int = 0
    crawls: int = 0
    code_runs: int = 0
    cache_hits: int = 0  # searches and crawls answered from the run's own cache
    # Waits on the model provider's rate limit (HTTP 429 / Retry-After; no
    # tokens spent), and the seconds they took (workflows/rate_limits.py).
    rate_limited: int = 0
    rate_limited_seconds: float = 0.0


class Citation(Model):
    title: str = ""
    url: str


class EvidencePage(Model):
    """A page a step read: its text is a blob (the crawl's markdown)."""

    url: str
    title: str = ""
    blob: str


class PageRead(Model):
    """A page a run read, as a later run re-checks it: where, and the text it
    read (by blob reference) with the server's validators."""

    url: str  # as the report cites it (after redirects)
    title: str = ""
    blob: str | None = None  # the markdown it read
    etag: str | None = None
    last_modified: str | None = None


class SearchRun(Model):
    query: str
    urls: list[str] = Field(default_factory=list)  # what it found


class RecheckSummary(Model):
    """What a run's re-check of the earlier run's sources found (counts)."""

    since: str  # the earlier run's date
    run_id: str  # the earlier run
    pages: int = 0  # pages re-read
    changed: int = 0
    gone: int = 0
    moved: int = 0
    not_compared: int = 0  # no earlier copy to compare with, or unreadable now
    searches: int = 0  # searches run again
    new_results: int = 0

    @property
    def found_changes(self) -> bool:
        return bool(self.changed or self.gone or self.moved or self.new_results)


class ResearchResult(Model):
    status: RunOutcome
    question: str
    locale: str
    final_report: str
    plan: Plan | None = None
    plan_iterations: int = 0
    observations: list[str] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    clarifications: list[Clarification] = Field(default_factory=list)
    budget_exhausted: bool = False
    finished_at: str | None = None  # ISO 8601, when the run ended
    # What a reader must know before trusting the report (e.g. it rests on no
    # source, or was built from the findings because the reporter failed).
    warnings: list[str] = Field(default_factory=list)
    # What the reporter was shown (its request as sent, a blob reference):
    # the eval's evidence_recall reads it.
    reporter_input: str | None = None
    # How each statement of the report is supported (SPEC 3d: stated,
    # derived, absent, unsupported); empty for runs recorded before.
    statements: list[Statement] = Field(default_factory=list)
    # Kept so a later run can re-check them (workflows/recheck.py): the pages
    # this run read and the searches it ran; None in results of older runs.
    pages: list[PageRead] | None = None
    searches: list[SearchRun] | None = None
    recheck: RecheckSummary | None = None  # a run that re-checked: what it found
    # Sources the run retrieved, as its status counts them (RunStatus.sources),
    # so an ended run's status read from its result says the same; None in
    # results of older runs.
    sources: int | None = None
    steers: list[Steer] = Field(default_factory=list)  # notes sent while it ran, and where each applied
    owner: str | None = None  # who the run belongs to (None: started before runs had owners)
    shared_with: list[str] = Field(default_factory=list)
    plan_accepted_by: str | None = None  # who accepted the plan (None: nobody named, or automatically)


class Steer(Model):
    """A note sent to a run while it ran (the ``steer`` update or signal;
    workflows/steering.py), as ``status`` and the result show it."""

    note: str
    urls: list[str] = Field(default_factory=list)  # pages the user gave, read by the workflow
    received_at: str  # ISO 8601, UTC
    applied_at: str | None = None  # None while it waits for the next safe point
    applied_where: str | None = None  # the first place it took effect (or why it never did)
    by: str | None = None  # who sent it (None: a client that named nobody)


class StepStatus(Model):
    title: str
    step_type: StepType
    status: Literal["pending", "running", "done"] = "pending"
    # a finished research step: how its findings' statements are supported by what it read
    statements: SupportCounts | None = None


class RunStatus(Model):
    """What the ``status`` query returns."""

    phase: Phase
    question: str
    title: str | None = None
    plan: Plan | None = None
    plan_iterations: int = 0
    steps: list[StepStatus] = Field(default_factory=list)
    pending_question: str | None = None
    review_pending: bool = False
    plan_version: int = 0  # counts the plans shown; a review may name the one it approves
    steps_cut: list[str] = Field(default_factory=list)  # steps of the current plan cut beyond the limit
    clarifications: list[Clarification] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    budget_exhausted: bool = False
    error: str | None = None
    outcome: RunOutcome | None = None  # once the run has ended: how (the result's status)
    note: str | None = None  # e.g. the question researched as one step for want of a plan
    warnings: list[str] = Field(default_factory=list)  # as in ResearchResult
    sources: int = 0  # sources the run retrieved so far (search results and pages read)
    # Since when (ISO 8601, UTC) a model call has been waiting on the
    # provider's rate limit; None when none waits.
    rate_limited_since: str | None = None
    steers: list[Steer] = Field(default_factory=list)  # notes sent while it runs: waiting, or where applied
    owner: str | None = None  # as in ResearchResult
    shared_with: list[str] = Field(default_factory=list)
    plan_accepted_by: str | None = None
    # Why the run has not started yet: its owner's limits (workflows/owner_limits.py).
    owner_wait: str | None = None


class ProgressEvent(Model):
    """One item of a run's live progress stream (topic ``progress``)."""

    kind: Literal[
        "phase",
        "plan",
        "step_started",
        "step_finished",
        "tool_call",
        "review_requested",
        "review_received",
        "question",
        "answer_received",
        "notice",
        "steer_received",  # a note sent while the run runs (workflows/steering.py)
        "steer_applied",
        "finished",
        "failed",
    ]
    text: str = ""
    step: int | None = None  # index into the plan's steps


PROGRESS_TOPIC = "progress"
# Search attributes, so the Temporal UI lists and filters runs by them.
PHASE_ATTRIBUTE = SearchAttributeKey.for_keyword("ResearchPhase")
TITLE_ATTRIBUTE = SearchAttributeKey.for_text("ResearchTitle")
OWNER_ATTRIBUTE = SearchAttributeKey.for_keyword("ResearchOwner")  # who a run belongs to
SHARED_ATTRIBUTE = SearchAttributeKey.for_keyword_list("ResearchShared")  # who may read it


# --- model calls -------------------------------------------------------------


class ToolCall(Model):
    id: str
    name: str
    arguments: str = "{}"  # raw JSON text, as the model wrote it


class Message(Model):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    # Long content (crawled pages, big outputs) lives in the blob store; the
    # model activity appends it when it builds the request: all of it if it
    # fits its share of the window, else ``part`` of it, the passages matching
    # ``query``, or its start and the passages relevant to the step
    # (activities/reading.py). ``source`` names it (a URL or a blob reference).
    blob: str | None = None
    part: int | None = None
    query: str | None = None
    source: str | None = None
    # A user message's blob (an evidence set): at most this many tokens of
    # it are shown, its passages most relevant to the request first.
    budget: int | None = None


class ModelRequest(Model):
    role: str  # coordinator, planner, researcher, coder, analyst, reporter
    prompt: str  # template name under prompts/
    variables: dict[str, Any] = Field(default_factory=dict)
    # Earlier turns of this conversation, stored as one blob (keeps history
    # linear in new content); ``messages`` are the turns added since.
    history: str | None = None
    messages: list[Message] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    # Schemas of tools not in prompts/tools.json (MCP tools, from mcp_list_tools),
    # sent to the model as they are, after the named ones.
    extra_tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: Literal["auto", "none"] = "auto"  # "none": answer without tools
    json_mode: bool = False
    reasoning: bool = False  # use the REASONING model instead of the role's
    # "plan": the activity reads the reply as a plan (``ModelReply.plan``),
    # at most ``max_steps`` steps, titles defaulting from ``topic``. With
    # ``keep_shown``: the question, whose own figures and names do not make a
    # sentence of the reply a statement (``ModelReply.held``).
    output: Literal["text", "plan", "podcast"] = "text"
    max_steps: int | None = None
    topic: str = ""
    # "refuse": fail with RequestTooLarge (details: tokens, budget, window)
    # instead of trimming a request that does not fit the context window.
    on_overflow: Literal["trim", "refuse"] = "trim"
    # The role's context window as the run learned it from the provider
    # (smaller than configured); None: as configured.
    context_window: int | None = None
    # What one tool output or evidence set may put into the prompt, in
    # tokens, whatever the window (the run's evidence_tokens); None: a share
    # of the window only.
    evidence_tokens: int | None = None
    # Keep the request as sent in the blob store (``ModelReply.shown``).
    keep_shown: bool = False
    # With ``keep_shown``: the pages the run read, whose text may support the
    # reply's statements beside what the request shows (``activities/support.py``).
    support_pages: list[EvidencePage] = Field(default_factory=list)

    @property
    def serving_role(self) -> str:
        """The role whose model and context window serve this request."""
        return "reasoning" if self.reasoning else self.role


class ModelReply(Model):
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    history: str  # blob ref of the whole conversation including this reply
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # With ``output="plan"``: the plan read from the reply, or why there is
    # none; the titles of steps cut beyond the limit.
    plan: Plan | None = None
    problem: str | None = None
    steps_cut: list[str] = Field(default_factory=list)
    # With ``output="podcast"``: the script read from the reply (a dict in
    # the shape of ``PodcastScript``), or ``problem`` says why there is none.
    podcast: dict[str, Any] | None = None
    # Set when the provider refused the request as longer than its context
    # window: the window the request was fitted to in the end.
    context_window: int | None = None
    # With ``keep_shown``: the request's text as sent, a blob reference.
    shown: str | None = None
    # The share of the reply's runs of words found in its own instructions
    # (the rendered system prompt; workflows/echoes.py): near 1 when the
    # model repeated its prompt instead of answering.
    echo: float = 0.0
    # The share of the reply's writing in the script of the request's locale
    # (workflows/languages.py); None: too short to tell, or a locale whose
    # script is not known.
    in_locale: float | None = None
    # With ``keep_shown``: the share of the reply's statements (sentences with
    # a figure or a name) that what it was shown holds (activities/held.py);
    # None: too few statements to tell, or written in another language.
    held: float | None = None
    # With ``keep_shown``: how each statement of the reply is supported by
    # what it was shown (activities/support.py), and their counts; None: the
    # reply states too little to tell (or was recorded before).
    support: SupportCounts | None = None
    statements: list[Statement] = Field(default_factory=list)
    # Whether ``support`` was measured (False: not kept, too long to judge in
    # time, or recorded before): with ``support`` None, the reply states nothing.
    judged: bool = False
    # With ``keep_shown``: how many figures and names what it was shown holds
    # beyond the question's (the findings, and the passages that stand in for
    # findings that state nothing; workflows/grounding.py); None: recorded before.
    shown_items: int | None = None
