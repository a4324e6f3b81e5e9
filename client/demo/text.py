"""Text rules of the demo model: reading the request's sections, the
coder's program, the report and follow-up answers (what the researcher
reads and picks is ``client/demo/reading.py``). Everything deterministic;
every regex linear (no nested quantifiers)."""

from __future__ import annotations

import math
import re
from collections import Counter

from client.demo.reading import Wanted, covers, findings, next_entity, tables, with_header  # noqa: F401 - used here and by tests
from client.evaluation.web import terms

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_YEAR = re.compile(r"\b(1[89]\d\d|20\d\d)\b")
# A year the question counts from ("since 2010", "from 2010"): the sources may answer from a later one.
_FROM_YEAR = re.compile(r"\b(?:since|from|after|between|starting)\s+(?:the\s+)?(?:year\s+)?(1[89]\d\d|20\d\d)\b")
_LINK = re.compile(r"\[([^\]\n]{0,300})\]\(((?:https?|file)://[^)\s]{1,2000})\)")
MONTHS = "january february march april may june july august september october november december".split()
NOT_FOUND = (
    "The sources do not state this directly: it was not found in the available sources, "
    "and this report does not guess it."
)
NOT_FOUND_ZH = "现有资料中未找到明确的答案，本报告不作猜测。"
_QUANTITY = re.compile(r"\b(how many|how much|population|number of|percentage|per cent|percent)\b|多少|几")


def is_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def sections(text: str) -> dict[str, str]:
    """Level-1 markdown sections (``# Heading``) of a message: heading -> body."""
    found: dict[str, str] = {}
    heading, body = "", []
    for line in text.splitlines():
        if line.startswith("# "):
            if heading or body:
                found.setdefault(heading, "\n".join(body).strip())
            heading, body = line[2:].strip(), []
        else:
            body.append(line)
    found.setdefault(heading, "\n".join(body).strip())
    return found


GUIDANCE = "The user's guidance, sent during the research"  # workflows/steer_models.py


def guidance_notes(text: str) -> list[str]:
    """The notes a user sent the run while it ran (a steer), as a request holds them."""
    body = sections(text).get(GUIDANCE, "")
    return [line[2:].strip() for line in body.splitlines() if line.startswith("- ") and line[2:].strip()]


def question_of(users: list[str]) -> str:
    """The research question of a planner, coder or reporter request."""
    for text in users:
        parts = sections(text)
        if parts.get("Research question"):
            return " ".join(parts["Research question"].split())
    return " ".join((users[0] if users else "").split())


def step_of(users: list[str]) -> str:
    """What a researcher's step asks (its title and description), else the question."""
    text = users[0] if users else ""
    step = sections(text).get("Your step", "")
    lines = [line.lstrip("#").strip() for line in step.splitlines() if line.strip()]
    unique = list(dict.fromkeys(lines))
    return " ".join(unique) or question_of(users)


def split_question(question: str) -> list[str]:
    """One research step per part of a two-part question ("…, and …?"), else one."""
    parts = re.split(r",\s+and\s+(?=(?:what|which|who|when|where|how|in what|in which)\b)", question, maxsplit=1)
    if len(parts) == 2 and min(len(p) for p in parts) > 15:
        return [parts[0].strip().rstrip(",") + "?", question]
    return [question]


def keywords_query(text: str) -> str:
    words = list(dict.fromkeys(terms(text)))
    return " ".join(words[:12]) or text[:200]


def is_long_page(result: str) -> bool:
    """Whether a crawl answer shows only part of a long page."""
    return bool(re.search(r"\b\d+ parts\b|read_page|find_in_page", result[-3000:] + result[:3000]))


def crawl_targets(made: list[tuple[str, dict, str]], first: int = 4, then: int = 2) -> list[str]:
    """The URLs to read: the top ``first`` results of the first search, the top
    ``then`` new ones of a second and a third."""
    urls: list[str] = []
    searches = [result for name, _, result in made if name == "web_search"]
    for n, result in enumerate(searches[:3]):
        new = [u for u in re.findall(r"URL: (\S+)", result) if u not in urls]
        urls += new[: first if n == 0 else then]
    return urls


# -- the coder ----------------------------------------------------------------------


def table_values(text: str) -> list[list[tuple[str, float]]]:
    """Each markdown table of ``text`` as (label, first number after it) rows."""
    out = []
    for _, rows in tables(text):
        pairs = []
        for row in rows:
            cells = [c.strip().strip("*") for c in row.strip("|").split("|")]
            numbers = [c for c in cells[1:] if re.fullmatch(r"[£$€]?\d[\d,]*(?:\.\d+)?\s*%?", c)]
            if cells and cells[0] and numbers:
                pairs.append((cells[0], float(re.sub(r"[^\d.]", "", numbers[0]))))
        if pairs:
            out.append(pairs)
    return out


def wanted_labels(question: str) -> list[str]:
    """Years, or months (a range "January to June" expanded), named in the question."""
    lower = question.lower()
    months = [m for m in MONTHS if re.search(rf"\b{m}\b", lower)]
    if len(months) == 2 and re.search(r"\b(to|until|through)\b|-|–", lower):
        first, last = MONTHS.index(months[0]), MONTHS.index(months[1])
        months = MONTHS[min(first, last) : max(first, last) + 1]
    return months or _YEAR.findall(question)


PROGRAM = """\
question = {question!r}
tables = {tables!r}
labels = {labels!r}
growth = any(w in question.lower() for w in ("grow", "growth", "increase", "change", "rate"))
done = False
for rows in tables:
    values = {{label.lower(): value for label, value in rows}}
    found = [(label, values[label.lower()]) for label in labels if label.lower() in values]
    if growth and len(found) >= 2:
        (first, a), (last, b) = found[0], found[-1]
        print(f"Growth from {{first}} to {{last}}: {{a:g}} -> {{b:g}} = {{(b / a - 1) * 100:.1f}}%")
        done = True
        break
    if len(found) >= 2:
        mean = sum(v for _, v in found) / len(found)
        print(f"Average of {{len(found)}} values ({{', '.join(l for l, _ in found)}}): {{mean:.2f}}")
        print(f"Total: {{sum(v for _, v in found):g}}")
        done = True
        break
if not done:
    for rows in tables:
        for label, value in rows:
            print(f"{{label}}: {{value:g}}")
    if not tables:
        print("No table of figures was found in the findings.")
"""


def program_for(material: str) -> str:
    """A small Python program computing what the question asks from the tables
    of the findings in ``material`` (the coder's request)."""
    question = question_of([material])
    return PROGRAM.format(question=question, tables=table_values(material), labels=wanted_labels(question))


# -- the reporter -------------------------------------------------------------------


def report(users: list[str]) -> str:
    """A markdown report from the reporter's request: title, key points (the
    findings that answer the question best, none that do not), what the
    sources do not say, analysis per step, sources."""
    text = "\n\n".join(users)
    parts = sections(text)
    question = question_of(users)
    found = parts.get("Findings", "")
    bullets = list(dict.fromkeys(b for b in map(linked_bullet, found.splitlines()) if b))
    computed = [line.strip() for line in re.findall(r"^(?:Growth|Average|Total)[^\n]{0,300}$", found, re.M)]
    lines = [f"# {clip(question, 150)}", ""]
    if notes := guidance_notes(text):  # steered: said where the reader sees it first
        lines += [f"> Following your guidance: {'; '.join(clip(n, 200) for n in notes)}", ""]
    lines += ["## Key Points", ""]
    lines += [f"- {point}" for point in computed + key_points(question, bullets)]
    if lines[-1] == "":
        lines.append("- Nothing found answers the question.")
    if not computed:
        lines += [f"\n{gap}" for gap in gaps(question, bullets, found)]
    analysis = []
    for title, body in _steps(found):
        kept = [
            ln for ln in body.splitlines() if ln.startswith(("- ", "|", "Table from", "Growth", "Average", "Total"))
        ]
        kept = [ln for ln in kept if not re.fullmatch(r"- \[[^\]]*\]\([^)]*\)", ln)]  # reference lists go below
        if kept:
            analysis += [f"### {title}", "", *kept, ""]
    lines += ["", "## Analysis", "", *analysis] if analysis else [""]
    urls = list(dict.fromkeys(u for _, u in _LINK.findall(found)))
    titles = {u: t for t, u in _LINK.findall(found + "\n" + parts.get("Sources you may cite", ""))}
    if not urls:
        urls = [u for _, u in _LINK.findall(parts.get("Sources you may cite", ""))]
    lines += ["## Sources", ""] + ([f"- [{titles.get(u) or u}]({u})" for u in urls] or ["(none)"])
    lines += ["", "*Written by the scripted demo model: sentences picked from the pages, not a language model.*"]
    return "\n".join(lines)


def key_points(question: str, bullets: list[str], most: int = 4) -> list[str]:
    """The findings that answer the question best (a link's title counts:
    it names what the sentence is about), none that share too little with it."""
    wanted = Wanted(question)
    shown = [_LINK.sub(r"\1", b) for b in bullets]  # a link's title counts, its URL does not
    matched = [wanted.matched(text) for text in shown]
    seen = Counter(m for found in matched for m in found)
    # What few findings hold tells them apart ("Brackwater" more than "population").
    weights = {m: 1 + math.log(len(bullets) / n) for m, n in seen.items()}
    scores = [wanted.worth(m, weights) + _number_bonus(wanted, text) for text, m in zip(shown, matched)]
    scored = sorted((-score, n) for n, score in enumerate(scores))
    best = -scored[0][0] if scored else 0.0
    return [bullets[n] for score, n in scored[:most] if wanted.worth(matched[n]) >= wanted.least and -score >= best / 2]


def linked_bullet(line: str) -> str | None:
    """A findings line "- text [title](url)" without its "- ", or None. Read
    from the end, in linear time (the pattern it replaces backtracked on a
    long line of "[": seconds on a 50,000-character line of a local document)."""
    line = line.rstrip()
    if not line.startswith("- ") or not line.endswith(")"):
        return None
    middle = line.rfind("](")
    url = line[middle + 2 : -1]
    start = line.rfind("[", 0, middle)
    if middle < 0 or not url or ")" in url or any(ch.isspace() for ch in url):
        return None
    if start < 3 or "]" in line[start + 1 : middle]:  # some text before the link, a title without "]"
        return None
    return line[2:]


def gaps(question: str, bullets: list[str], found: str) -> list[str]:
    """What the report must say the sources do not: the whole answer, or a
    year the question counts from ("since 2010") that no finding names."""
    evidence = "\n".join([*bullets, *re.findall(r"^\|[^\n]*$", found, re.M)])
    bounds = set(_FROM_YEAR.findall(question))
    missing = [year for year in dict.fromkeys(_YEAR.findall(question)) if year not in evidence]
    if [year for year in missing if year not in bounds] or not answered(question, bullets, found):
        return [NOT_FOUND_ZH if is_cjk(question) else NOT_FOUND]
    if missing:
        if is_cjk(question):
            return [f"现有资料未提及{'、'.join(missing)}年的情况：以上为资料所载及其年份。"]
        return [
            f"The sources found say nothing of {' or '.join(missing)} itself: what they say is above, with its own dates."
        ]
    return []


def answered(question: str, bullets: list[str], found: str = "") -> bool:
    """Whether the findings seem to answer the question: each part of it
    ("…, and …") is said by a finding or a table of ``found`` (its words,
    years aside: see ``covers``), and a quantity asked for comes with a
    number the question does not give."""
    if is_cjk(question):
        return bool(bullets)
    evidence = [_LINK.sub(r"\1", text) for text in [*bullets, *found_tables(found)]]
    for part in re.split(r",\s+and\s+|;\s+", _YEAR.sub(" ", asked_in(question))):
        wanted = Wanted(part)
        if wanted.size <= 1 and not wanted.names:  # "how did it compare with 2017?": its year is checked apart
            continue
        close = [text for text in evidence if covers(wanted, text, any_name=True)]
        if _QUANTITY.search(part.lower()):
            asked = set(_NUMBER.findall(question))
            close = [text for text in close if set(_NUMBER.findall(text)) - asked]
        if not close:
            return False
    return bool(evidence)


def asked_in(question: str) -> str:
    """What a question asks, without what it tells the writer to do ("Present
    it as a table.", "If sources disagree, …", "Using the attached memo, …"):
    its sentences that end in "?", else its first; a lead-in clause before
    the question word left out."""
    sentences = [s.strip() for s in re.split(r"(?<=[.?!])\s+", question.strip()) if s.strip()]
    asking = [s for s in sentences if s.endswith("?")] or sentences[:1]
    return " ".join(
        re.sub(r"^[^?,]{0,200},\s+(?=(?:what|which|who|when|where|how)\b)", "", s, flags=re.I) for s in asking
    )


def found_tables(found: str) -> list[str]:
    """Each table of the findings ("Table from [title](url):" and its rows) as one text."""
    tables: list[list[str]] = []
    for line in found.splitlines():
        if line.startswith("Table from "):
            tables.append([line])
        elif tables and line.startswith("|"):
            tables[-1].append(line)
        elif tables and line.strip() and len(tables[-1]) > 1:
            tables.append([])  # the table has ended
    return ["\n".join(rows) for rows in tables if len(rows) > 1]


def _number_bonus(wanted: Wanted, text: str) -> float:
    return wanted.score(text) - wanted.score(_NUMBER.sub(" ", text))


def _steps(found: str) -> list[tuple[str, str]]:
    """(step title, its findings) from the reporter's "# Findings" section."""
    out, title, body = [], "", []
    for line in found.splitlines():
        if line.startswith("## ") and line[3:].strip() not in ("Findings", "References", "Computation"):
            if title:
                out.append((title, "\n".join(body)))
            title, body = line[3:].strip(), []
        else:
            body.append(line)
    if title:
        out.append((title, "\n".join(body)))
    return out


# -- follow-up questions ------------------------------------------------------------


def follow_up_answer(text: str, marker: str) -> str:
    """The answer to a follow-up question (section "The question") from the
    findings, report and earlier answers it is given: the findings that
    answer it, each with its link; else ``marker`` and what is missing,
    which makes the thread research more."""
    parts = sections(text)
    question = " ".join(parts.get("The question", "").split())
    material = "\n".join(
        body for heading, body in parts.items() if heading not in ("The question", "Sources you may cite")
    )
    bullets = list(dict.fromkeys(b for b in map(linked_bullet, material.splitlines()) if b))
    wanted = Wanted(_YEAR.sub(" ", asked_in(question)))
    picked = [b for b in key_points(question, bullets) if covers(wanted, _LINK.sub(r"\1", b))]
    if not question or not picked or not answered(question, picked):
        return f"{marker}\nWhat I was given does not say: {clip(question, 300)}"
    said = "资料中与此相关的内容：" if is_cjk(question) else "What the findings say on this:"
    return "\n".join([said, "", *(f"- {point}" for point in picked)])
