"""Text rules of the demo model: reading the request's sections, picking the
sentences and tables that answer a question, the coder's program, the report.
Everything deterministic; every regex linear (no nested quantifiers)."""

from __future__ import annotations

import re

from client.evaluation.web import terms

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_URL = re.compile(r"(?:https?|file)://[^\s)\]>\"']+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(£$\"'])|(?<=[。！？])")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_YEAR = re.compile(r"\b(1[89]\d\d|20\d\d)\b")
_LINK = re.compile(r"\[([^\]\n]{0,300})\]\(((?:https?|file)://[^)\s]{1,2000})\)")
MONTHS = "january february march april may june july august september october november december".split()
MAX_UNITS = 8
MAX_TABLES = 2
MAX_TABLE_ROWS = 30
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
    ``then`` new ones of a second."""
    urls: list[str] = []
    searches = [result for name, _, result in made if name == "web_search"]
    for n, result in enumerate(searches[:2]):
        new = [u for u in re.findall(r"URL: (\S+)", result) if u not in urls]
        urls += new[: first if n == 0 else then]
    return urls


_PROPER = re.compile(r"\b[A-Z][\w'’-]*(?:[ \t]+(?:of[ \t]+)?[A-Z][\w'’-]*)+")


def next_entity(query: str, made: list[tuple[str, dict, str]]) -> str | None:
    """A name (two or more capitalised words) that the best sentences read so
    far give and the query does not: what a second search should add."""
    wanted, asked = set(terms(query)), query.lower()
    candidates = []
    for order, (_, _, text) in enumerate(_documents(made)):
        for n, unit in enumerate(_units(text) + [row for _, rows in _tables(text) for row in rows]):
            candidates.append((-_score(wanted, unit), order, n, unit))
    for _, _, _, unit in sorted(candidates)[:5]:
        for name in _PROPER.findall(unit[:2000]):
            if name.lower() not in asked and not all(w in terms(asked) for w in terms(name)):
                rest = [w for w in dict.fromkeys(terms(query)) if w not in set(terms(unit))]
                return " ".join([name, *rest])
    return None


def _documents(made: list[tuple[str, dict, str]]) -> list[tuple[str, str, str]]:
    """(url, title, text) of what the researcher read: pages, passages, local hits."""
    docs = []
    for name, args, result in made:
        if not result or result.startswith("Error"):
            continue
        if name in ("crawl", "find_in_page", "read_page"):
            url = str(args.get("url") or "")
            title = next((line.lstrip("# ").strip() for line in result.splitlines() if line.startswith("# ")), url)
            docs.append((url, title, result))
        elif name == "local_search":
            for block in re.split(r"\n\s*\n", result):
                url = next(iter(_URL.findall(block)), "")
                if url:
                    docs.append((url, url.rsplit("/", 1)[-1], block))
    if not docs:  # nothing crawled: the search snippets
        for name, _, result in made:
            if name == "web_search":
                for hit in re.split(r"\n(?=\d+\. )", result):
                    url = next(iter(re.findall(r"URL: (\S+)", hit)), "")
                    if url:
                        docs.append((url, hit.split("\n", 1)[0][3:].strip(), hit))
    return docs


def _units(text: str) -> list[str]:
    """Sentences of prose (lines of a paragraph joined first: a PDF breaks
    lines mid-sentence); table rows, headings and the reading tool's own
    notes ("[Passages of … read with read_page(…)]") stay out."""
    out, paragraph = [], []
    for line in text.splitlines() + [""]:
        line = line.strip()
        note = line.startswith("[") and line.endswith("]")
        if line and not note and not line.startswith(("|", "#", "URL:")) and len(line) <= 5000:
            starts_item = bool(re.match(r"[-*+]\s|\d+\.\s", line))
            if starts_item and paragraph:
                out += _sentences(" ".join(paragraph))
                paragraph = []
            paragraph.append(re.sub(r"^[-*+]\s+|^\d+\.\s+", "", line))
            continue
        if paragraph:
            out += _sentences(" ".join(paragraph))
            paragraph = []
    return out


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 12]


def _tables(text: str) -> list[tuple[str, list[str]]]:
    """(the two lines before it, rows) of each markdown table."""
    lines = text.splitlines()
    found, rows, before = [], [], ""
    for i, line in enumerate(lines + [""]):
        if line.strip().startswith("|"):
            if not rows:
                before = " ".join(lines[max(0, i - 2) : i])
            rows.append(line.strip())
        elif rows:
            found.append((before, rows[:MAX_TABLE_ROWS]))
            rows = []
    return found


def with_header(rows: list[str]) -> list[str]:
    """Rows that make a markdown table: a page's table read without its header
    (an HTML table of label and value) gets an empty one, so it renders."""
    if len(rows) >= 2 and _is_rule(rows[1]):
        return rows
    width = max(0, rows[0].strip().strip("|").count("|")) + 1 if rows else 1
    return ["|" + "   |" * width, "|" + "---|" * width, *(r for r in rows if not _is_rule(r))]


def _is_rule(row: str) -> bool:
    """A header rule such as ``|---|:--:|``."""
    return "-" in row and not row.replace("|", "").replace("-", "").replace(":", "").strip()


def _score(wanted: set[str], text: str) -> float:
    have = set(terms(text))
    return len(wanted & have) + (0.5 if _NUMBER.search(text) else 0.0)


class Wanted:
    """What a step asks for: its words, and the names it gives (two or more
    capitalised words), which count only whole: "Kessel Point" is not
    matched by a sentence about Hallow Point."""

    def __init__(self, query: str) -> None:
        self.names = [" ".join(name.lower().split()) for name in _PROPER.findall(query[:2000])]
        in_names = {t for name in self.names for t in terms(name)}
        self.words = set(terms(query)) - in_names
        self.size = len(set(terms(query)))

    def score(self, text: str) -> float:
        flat = " ".join(text.lower().split())
        named = sum(len(set(terms(name))) for name in self.names if name in flat)
        return named + _score(self.words, text)


def findings(query: str, made: list[tuple[str, dict, str]]) -> str:
    """Extractive findings: the sentences and tables of what was read that share
    most words with the step, each with its source."""
    wanted = Wanted(query)
    least = 2 if wanted.size >= 4 else 1
    units, tables, seen = [], [], set()
    for order, (url, title, text) in enumerate(_documents(made)):
        for n, unit in enumerate(_units(text)):
            if unit not in seen:
                seen.add(unit)
                units.append((wanted.score(unit), -order, -n, unit, url, title))
        for before, rows in _tables(text):
            tables.append((wanted.score(before + " " + " ".join(rows)), -order, rows, url, title))
    chosen = sorted((u for u in units if u[0] >= least), reverse=True)[:MAX_UNITS]
    picked_tables = sorted((t for t in tables if t[0] >= least + 1), key=lambda t: (-t[0], -t[1]))[:MAX_TABLES]
    if not chosen and not picked_tables:
        return "## Findings\n\nNothing I read answers this step.\n\n## References\n\n(none)"
    lines = ["## Findings", ""]
    lines += [f"- {unit} [{title}]({url})" for _, _, _, unit, url, title in chosen]
    for _, _, rows, url, title in picked_tables:
        lines += ["", f"Table from [{title}]({url}):", "", *with_header(rows)]
    used = list(dict.fromkeys([(u[4], u[5]) for u in chosen] + [(t[3], t[4]) for t in picked_tables]))
    lines += ["", "## References", ""] + [f"- [{title}]({url})" for url, title in used]
    return "\n".join(lines)


# -- the coder ----------------------------------------------------------------------


def table_values(text: str) -> list[list[tuple[str, float]]]:
    """Each markdown table of ``text`` as (label, first number after it) rows."""
    out = []
    for _, rows in _tables(text):
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
    """A markdown report from the reporter's request: title, key points,
    analysis per step, sources."""
    text = "\n\n".join(users)
    parts = sections(text)
    question = question_of(users)
    wanted = Wanted(question)
    found = parts.get("Findings", "")
    bullets = list(dict.fromkeys(b for b in map(linked_bullet, found.splitlines()) if b))
    computed = [line.strip() for line in re.findall(r"^(?:Growth|Average|Total)[^\n]{0,300}$", found, re.M)]
    ranked = sorted(bullets, key=lambda b: (-wanted.score(b), bullets.index(b)))
    key = computed + ranked[:4]
    lines = [f"# {clip(question, 150)}", "", "## Key Points", ""]
    lines += [f"- {point}" for point in key] or ["- Nothing found answers the question."]
    if not computed and not answered(question, bullets, found):
        lines += ["", NOT_FOUND_ZH if is_cjk(question) else NOT_FOUND]
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


def answered(question: str, bullets: list[str], found: str) -> bool:
    """Whether the findings seem to answer the question: a year it names is
    in them, a sentence shares half its words, and for a quantity that sentence
    has a number the question does not."""
    evidence = "\n".join([*bullets, *re.findall(r"^\|[^\n]*$", found, re.M)])
    if any(year not in evidence for year in _YEAR.findall(question)):
        return False
    wanted = set(terms(question))
    close = [b for b in bullets if _coverage(wanted, b) >= 0.5]
    if not wanted or is_cjk(question):
        return bool(bullets)
    if _QUANTITY.search(question.lower()):
        asked = set(_NUMBER.findall(question))
        return any(set(_NUMBER.findall(_LINK.sub("", b))) - asked for b in close)
    return bool(close)


def _coverage(wanted: set[str], text: str) -> float:
    return len(wanted & set(terms(text))) / len(wanted) if wanted else 0.0


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
