"""The evaluation's deterministic scorer (``deepresearch eval``, SPEC 3b):
pure functions over a report, its citations and the corpus's paths.

Shared by the scoring activity (activities/evaluation.py) and the CLI, which
uses the same matching to find which corpus documents hold a fact. Every
pattern here is linear; reports are bounded anyway (``MAX_TEXT``).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from workflows.echoes import EchoMask
from workflows.eval_models import EvalTask, FactSpec, JudgeScore, Number, TaskScore
from workflows.models import ResearchResult

MAX_TEXT = 2_000_000  # characters of a report (or document) looked at
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# A number as reports write it: 4417, 4,417, 4 417 (thin spaces), -3.5, 12.5 (%), also against
# Chinese, Japanese or Korean text ("增长了36.5%"): not inside a word of letters, nor after a
# decimal point or a thousands separator. One character looked behind: linear.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_NUMBER = re.compile(rf"(?<![.,])(?<![^\W{_CJK}])([-\u2212]?)(\d{{1,3}}(?:[,\u2009\u202f]\d{{3}})+|\d+)(\.\d+)?(?!\d)")
_URL = re.compile(r"https?://[^\s<>()\[\]\"'`]+")
# Numbers that are not stated: any link's (host, port, a year in a path), a list item's
# number at the start of a line ("1.", "2)"), a citation marker ("[3]", "[^4]").
_NOT_STATED = re.compile(
    r"(?:https?|file|ftp)://[^\s<>()\[\]\"'`]+|^[ \t]*\d{1,3}[.)][ \t]|\[\^?\d{1,3}\]", re.MULTILINE
)
_SPACE = re.compile(r"\s+")
# Statements that the sources hold no answer (checked on the normalized report).
NOT_FOUND_PHRASES = (
    "not found in the sources",
    "not found in the provided",
    "not found in the available",
    "no information",
    "no relevant information",
    "no data on",
    "no data about",
    "could not find",
    "couldn't find",
    "can't find",
    "cannot find",
    "did not find",
    "didn't find",
    "unable to find",
    "could not be found",
    "could not be determined",
    "cannot be determined",
    "not in the corpus",
    "not available in the",
    "none of the sources",
    "sources do not",
    "sources don't",
    "do not contain",
    "does not contain",
    "not mentioned",
    "no mention",
    "未找到",
    "没有找到",
    "未能找到",
    "找不到",
    "没有相关",
    "无相关",
    "没有信息",
    "没有提及",
    "未提及",
    "未提供",
    "没有提供",
    "无法确定",
    "无法找到",
    "不包含",
    "没有包含",
    "资料中没有",
    "来源中没有",
)


def normalize(text: str) -> str:
    """Case-folded, typographic apostrophes made plain, whitespace runs as one space."""
    return _SPACE.sub(" ", text[:MAX_TEXT].casefold().replace("\u2019", "'")).strip()


def numbers_in(text: str) -> list[float]:
    """The numbers written in ``text`` (thousands separators, decimals, a sign;
    a percent sign is simply the number); not a link's, a list item's number
    or a citation marker (``_NOT_STATED``)."""
    found = []
    for match in _NUMBER.finditer(_NOT_STATED.sub(" ", text[:MAX_TEXT])):
        sign, whole, decimals = match.groups()
        value = float(re.sub(r"[,\u2009\u202f]", "", whole) + (decimals or ""))
        found.append(-value if sign else value)
    return found


class Text:
    """A text prepared once for many matches."""

    def __init__(self, text: str) -> None:
        self.normalized = normalize(text)
        self._numbers: list[float] | None = None
        self._raw = text

    @property
    def numbers(self) -> list[float]:
        if self._numbers is None:
            self._numbers = numbers_in(self._raw)
        return self._numbers

    def has(self, accepted: Number | str) -> bool:
        if isinstance(accepted, Number):
            # (plus a hair for float rounding: 0.1 + 0.2 is within 0 of 0.3)
            return any(abs(value - accepted.number) <= accepted.tolerance + 1e-9 for value in self.numbers)
        needle = normalize(accepted)
        return bool(needle) and needle in self.normalized


def fact_found(fact: FactSpec, text: Text) -> bool:
    return any(text.has(accepted) for accepted in fact.any)


def source_paths(fact: FactSpec, documents: dict[str, Text]) -> list[str]:
    """The corpus documents that hold the fact: those the task file names, or
    else those containing one of its accepted strings."""
    if fact.sources:
        return list(fact.sources)
    return [path for path, text in documents.items() if fact_found(fact, text)]


def urls_in(report: str) -> list[str]:
    out: list[str] = []
    for url in _URL.findall(report[:MAX_TEXT]):
        url = url.rstrip(".,;:!?*_")
        if url not in out:
            out.append(url)
    return out


def corpus_path(url: str, corpus: set[str]) -> str | None:
    """The corpus document a URL on the offline web names (any port), or None."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return None
    if host not in LOOPBACK_HOSTS:
        return None
    path = unquote(parts.path).lstrip("/")
    return path if path in corpus else None


def is_resource(url: str, resources: list[str]) -> bool:
    """Whether a ``file://`` URL names one of the task's local resources (or a file in one)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.scheme != "file":
        return False
    path = unquote(parts.path)
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in resources)


def cited_urls(result: ResearchResult) -> list[str]:
    """The URLs the report cites: links in its text and the result's citations."""
    urls = urls_in(result.final_report)
    for citation in result.citations:
        if citation.url not in urls:
            urls.append(citation.url)
    return urls


def states_not_found(report: str) -> bool:
    text = normalize(report)
    return any(phrase in text for phrase in NOT_FOUND_PHRASES)


# A line that is only a link (a source list's entry): "- [Title](URL)", "1. <URL>", "[3]: URL".
_LIST_MARK = re.compile(r"[ \t]*(?:[-*+•][ \t]+|\d{1,3}[.)][ \t]+|\[\^?\d{1,3}\]:?[ \t]*)?")
_LINK_LINE = re.compile(
    r"(?:\[[^\[\]]*\]\((?:[^\s()]|\([^\s()]*\))*\)|<?(?:https?|file)://[^\s<>]+>?)[ \t]*[.,;]?[ \t]*"
)
OWN_SHARE = 0.25  # a report with less of its words its own (not its request's) is an echo


def link_only(line: str) -> bool:
    rest = line[_LIST_MARK.match(line).end() :]  # type: ignore[union-attr]  (it matches empty)
    return bool(rest.strip()) and _LINK_LINE.fullmatch(rest.rstrip()) is not None


def own_text(report: str, question: str, request: list[str]) -> tuple[str, bool]:
    """What of ``report`` is its own, and whether it is an echo. Its own:
    the report without its link-only lines (a source list's titles are
    pages' titles, not findings) and without every run of ``echoes.N`` or
    more words that repeats the ``question`` or the ``request`` (the
    prompts' instructions, the reporter's request around the findings). An
    echo: a report with fewer than ``OWN_SHARE`` of its words not from the
    request, or nothing but links (quoting the question makes no echo)."""
    lines = report[:MAX_TEXT].split("\n")  # "\n" only: U+2028 and friends are text
    kept = "\n".join(line for line in lines if not link_only(line))
    masked, own, total = EchoMask(request).own_words(kept)
    links_only = total == 0 and len(kept.strip()) < len(report.strip())
    echo = links_only or (total > 0 and own / total < OWN_SHARE)
    return EchoMask([question]).own_words(masked)[0], echo


def _evidence(fact: FactSpec, question: Text) -> list[Number | str]:
    """The accepted strings and numbers that can show a report found ``fact``:
    not those the question itself states."""
    return [accepted for accepted in fact.any if not question.has(accepted)]


def score(
    task: EvalTask, corpus: list[str], result: ResearchResult, request: list[str] = (), shown: str | None = None
) -> TaskScore:
    """The deterministic scores of one report (docs/eval.md says what each
    means). ``request``: texts a report may repeat (the prompts); the task's
    question is always one. What the report repeats of them scores nothing;
    a report that is only that scores nothing at all (``echo``). ``shown``:
    what the reporter was shown (its request as sent), or None when it is
    not known (a run recorded before it was kept)."""
    masked, echo = own_text(result.final_report, task.question, list(request))
    report, question = Text("" if echo else masked), Text(task.question)
    evidence = {fact.id: _evidence(fact, question) for fact in [*task.facts, *task.avoid]}
    unscored = [fact.id for fact in task.facts if not evidence[fact.id]]  # the question gives them away
    facts = {fact.id: any(report.has(a) for a in evidence[fact.id]) for fact in task.facts}
    avoided = {fact.id: not any(report.has(a) for a in evidence[fact.id]) for fact in task.avoid}
    seen = Text(shown) if shown is not None else None
    shown_facts = (
        {f.id: any(seen.has(a) for a in evidence[f.id]) for f in task.facts if f.id not in unscored} if seen else {}
    )
    paths = set(corpus)
    urls = [] if echo else cited_urls(result)
    cited = {corpus_path(url, paths) for url in urls} - {None}
    valid = sum(1 for url in urls if corpus_path(url, paths) or is_resource(url, task.resources))
    required = [fact for fact in task.facts if fact.id not in unscored]
    found = [fact for fact in required if facts[fact.id]]
    # Facts no web page holds (e.g. only in the task's local resources) cannot be cited: left out.
    citable = [fact for fact in found if fact.sources]
    supported = sum(1 for fact in citable if cited & set(fact.sources))
    return TaskScore(
        fact_recall=round(len(found) / len(required), 4) if required else None,
        facts=facts,
        evidence_recall=round(sum(shown_facts.values()) / len(required), 4) if required and seen else None,
        evidence_facts=shown_facts,
        avoided=avoided,
        distractors_used=sum(1 for ok in avoided.values() if not ok),
        not_in_corpus_stated=(not echo and states_not_found(masked)) if task.unanswerable else None,
        citations=urls,
        citation_validity=round(valid / len(urls), 4) if urls else None,
        citation_support=round(supported / len(citable), 4) if citable else None,
        statement_support=statement_support(result),
        echo=echo,
        unscored=unscored,
    )


def statement_support(result: ResearchResult) -> float | None:
    """(stated + derived) / the statements judged (all but those saying what
    the material lacks); None when none is (a report from the findings, a
    run recorded before statements were traced)."""
    classes = [s.support for s in result.statements if s.support != "absent"]
    if not classes:
        return None
    return round(sum(1 for c in classes if c in ("stated", "derived")) / len(classes), 4)


RUBRIC = ("comprehensiveness", "depth", "instruction_following", "readability")


def parse_judge(reply: str, tokens: int = 0) -> JudgeScore:
    """The judge model's JSON reply (prompts/judge.md) as a rubric; a reply
    that cannot be read gives a score with ``problem`` set, never an error."""
    import json_repair

    try:
        data = json_repair.loads(reply[:100_000])
    except Exception:  # noqa: BLE001 - any unreadable reply is the same problem
        data = None
    if not isinstance(data, dict):
        return JudgeScore(problem="the judge's reply was not a JSON object", tokens=tokens)
    scores: dict[str, int | None] = {}
    reasons: dict[str, str] = {}
    for name in RUBRIC:
        item = data.get(name)
        value, reason = (item.get("score"), item.get("reason", "")) if isinstance(item, dict) else (item, "")
        try:
            number = round(float(value))
        except (TypeError, ValueError):
            number = None
        scores[name] = number if number is not None and 1 <= number <= 10 else None
        if reason:
            reasons[name] = str(reason)[:2000]
    given = [v for v in scores.values() if v is not None]
    return JudgeScore(
        **scores,
        reasons=reasons,
        overall=round(sum(given) / len(given), 2) if given else None,
        problem=None if len(given) == len(RUBRIC) else "the judge did not score every criterion 1-10",
        tokens=tokens,
    )
