"""What a writer was shown, indexed for the statements of what it wrote
(``activities/support.py``): passages, each with the page it comes from and
its figures (``activities/figures.py``; numbers spelled out,
``activities/number_words.py``), a BM25 index over them, the names it uses,
and whether a text is in its language. Bounded and linear in the texts.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, field

from activities import reading
from activities.common_words import common
from activities.derivation import sequences
from activities.figures import Figure, convention, figures, plain, spaced_figures
from activities.number_words import worded_figures
from activities.statement_text import LINKED, NAME, Sentence, named_in, sentences

MAX_SHOWN = 600_000  # characters of what it was shown looked at
MAX_PASSAGE = 2_000  # characters of one passage of the material (longer ones are cut)
MATCHED = 5  # passages a statement is compared with
QUERY_TERMS = 12  # its rarest terms find them
CONTEXT_MATCHED = 3  # more passages found with its context
HOLDING = 3  # and passages that hold its figures
MAX_HELD = 12  # of its figures, those whose passages are looked for
STEM = 6
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_ITEM = re.compile(r"[ \t]{0,8}(?:[-*+]|(\d{1,3}[.)]))[ \t]")  # a list item's mark: its number is no figure


COMMON_WORDS = 50  # the commonest words of what a report was shown: its language's function words
MIN_COMMON_SHARE = 0.2  # a report with fewer of its words among them is in another language
_WORD = re.compile(r"[^\W\d_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def is_cjk(text: str) -> bool:
    """Whether ``text`` is written mostly in Chinese, Japanese or Korean
    characters (its words then never match a Latin text's)."""
    letters = sum(1 for c in text[:2000] if c.isalpha())
    return bool(letters) and len(_CJK.findall(text[:2000])) / letters > 0.3


_ELISION = re.compile(r"\b(?:[cdjlmnst]|qu)['’](?=[^\W\d_])", re.IGNORECASE)  # French "l’", "d’", "qu’"


def _function_words(text: str) -> list[str]:
    """Lower-cased words, stop words kept; CJK text character by character.
    Not a French elision's letter ("l’Agence", "d’après"), which English
    text has as words of its own ("s" of "harbour's")."""
    out: list[str] = []
    for word in _WORD.findall(_ELISION.sub("", text).lower()):
        out += _CJK.findall(word) if _CJK.search(word) else [word]
    return out


def same_language(report: str, shown: str) -> bool:
    """Whether the report is in the language of ``shown``: enough of its
    words are among the commonest words of ``shown`` (its function words,
    whatever its language: "the", "of", "und", "的")."""
    said = _function_words(report)
    if not said:
        return False
    common = {w for w, _ in Counter(_function_words(shown)).most_common(COMMON_WORDS)}
    return sum(1 for w in said if w in common) / len(said) >= MIN_COMMON_SHARE


TRANSLATED_SHARE = 0.25  # of the material's passages in words, in another language than the report: it translates
MIN_PASSAGE_WORDS = 8  # a passage of fewer words (a table row, a title) tells no language
# Each language's commonest function words: what a text is written in is the one it uses most of.
FUNCTION_WORDS = {
    "en": "the of and to in is was for that with on by from as are were it its at which this be has have",
    "de": "der die das und den von zu mit im ist des für auf nicht ein eine dem sich bei wurde auch als nach aus",
    "fr": "le la les de des et du un une est en dans pour par sur au aux que qui été pas avec plus",
    "es": "el la los las de y en del que por un una con para se es al fue su lo como más sobre",
    "it": "il la le di e che del della in un una per con è sono dei delle gli nel alla al da non",
    "pt": "o a os as de e do da dos das em um uma para com que no na foi é por ao",
    "nl": "de het een en van in is op te dat voor met zijn niet aan er bij ook als",
}
_FUNCTION_SETS = {language: frozenset(words.split()) for language, words in FUNCTION_WORDS.items()}


def language_of(text: str) -> str | None:
    """The language ``text`` is written in, by its function words ("cjk"
    for Chinese, Japanese or Korean); None when it has too few to tell."""
    if is_cjk(text):
        return "cjk"
    words = _function_words(text)
    counts = {language: sum(1 for w in words if w in used) for language, used in _FUNCTION_SETS.items()}
    best = max(counts, key=counts.get)
    return best if counts[best] >= 2 else None


def translated(report: str, passages: list[Passage]) -> bool:
    """Whether a report writes over material in another language than its
    own, in part (``TRANSLATED_SHARE`` of its passages in words or more:
    German pages under an English report): a capitalised common word the
    material lacks is then a translation ("Environmental Statement" for
    "Umwelterklärung", "Rotterdam" for "Róterdam"), not an invented name."""
    mine = language_of(report[:20_000])
    told = foreign = 0
    for p in passages:
        if len(_function_words(p.text[:600])) < MIN_PASSAGE_WORDS:
            continue
        told += 1
        foreign += language_of(p.text[:600]) not in (mine, None)
    return mine is not None and bool(told) and foreign / told >= TRANSLATED_SHARE


@dataclass
class Passage:
    text: str
    url: str
    figures: list[Figure]
    terms: set[str]  # stems of its terms
    writing: str | None = None  # how it writes numbers (figures.convention)
    spelled: list[Figure] = field(default_factory=list)  # its numbers written in words ("forty-eight")
    values: list[float] = field(default_factory=list)  # of its figures and spelled numbers, sorted
    _lines: list[tuple[set[str], list[Figure]]] | None = None
    _runs: list | None = None
    _units: list[tuple[set[str], list[Figure]]] | None = None
    _language: str | None = ""
    _cjk: bool | None = None
    attached: list | None = None  # its units with the periods their figures are tied to (``activities/attachment.py``)

    def __post_init__(self) -> None:
        self.values = sorted(v for f in self.figures + self.spelled for v in f.values)
        # what a percentage may be: its percentages, and the figures of a table whose header or row speaks of
        # per cent ("| Share (%) |"); in prose, only a figure written as one ("13 November" is no 13 %)
        rows = [line for line in self.text.split("\n") if line.lstrip().startswith("|")]
        header = bool(rows) and _PER_CENT.search(rows[0]) is not None
        cells = [line for line in rows if header or _PER_CENT.search(line)]
        self.percents = sorted(
            {v for f in self.figures if f.percent for v in f.values}
            | {v for line in cells for f in figures(plain(line), self.writing) for v in f.values}
        )

    def lines(self) -> list[tuple[set[str], list[Figure]]]:
        """(terms, figures) of each line, read once."""
        if self._lines is None:
            self._lines = [
                (set(reading.terms(line)), _read(plain(line), self.writing, True)) for line in self.text.split("\n")
            ]
        return self._lines

    def around(self, figure: Figure, hedge: bool) -> set[str] | None:
        """The word stems of the sentences (or table rows) that hold
        ``figure``, and of the passage's first line (its page's title, its
        table's header); None when it holds it nowhere."""
        if self._units is None:
            lines = self.text.split("\n")
            self._units = [
                (stems(reading.terms(unit)), _read(plain(unit), self.writing, True))
                for line in lines
                for unit in (sentences(line) if not line.lstrip().startswith("|") else [line])
            ]
            self._units.insert(0, (stems(reading.terms(plain(lines[0]))), []))
        found = [terms for terms, held in self._units if any(figure.matches(v, hedge) for g in held for v in g.values)]
        return set().union(self._units[0][0], *found) if found else None

    def runs(self) -> list:
        """The sums and averages of its runs of figures (a table's columns,
        else its figures that are not years), computed once."""
        if self._runs is None:
            self._runs = sequences(self.text, self.figures, self.writing)
        return self._runs

    @property
    def cjk(self) -> bool:
        """Whether it is written in CJK characters (``is_cjk``), read once."""
        if self._cjk is None:
            self._cjk = is_cjk(self.text)
        return self._cjk

    @property
    def language(self) -> str | None:
        """The language it is written in (``language_of``), read once."""
        if self._language == "":
            self._language = language_of(self.text[:600])
        return self._language

    def holds(self, figure: Figure, hedge: bool) -> bool:
        """Whether one of its figures (or numbers spelled out) rounds to
        ``figure``, or is it at another scale (``spans``); a percentage only
        one of its percentages ("13 %" is no "13 November")."""
        return _among(figure, self.percents if figure.percent else self.values, hedge)

    def writes(self, figure: Figure, hedge: bool) -> bool:
        """Whether it holds ``figure`` as written (not only at another scale:
        "2,675,000 kg" from "2,675 tonnes" is computed, not stated)."""
        if figure.percent:
            return any(figure.matches(v, hedge) for v in self.percents)
        return any(figure.matches(v, hedge) for g in self.figures + self.spelled for v in g.values)

    def spelled_only(self, figure: Figure, hedge: bool) -> bool:
        """Whether it holds ``figure`` only as a number spelled out (or at
        another scale): the figure is then computed, when it can be, not stated."""
        return not any(figure.matches(v, hedge) for g in self.figures for v in g.values)


_PER_CENT = re.compile(r"%|％|per ?cent|percent|prozent|por ciento|pour cent|per cento|por cento|百分", re.IGNORECASE)
SCALED_DIGITS = 4  # a figure of this many significant digits is the same figure at another scale
_SCALES = (1e3, 1e6, 1e9, 1e-3, 1e-6, 1e-9)


def spans(figure: Figure, hedge: bool) -> list[tuple[float, float]]:
    """The ranges of values ``figure`` may stand for (each reading within
    its rounding); one of four significant digits or more also at a scale a
    thousand times apart ("1,284,600 t" is "1.284,6 kt", "£486.3m" is
    "486,300 thousand"): the same digits by chance are rare."""
    out = [(r.value - r.tolerance(hedge), r.value + r.tolerance(hedge)) for r in figure.readings]
    if figure.digits >= SCALED_DIGITS and not figure.percent:
        r = figure.readings[0]
        out += [((r.value - r.tolerance(hedge)) * k, (r.value + r.tolerance(hedge)) * k) for k in _SCALES]
    return out


def _among(figure: Figure, values: list[float], hedge: bool) -> bool:
    for low, high in spans(figure, hedge):
        at = bisect.bisect_left(values, low)
        if at < len(values) and values[at] <= high:
            return True
    return False


def _read(text: str, writing: str | None, spelled: bool = False) -> list[Figure]:
    """The figures of material ``text`` (``plain``), its space-grouped
    numbers read both ways ("31 600": 31 and 600, and 31600); ``spelled``:
    and its numbers written in words."""
    return figures(text, writing) + spaced_figures(text, writing) + (worded_figures(text) if spelled else [])


def _url_of(text: str) -> str:
    found = LINKED.search(text)
    return found.group(1) if found else ""


def passages_of(shown: str) -> list[Passage]:
    """What the writer was shown, as passages with their pages: paragraphs,
    a list cut into its items (a findings line names its page); a numbered
    list's items without their numbers."""
    out: list[Passage] = []
    for paragraph in _PARAGRAPH.split(shown[:MAX_SHOWN]):
        lines = [line for line in paragraph.strip().split("\n") if line.strip()]
        if not lines:
            continue
        if sum(1 for line in lines if (item := _ITEM.match(line)) and item.group(1)) > 1:  # a numbered list
            lines = [_unnumbered(line) for line in lines]
        listed = sum(1 for line in lines if line.lstrip().startswith(("- ", "* ", "+ "))) > 1
        pieces = lines if listed else ["\n".join(lines)]
        for piece in pieces:
            piece = piece.strip()
            if piece.startswith("[") and piece.endswith("]") and "\n" not in piece:
                continue  # a role marker of the request as sent: [user]
            for start in range(0, len(piece), MAX_PASSAGE):
                text = piece[start : start + MAX_PASSAGE]
                clean = plain(text)
                writing = convention(clean)
                spelled = worded_figures(clean)
                out.append(
                    Passage(text, _url_of(piece), _read(clean, writing), stems(reading.terms(clean)), writing, spelled)
                )
    return out


def _unnumbered(line: str) -> str:
    """A list item without its number ("3. Dr Harrowby wrote …": 3 is no
    figure the item states)."""
    item = _ITEM.match(line)
    return line[item.end() :] if item and item.group(1) else line


def stems(terms: list[str]) -> set[str]:
    """Terms cut to their first six letters, so that "harvest" meets
    "harvested" and "employee" "employees" (CJK bigrams stay whole)."""
    return {t[:STEM] for t in terms}


def words_of(text: str) -> set[str]:
    """The word stems of ``text``, numbers left out."""
    return stems([t for t in reading.terms(text) if not any(c.isdigit() for c in t)])


def page_text(url: str, title: str, text: str) -> str:
    """A page the run read as passages are shown: each paragraph after a
    link to its page (a table after "Table from" it), so that each passage
    of it names its page and starts with its title."""
    link = f"[{title or url}]({url})"
    paragraphs = [p.strip() for p in _PARAGRAPH.split(text) if p.strip()]
    return "\n\n".join(f"Table from {link}:\n{p}" if p.startswith("|") else f"{link}: {p}" for p in paragraphs)


class Material:
    """What the writer was shown (and the pages the run read, ``pages``:
    (url, title, text)), indexed for its statements."""

    def __init__(self, shown: str, question: str, pages: list[tuple[str, str, str]] = ()) -> None:
        read = "\n\n".join(page_text(*page) for page in pages)
        self.passages = passages_of(shown) + (passages_of(read) if read else [])
        self.index = reading.Index([p.text for p in self.passages])
        self.words = {w.lower() for w in NAME.findall(shown[:MAX_SHOWN])} | {w.lower() for w in NAME.findall(read)}
        self.words |= {part for w in list(self.words) for part in re.split(r"[-'’]", w) if part}
        # what it states in figures (a number spelled out, "thirty countries", states only where its passage
        # speaks of the statement: a figure found nowhere else, "£30m", is still invented)
        self.values = sorted(v for p in self.passages for f in p.figures for v in f.values)
        self.where = sorted((v, i) for i, p in enumerate(self.passages) for v in p.values)  # which passage holds what
        self.percents = sorted({v for p in self.passages for v in p.percents})  # what a percentage may be
        self.question_figures = figures(plain(question), None)
        self.translations = False  # set for the report judged (``translated``)
        self.report_language: str | None = None

    def given(self, figure: Figure, hedge: bool) -> bool:
        """Whether the question gives ``figure``."""
        return any(figure.matches(v, hedge) for g in self.question_figures for v in g.values)

    def anywhere(self, figure: Figure, hedge: bool) -> bool:
        """Whether any passage holds ``figure`` (a percentage as a
        percentage: "40 %" is found nowhere beside "40 years"), or the
        question gives it."""
        return self.given(figure, hedge) or _among(figure, self.percents if figure.percent else self.values, hedge)

    def matching(self, sentence: Sentence) -> list[Passage]:
        """The passages that match the statement best, then those that match
        it with its context (the sentence before, the table it is a row of)."""
        found = [i for _, i in self.index.scores(sentence.bare, QUERY_TERMS)[:MATCHED]]
        if sentence.context:
            more = self.index.scores(f"{sentence.bare} {sentence.context}", QUERY_TERMS)[:MATCHED]
            found += [i for _, i in more if i not in found][:CONTEXT_MATCHED]
        found += [i for i in self._holding(sentence) if i not in found][:HOLDING]
        return [self.passages[i] for i in found]

    def _holding(self, sentence: Sentence) -> list[int]:
        """Passages that hold the statement's figures (not years), whatever
        their words (in another language, or a table): those holding most of
        them first, its figures of more digits first (a long sentence's
        "30 November" must not crowd out the passage of its "2,150" and
        "1,333"). Bounded: ``HOLDING * 2`` passages looked at per figure."""
        count: Counter[int] = Counter()
        for figure in sorted((f for f in sentence.figures if not f.year), key=lambda f: -f.digits)[:MAX_HELD]:
            seen: set[int] = set()
            for low, high in spans(figure, False):
                at = bisect.bisect_left(self.where, (low, -1))
                while at < len(self.where) and self.where[at][0] <= high:
                    if len(seen) >= HOLDING * 2:
                        break
                    seen.add(self.where[at][1])
                    at += 1
            count.update(seen)
        return [i for i, _ in sorted(count.items(), key=lambda item: -item[1])][: HOLDING * 2]

    def foreign(self, passage: Passage) -> bool:
        """Whether ``passage`` is in another language than the report, over
        material it translates in part (``translations``): its words cannot
        tell whether it states what the report says, only its figures and
        names can (German pages under an English report and its findings)."""
        return self.translations and passage.language not in (self.report_language, None)

    def known(self, name: str, person: bool = False) -> bool:
        """Whether the material uses ``name``, or, over material the report
        translates (``translations``), it is a common word of a language
        (``activities/common_words.py``). In the material's own language,
        a name of common words it never uses ("the King Road", "the Royal
        Society for Seabirds") is a name to find in it, and so is a
        ``person``'s anywhere ("Dr. Pierre Martin")."""
        return named_in(name, self.words) or (self.translations and not person and common(name))
