"""What a report states: its statements, the unit that ``activities/support.py``
traces to the material. A statement is a sentence (or a table row's body) of
the report that carries a figure or a name beyond the question's own, or says
that the material does not give something; headings, rules, code, lists of
links, footnotes and a sources section state nothing. Pure functions, every
pattern linear; the text is bounded first."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from activities import reading
from activities.figures import CJK, Figure, convention, figures, joined_thousands, plain

MAX_REPORT = 60_000  # characters of a report looked at
MAX_STATEMENTS = 150
MAX_SENTENCE = 1_000  # characters of one statement looked at
MAX_FIGURES = 12  # figures of one statement checked
MAX_CONTEXT = 1_500  # characters of what a statement speaks of beside itself
# A sentence ends after its mark and the closing marks after it ("**", a quote).
_SENTENCE_END = re.compile(r"[.!?;][*_\"”’)\]]{0,3}(?=\s)|[。！？；]")
_MARKS = re.compile(r"^(?:>[ \t]?){0,5}(?:[-*+][ \t]+|\d{1,3}[.)][ \t]+)?")  # quote and list marks
_ORDINAL_END = re.compile(r"(?<![\d.,])\d{1,2}\.$")  # "am 6. Mai": no sentence ends there
_REFERENCE_END = re.compile(r"&#?[A-Za-z0-9]{1,8};[*_\"”’)\]]{0,3}$")  # "Ferries&#39; route": no sentence ends there
# "2.5 vs. 1.9", "c. 19 %", "Op. profit", "18,4 Mio. £", "3 Dec. 2018", "Dr. Pierre Martin": no sentence ends there
_ABBREVIATION_END = re.compile(
    r"(?i)(?<![^\W\d_])(?:vs|e\.g|i\.e|cf|approx|ca|c|incl|resp|esp|op|est|avg|fig|env|mio|mrd|mill|md|bzw|ggf|vgl"
    r"|jan|feb|apr|jun|jul|aug|sep|sept|oct|nov|dec|dr|prof|mr|mrs|ms|nr|mme|sr|sra|dott|ing)\.$"
)
NAME = re.compile(r"[^\W\d_][\w'’-]*")
LINKED = re.compile(r"\[[^\[\]\n]{0,400}\]\(((?:https?|file)://[^()\s]{1,2000})\)")
_SOURCES = (
    "source",
    "reference",
    "citation",
    "bibliograph",
    "further reading",
    "fuente",
    "referencia",
    "quelle",
    "literatur",
    "référence",
    "来源",
    "参考",
    "引用",
    "出典",
    "how the statements are supported",
)
SOURCES_HEADING_WORDS = 5  # "references and further reading" is four
SOURCES_HEADING_CJK = 10  # characters
LACKS = (
    "not given",
    "not stated",
    "not state",
    "not say",
    "not give",
    "not report",
    "not mention",
    "not provide",
    "not specif",
    "not identif",
    "not name",
    "not list",
    "not include",
    "not contain",
    "not publish",
    "not disclose",
    "not record",
    "not found",
    "not available",
    "not cover",
    "not know",
    "no figure",
    "no data",
    "no information",
    "no record",
    "no mention",
    "no source",
    "none of the",
    "nothing in the",
    "unknown",
    "unavailable",
    "could not find",
    "could not be found",
    "cannot be determined",
    "silent on",
    "no se indica",
    "no se menciona",
    "no se especifica",
    "no se da",
    "no indica",
    "no dan",
    "no dice",
    "no hay dato",
    "no figura",
    "no aparece",
    "no proporciona",
    "no ofrece",
    "ninguna de las fuentes",
    "ninguno de los documentos",
    "nicht angegeben",
    "nicht genannt",
    "nicht erwähnt",
    "nicht enthalten",
    "keine angabe",
    "keine daten",
    "keine zahl",
    "ne donne",
    "ne mentionne",
    "ne précise",
    "ne fournit",
    "aucune donnée",
    "aucune information",
    "未提及",
    "未说明",
    "未给出",
    "未提供",
    "未列出",
    "未公布",
    "没有提到",
    "没有给出",
    "没有提供",
    "没有数据",
    "没有相关",
    "并未",
    "无法确定",
    "記載がない",
    "記載されていない",
    "不明",
)
NOT_NAMES = frozenset(
    "january february march april may june july august september october november december monday tuesday "
    "wednesday thursday friday saturday sunday the this that these those key points overview analysis summary "
    "conclusion conclusions table note notes figure report findings sources source references introduction "
    "background method methods results discussion answer question detailed survey "
    # nationalities and languages, capitalised in English but no names of what a source must say
    "english british scottish welsh irish american canadian european african asian chinese japanese korean "
    "french german spanish italian portuguese dutch swedish norwegian danish finnish russian polish greek "
    "turkish arabic indian australian international national celsius fahrenheit "
    # abbreviations of months and days, and of periods and rates
    "jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun "
    "yoy qoq mom ytd est approx avg".split()
)


@dataclass
class Sentence:
    text: str  # as the report has it
    bare: str  # without links' addresses and footnote markers
    figures: list[Figure] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    row: bool = False
    # What it speaks of beside itself: the sentence before it, or the table's
    # header and earlier rows ("+41.3 %" in a "Change" row)
    context: str = ""
    writing: str | None = None  # how the report writes numbers (figures.convention)
    asked: tuple[float, ...] = ()  # the values of its figures the question gives ("80 mg", "PASI 75")
    topic: frozenset[str] = frozenset()  # the question's words (``reading.terms``)


def names(text: str) -> list[str]:
    """Capitalised words that do not start a sentence, a line or a cell
    (lower-cased, possessives cut): "Wren", "harrowgate"."""
    out: list[str] = []
    for match in NAME.finditer(text):
        word = match.group()
        if not word[0].isupper() or len(word) < 3 or (word.isupper() and len(word) <= 5):
            continue
        before = text[max(0, match.start() - 3) : match.start()].rstrip(" *_\"'“(")
        if not before or before[-1] in ".!?:;|-•>\n" or match.start() == 0:
            continue
        if _ABBREVIATION.fullmatch(word) or "_" in word:
            continue  # "KPIs", "PPMs", "Feb-24", "v_end": abbreviations, a period, code
        parts = [p for p in word.split("-") if p]
        if len(parts) > 1:  # "Chinese-language": its capitalised parts are what it names
            word = "-".join(p for p in parts if p[:1].isupper() and p.lower() not in NOT_NAMES)
        word = word.lower().removesuffix("'s").removesuffix("’s").strip("'’-")
        if word and word not in NOT_NAMES:
            out.append(word)
    return out


# A person's title, then their name: up to three capitalised words.
_TITLED = re.compile(
    r"\b(?:Dr|Prof|Professor|Mr|Mrs|Ms|Sir|Dame|Herr|Frau|Mme|Mlle|Sr|Sra|Dott|Dra|Ing)\.?\s+"
    r"((?:[A-ZÀ-Ý][^\W\d_]{1,30}[ -]?){1,3})"
)


def person_names(text: str) -> list[str]:
    """The words of the names that follow a person's title ("Dr. Pierre
    Martin": pierre, martin), lower-cased: a person's name is never a
    translation, whatever words it is made of."""
    return [w.lower() for match in _TITLED.finditer(text) for w in re.split(r"[ -]", match.group(1)) if w]


# An abbreviation in capitals with a plural "s" ("KPIs", "APIs"), or a month with its year ("Feb-24", "Mar-2022").
_ABBREVIATION = re.compile(
    r"[A-Z]{2,5}s|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]{0,6}[-’']\d{2,4}"
)


# English function words German does not share: a text with enough of them is English, however many names.
_ENGLISH = frozenset("the of and to by with from that for is are this which".split())
ENGLISH_SHARE = 0.08


def capitalises_nouns(text: str) -> bool:
    """Whether ``text`` capitalises more than names (German capitalises every
    noun): over a quarter of the words inside its sentences are. Its
    prose only: not headings or table rows, which English writes in Title
    Case or fills with names, nor lines of links."""
    lines = text[:MAX_REPORT].split("\n")
    text = "\n".join(line for line in lines if not line.lstrip().startswith(("#", "|")) and "](" not in line)
    inside = capital = english = 0
    for match in NAME.finditer(text):
        english += match.group().lower() in _ENGLISH
        before = text[max(0, match.start() - 2) : match.start()].rstrip()
        if before and before[-1] not in ".!?:;|#-*>\n":
            inside += 1
            capital += match.group()[0].isupper()
    # English full of names ("Warden Callum Reid of the Hallow Point Puffin Trust") is still English
    return inside >= 20 and capital / inside > 0.25 and english < ENGLISH_SHARE * inside


def statements_of(report: str, question: str, writing: str | None = None) -> list[Sentence]:
    """The report's statements (distinct, at most ``MAX_STATEMENTS``): its
    sentences and table rows with a figure or a name beyond the question's,
    or saying that something is not given (so not the question restated).
    Not headings, rules, code, lists of links, footnotes or a sources
    section. In a language that capitalises its nouns, only figures tell. ``writing``: how its numbers
    are written when the report does not tell (``figures.convention``)."""
    given_names = set(names(question)) | set(NAME.findall(question.lower()))
    given_figures = [v for g in figures(plain(question), None) for v in g.values]
    topic = frozenset(reading.terms(plain(question)))
    by_name = not capitalises_nouns(report)
    writing = convention(plain(report[:MAX_REPORT])) or writing
    found: dict[str, Sentence] = {}
    for text, row, context in _units(report[:MAX_REPORT]):
        text = text[:MAX_SENTENCE]
        bare = joined_thousands(plain(text))
        found_figures = [f for f in figures(bare, writing) if not f.small][:MAX_FIGURES]
        if len(reading.terms(bare)) < 3 and not found_figures:
            continue
        sentence = Sentence(text, bare, found_figures, [], row, plain(context[-MAX_CONTEXT:]), writing)
        # in a language that capitalises its nouns, only a person's name after a title ("Dr. Klaus Weber")
        found_names = names(bare) if by_name else person_names(bare)
        sentence.names = [n for n in found_names if not named_in(n, given_names)]
        beyond = [f for f in found_figures if not any(f.matches(v) for v in given_figures)]
        sentence.asked = tuple(v for f in found_figures if f not in beyond for v in f.values)
        sentence.topic = topic
        if beyond or sentence.names or lacks(bare):
            found.setdefault(" ".join(bare.split()), sentence)
            if len(found) >= MAX_STATEMENTS:
                break
    return list(found.values())


def specifics(text: str, question: str) -> int:
    """How many distinct figures and names the statements of ``text`` carry
    beyond ``question``'s, as the support check reads them: what a text that
    states nothing of it missed. A digest, a path or an address is none (a
    failed run's reporter, shown "blob sha256:4c3e… is missing from
    /tmp/pytest-41" and no finding, was refused for stating none of them)."""
    given = [v for g in figures(plain(question), None) for v in g.values]
    found: set[str] = set()
    for sentence in statements_of(text, question):
        found.update(sentence.names)
        found.update(f.text for f in sentence.figures if not any(f.matches(v) for v in given))
    return len(found)


def named_in(name: str, words: set[str]) -> bool:
    """Whether ``words`` (lower-cased) hold ``name``, whole or in its
    hyphenated parts ("brackwater-hallow" in "Brackwater - Hallow Point")."""
    return name in words or all(part in words for part in re.split(r"[-'’]", name) if part)


def _units(report: str) -> list[tuple[str, bool, str]]:
    """(text, whether a table row, context) of the report's sentences and
    table rows; the context of a sentence is the one before it on its line,
    of a row its table's header and the rows before it."""
    out: list[tuple[str, bool, str]] = []
    fenced = skipping = False
    table: list[str] = []
    before = ""  # the sentence before, within a paragraph (or a list)
    lines = report.split("\n")
    for n, line in enumerate(lines):
        bare = line.strip()
        if not bare.startswith("|"):
            table = []
        if not bare or bare.startswith("#"):
            before = ""
        if bare.startswith("```"):
            fenced = not fenced
            continue
        if bare.startswith("#"):
            skipping = sources_heading(bare)
            continue
        if fenced or skipping or not bare or bare.startswith(("---", "<!--", "[^")) or _only_links(bare):
            continue
        if bare.startswith("|"):
            if not _rule_row(bare) and not (n + 1 < len(lines) and _rule_row(lines[n + 1].strip())):
                out.append((bare, True, "\n".join(table)))  # a row of the table's body
            if not _rule_row(bare):
                table.append(bare)
            continue
        for sentence in sentences(_MARKS.sub("", bare, count=1).strip()):
            out.append((sentence, False, before))
            before = sentence
    return out


def sources_heading(heading: str) -> bool:
    """Whether a heading opens a list of sources ("## Sources", "## 5.
    References and further reading", "## 参考资料"): a short one that opens
    with them, not any that has the word ("# What is the population of
    Orrin's Ford? If sources disagree, …", a question as a title, opens the
    report; "## Where the sources disagree" a section of it)."""
    text = heading.lstrip("#").strip().lower()
    if text == _SOURCES[-1]:  # ours: "How the statements are supported"
        return True
    if CJK.search(text):
        return len(text) <= SOURCES_HEADING_CJK and any(word in text for word in _SOURCES)
    words = [w for w in text.split() if any(c.isalpha() for c in w)]  # not "5." or an emoji
    # a sources word, not a verb made of one ("## Sourced context and background" is a section)
    opening = [w.strip(":*_.,()[]") for w in words[:2]]
    opening = [w for w in opening if not w.endswith(("ed", "ing"))]
    return len(words) <= SOURCES_HEADING_WORDS and any(word in w for w in opening for word in _SOURCES)


def _rule_row(line: str) -> bool:
    """A table's rule under its header: ``|---|:--:|``."""
    return line.startswith("|") and all(set(c.strip()) <= set(":- ") for c in line.strip("|").split("|"))


def sentences(line: str) -> list[str]:
    """The sentences of a line; not cut after a day or an ordinal written
    as a number and a full stop ("am 6. Mai"), nor after a character
    reference ("Ferries&#39; route") or an abbreviation ("2.5 vs. 1.9")."""
    out: list[str] = []
    ends = (m.end() for m in _SENTENCE_END.finditer(line))
    cuts = [end for end in ends if not _glued(line[max(0, end - 14) : end])]
    for start, end in zip([0, *cuts], [*cuts, len(line)]):
        piece = line[start:end].strip()
        if out and _ORDINAL_END.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}".strip()
        elif piece:
            out.append(piece)
    return out


def _glued(before: str) -> bool:
    """Whether a full stop or semicolon ending ``before`` ends no sentence:
    a character reference's (``&#39;``) or an abbreviation's (``vs.``)."""
    return bool(_REFERENCE_END.search(before) or _ABBREVIATION_END.search(before))


def _only_links(line: str) -> bool:
    """A line that is links (a reference list's entry) and little else."""
    rest = LINKED.sub("", line)
    if rest == line:
        return False
    return len(re.sub(r"[\W\d_]+", "", rest)) < 12 or bool(re.match(r"\s*[-*+]?\s*\[?\d{1,3}[\].)]", line))


def lacks(text: str) -> bool:
    low = text.lower()
    return any(phrase in low for phrase in LACKS)
