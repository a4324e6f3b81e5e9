"""How the demo researcher reads: the documents it was shown (the answers of
its tools, and any passages with their URLs in its own messages), their
sentences in their paragraphs, and which of them answer a step.

A sentence counts for the words of the step it holds (names whole, and a few
related words: a question on how many people live somewhere is answered by
a sentence on residents), and for its context: the title of its page and the
best sentence before it in its paragraph ("Tessary is the capital of
Vellmark. The 2023 census counted 23,480 residents."). A sentence chosen with
the sentence before it comes with it, so each finding reads on its own.
Everything deterministic; every regex linear (no nested quantifiers)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from client.evaluation.web import terms

_URL = re.compile(r"(?:https?|file)://[^\s)\]>\"']+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(£$\"'*])|(?<=[。！？])")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_PROPER = re.compile(r"\b[A-Z][\w'’-]*(?:[ \t]+(?:of[ \t]+)?[A-Z][\w'’-]*)+")
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]{2,}")
_LINKED = re.compile(r"\[([^\]\n]{0,300})\]\(((?:https?|file)://[^)\s]{1,2000})\)")
MAX_UNITS = 8
STEM = 5  # letters two words must share at their start to count as one ("founded", "founder")
MAX_TABLES = 2
MAX_TABLE_ROWS = 30
# Question words that say what kind of answer is wanted, not what it is about.
ASKING = frozenset(terms("many much since long often according currently current exactly tell me give know year"))
# Words a question uses for what a page says in other words (each group by its search terms).
RELATED = [
    frozenset(terms(group))
    for group in (
        "population people live lives living resident residents inhabitants census",
        "employees employ employed staff workers",
        "founded found established founder set",
        "die died death",
        "defeat defeated beat against opponent won win",
        "make makes made produce produces build builds built manufacture maker",
        "sell sells sold sale sales",
        "run runs head heads director leads led chief",
        "open opened opening",
        "cost costs worth price value million",
        "change changed grow grew growth rise rose fall fell increase decrease",
    )
]
# The sections of a researcher's request that are no page (what it is asked, not what it read).
OWN_SECTIONS = ("Research question", "Your step")
EARLIER = (*OWN_SECTIONS, "Findings of earlier steps")  # ... nor evidence gathered for its own step


@dataclass
class Doc:
    url: str
    title: str
    text: str


@dataclass
class Unit:
    text: str
    doc: int  # which document, in reading order
    para: int  # which paragraph of it
    pos: int  # which sentence of the paragraph


def names_in(text: str) -> list[str]:
    """The names a question gives, lower-cased: two or more capitalised words
    ("Kessel Point"), or one inside the sentence ("… of Brackwater?")."""
    text = text[:2000]
    found = [name for name in _PROPER.findall(text)]
    for match in _CAPITALISED.finditer(text):
        before = text[: match.start()].rstrip()
        inside = before and not before.endswith((".", "?", "!", ":", "\n", "#"))
        if inside and match.group().lower() not in ASKING and terms(match.group()):
            found.append(match.group())
    cleaned = [" ".join(name.lower().split()).removesuffix("'s").removesuffix("’s").rstrip("'’") for name in found]
    return [name for name in cleaned if not any(name != other and name in other for other in cleaned)]


class Wanted:
    """What a step asks for: its words, the names it gives (two or more
    capitalised words), which count only whole ("Kessel Point" is not
    matched by a sentence about Hallow Point), and words related to its own."""

    def __init__(self, query: str, extra: str = "") -> None:
        self.names = list(dict.fromkeys(names_in(query)))
        in_names = {t for name in self.names for t in terms(name)}
        asked = set(terms(query)) - ASKING
        self.words = (asked | set(terms(extra))) - in_names
        self.related = {w for group in RELATED if group & self.words for w in group} - self.words
        self.size = len(asked)
        self.quantity = bool(re.search(r"\b(how many|how much|number of|population|percentage)\b", query.lower()))

    def score(self, text: str) -> float:
        """How much of what is asked ``text`` holds."""
        number = (1.0 if self.quantity else 0.5) if _NUMBER.search(text) else 0.0
        return self.worth(self.matched(text)) + number

    def matched(self, text: str) -> set[str]:
        """What of the step ``text`` holds: names (whole), words (or a word of
        the same stem, roughly: "elected" for "election"), related words."""
        have = set(terms(text))
        stems = {word[:STEM] for word in have if len(word) >= STEM and not word.isdigit()}
        flat = " ".join(text.lower().split())
        named = {f"name:{name}" for name in self.names if name in flat}
        words = {w for w in self.words if w in have or (len(w) >= STEM and not w.isdigit() and w[:STEM] in stems)}
        return named | words | {f"related:{w}" for w in self.related & have}

    def worth(self, matched: set[str], weights: dict[str, float] | None = None) -> float:
        """What the matches are worth: a name by its words, a related word
        three quarters of one of the step's; ``weights`` scales each."""
        return sum(
            (len(set(terms(m[5:]))) if m.startswith("name:") else 0.75 if m.startswith("related:") else 1.0)
            * (weights or {}).get(m, 1.0)
            for m in matched
        )

    @property
    def least(self) -> float:
        """The score a sentence needs to be a finding."""
        return 2 if self.size >= 4 else 1


# -- what was read -------------------------------------------------------------------


def documents(
    made: list[tuple[str, dict, str]], messages: list[str] = (), skip: tuple[str, ...] = OWN_SECTIONS
) -> list[Doc]:
    """What the researcher read: pages, passages and local hits its tools
    answered, and passages (with their URLs) in its own messages, but for
    their sections named in ``skip``."""
    docs = [doc for text in messages for doc in shown_in(text, skip)]
    for name, args, result in made:
        if not result or result.startswith("Error"):
            continue
        if name in ("crawl", "find_in_page", "read_page"):
            url = str(args.get("url") or "")
            title = next((line.lstrip("# ").strip() for line in result.splitlines() if line.startswith("# ")), url)
            docs.append(Doc(url, title, result))
        elif name == "local_search":
            docs += hits(result)
    if not docs:  # nothing read: the search snippets
        docs = [doc for name, _, result in made if name == "web_search" for doc in hits(result)]
    return docs


def hits(result: str) -> list[Doc]:
    """The hits of a search's answer ("1. Title / URL: … / excerpt"), its own
    heading line left out."""
    docs = []
    for hit in re.split(r"\n(?=\d+\. )", result):
        url = next(iter(re.findall(r"URL: (\S+)", hit)), "")
        first, _, rest = hit.partition("\n")
        if url and re.match(r"\d+\. ", first):
            text = "\n".join(line.strip() for line in rest.splitlines() if not line.strip().startswith("URL: "))
            docs.append(Doc(url, first.split(". ", 1)[1].strip(), text))
    return docs


def shown_in(message: str, skip: tuple[str, ...] = OWN_SECTIONS) -> list[Doc]:
    """Passages a request shows with their sources, in whatever layout: a
    short line naming a URL ("URL: …", "## [Title](…)", "Source: …") starts a
    passage, the lines below are its text; a line "- text [title](url)" is
    a passage of its own. The request's own sections (question, step) are not."""
    docs: list[Doc] = []
    current: Doc | None = None
    heading, skipping = "", False
    for line in message.splitlines():
        stripped = line.strip()
        if stripped.startswith("# ") and not _URL.search(stripped):
            skipping, current = stripped[2:].strip() in skip, None
            continue
        if skipping:
            continue
        link = _LINKED.search(stripped)
        if link and link.start() == 0 and stripped[link.end() :].startswith(":"):  # "[Title](URL): a passage"
            current = Doc(link.group(2), link.group(1) or link.group(2), stripped[link.end() + 1 :].strip() + "\n")
            docs.append(current)
            continue
        if link and stripped.startswith(("- ", "* ")) and len(_LINKED.sub("", stripped).strip()) > 20:
            text = _LINKED.sub("", stripped)[2:].strip()
            docs.append(Doc(link.group(2), link.group(1) or link.group(2), text))
            continue
        url = next(iter(_URL.findall(stripped)), "")
        if url and len(stripped) <= 400:
            title = _LINKED.sub(r"\1", stripped).replace(url, "").strip(" #-*:·|()[]<>") or heading or url
            title = re.sub(r"^(?:URL|Source|Link)\s*:?\s*", "", title, flags=re.I) or heading or url
            current = Doc(url, title, "")
            docs.append(current)
        elif current is not None:
            current.text += line + "\n"
        if stripped.startswith("#"):
            heading = stripped.lstrip("# ").strip()
    return [doc for doc in docs if doc.text.strip()]


def paragraphs(text: str) -> list[list[str]]:
    """The sentences of each paragraph of prose (lines of a paragraph joined
    first: a PDF breaks lines mid-sentence; a list item is a paragraph);
    table rows, headings and the reading tool's own notes ("[Passages of …
    read with read_page(…)]") stay out."""
    out, paragraph = [], []
    for line in text.splitlines() + [""]:
        line = line.strip()
        note = line.startswith("[") and line.endswith("]")
        if line and not note and not line.startswith(("|", "#", "URL:")) and len(line) <= 5000:
            if re.match(r"[-*+]\s|\d+\.\s", line) and paragraph:
                out.append(sentences(" ".join(paragraph)))
                paragraph = []
            paragraph.append(re.sub(r"^[-*+]\s+|^\d+\.\s+", "", line))
            continue
        if paragraph:
            out.append(sentences(" ".join(paragraph)))
            paragraph = []
    return [p for p in out if p]


def sentences(text: str) -> list[str]:
    """The sentences of a paragraph; a line wholly in italics (a byline, a
    dateline: "*Selm Valley Post, 7 May 2021*") is none."""
    found = [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 12]
    return [s for s in found if not (s.startswith("*") and s.endswith("*") and s.count("*") == 2)]


def units(docs: list[Doc]) -> list[Unit]:
    return [
        Unit(sentence, d, p, n)
        for d, doc in enumerate(docs)
        for p, paragraph in enumerate(paragraphs(doc.text))
        for n, sentence in enumerate(paragraph)
    ]


def tables(text: str) -> list[tuple[str, list[str]]]:
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


# -- what answers the step -------------------------------------------------------------


def chosen(wanted: Wanted, docs: list[Doc]) -> list[list[Unit]]:
    """The findings: runs of sentences of one paragraph, best first, at most
    ``MAX_UNITS`` chosen in all, each sentence once. A sentence chosen for
    the one before it (its own words fall short) comes with it."""
    read = units(docs)
    own = [wanted.score(u.text) for u in read]
    titles = [wanted.score(doc.title) - (0.5 if _NUMBER.search(doc.title) else 0) for doc in docs]
    score: dict[int, float] = {}
    lead: dict[int, int] = {}
    seen: set[str] = set()
    for i, unit in enumerate(read):
        if unit.text in seen or own[i] <= 0:
            continue
        seen.add(unit.text)
        prev = i - 1 if i and (read[i - 1].doc, read[i - 1].para) == (unit.doc, unit.para) else None
        context = 0.5 * max(own[prev] if prev is not None else 0.0, titles[unit.doc])
        if own[i] + context >= wanted.least:  # context lifts a sentence over the bar; its own words rank it
            score[i] = own[i] + 0.25 * context
            if own[i] < wanted.least and prev is not None and own[prev] > 0:
                lead[i] = prev
    best = cover(wanted, read, score)
    picked = sorted(set(best) | {lead[i] for i in best if i in lead})
    groups: list[list[int]] = []
    for i in picked:
        if groups and groups[-1][-1] == i - 1 and (read[i - 1].doc, read[i - 1].para) == (read[i].doc, read[i].para):
            groups[-1].append(i)
        else:
            groups.append([i])
    groups.sort(key=lambda g: (-max(score.get(i, 0.0) for i in g), g[0]))
    return [[read[i] for i in group] for group in groups]


def cover(wanted: Wanted, read: list[Unit], score: dict[int, float]) -> list[int]:
    """Up to ``MAX_UNITS`` of the scored sentences, each next one the one that
    adds most of what the step asks and no sentence so far holds (so both
    parts of "who wrote it, and which group does she head?" are answered),
    then the best of the rest."""
    left, picked, covered = dict(score), [], set()
    matched = {i: wanted.matched(read[i].text) for i in score}
    while left and len(picked) < MAX_UNITS:
        gain = {i: wanted.worth(matched[i] - covered) for i in left}
        i = max(left, key=lambda i: (gain[i] > 0, gain[i] + 0.25 * left[i], -i))
        picked.append(i)
        covered |= matched[i]
        del left[i]
    return picked


def findings(query: str, made: list[tuple[str, dict, str]], messages: list[str] = (), extra: str = "") -> str:
    """Extractive findings: the sentences and tables of what was read that
    answer the step, each with its source. ``extra``: words learnt on the
    way (a name a second search added) that count as the step's own."""
    wanted = Wanted(query, extra)
    docs = documents(made, messages)
    groups = chosen(wanted, docs)
    picked_tables, seen = [], set()
    for order, doc in enumerate(docs):
        for lead, rows in tables(doc.text):
            key = tuple(" ".join(row.split()) for row in rows)  # one table read twice (a page and its passage) is one
            score = wanted.score(lead + " " + " ".join(rows))
            if score >= wanted.least + 1 and key not in seen:
                seen.add(key)
                picked_tables.append((-score, order, rows, doc))
    picked_tables = sorted(picked_tables, key=lambda t: t[:2])[:MAX_TABLES]
    if not groups and not picked_tables:
        return "## Findings\n\nNothing I read answers this step.\n\n## References\n\n(none)"
    lines = ["## Findings", ""]
    lines += [
        f"- {' '.join(u.text for u in group)} [{docs[group[0].doc].title}]({docs[group[0].doc].url})"
        for group in groups
    ]
    for _, _, rows, doc in picked_tables:
        lines += ["", f"Table from [{doc.title}]({doc.url}):", "", *with_header(rows)]
    used = list(
        dict.fromkeys(
            [(docs[g[0].doc].url, docs[g[0].doc].title) for g in groups]
            + [(t[3].url, t[3].title) for t in picked_tables]
        )
    )
    lines += ["", "## References", ""] + [f"- [{title}]({url})" for url, title in used]
    return "\n".join(lines)


def next_entity(query: str, made: list[tuple[str, dict, str]], messages: list[str] = ()) -> str | None:
    """What a second search should add: the subject of the best sentence
    read so far when the query does not name it (its page's title, or a
    name of two or more capitalised words in it), with the query's words
    that sentence lacks and the words related to them."""
    wanted, asked = Wanted(query), query.lower()
    docs = documents(made, messages)
    read = units(docs)
    if wanted.names and not any(covers(wanted, u.text) for u in read):
        # Nothing read says it of what the step is about: look that up itself.
        return " ".join(wanted.names)
    ranked = sorted(read, key=lambda u: -wanted.score(u.text))[:5]
    for unit in ranked:
        title = docs[unit.doc].title
        subject = title if title.lower() in unit.text.lower() else None
        for name in ([subject] if subject else []) + _PROPER.findall(unit.text[:2000]):
            if name.lower() not in asked and not set(terms(name)) <= set(terms(asked)):
                have = set(terms(unit.text))
                rest = [w for w in dict.fromkeys(terms(query)) if w not in have and w not in ASKING]
                related = [w for w in sorted(wanted.related) if w not in have][:4]
                return " ".join([name, *rest, *related])
    return None


def covers(wanted: Wanted, text: str, any_name: bool = False) -> bool:
    """Whether ``text`` says what the step asks of what it names: half of
    the step's other words, and the names too unless it holds all of those
    words ("The light was first lit in 1871" answers when the Greyhorn Light
    was first lit; "Olvane Instruments is based in Tessary" does not answer
    who founded Olvane Instruments)."""
    matched = wanted.matched(text)
    names = {f"name:{name}" for name in wanted.names}
    rest = wanted.size - len(set(terms(" ".join(wanted.names))))
    said = wanted.worth(matched - names)
    named = not names or (bool(names & matched) if any_name else names <= matched)  # any_name: each named apart
    return said >= 0.5 * rest and (named or (said >= rest >= 2))


def uncovered_part(query: str, made: list[tuple[str, dict, str]], messages: list[str] = ()) -> str | None:
    """A later part of a two-part step ("…, and how many … in 2023?") that
    nothing read so far answers half of: what a last search should ask,
    with the names the step gives."""
    parts = re.split(r",\s+and\s+(?=(?:what|which|who|when|where|how|in what|in which)\b)", query, maxsplit=1)
    if len(parts) < 2:
        return None
    part = parts[1]
    wanted = Wanted(part)
    read = units(documents(made, messages))
    best = max((wanted.worth(wanted.matched(u.text)) for u in read), default=0.0)
    if not wanted.size or best >= 0.6 * wanted.size:
        return None
    names = [name for name in _PROPER.findall(parts[0]) if name.lower() not in part.lower()]
    return " ".join([*names, part])
