"""How each statement of a report is supported by what its writer was shown
(SPEC 3d): ``stated``, ``derived``, ``absent`` or ``unsupported``.

A statement is a sentence (or a table row) of the report that carries a
figure or a name beyond the question's own, or that says the material lacks
something. What the writer was shown (the request as sent but its system
prompt: findings, evidence passages after links to their pages, the
background search) is cut into passages, each with the page it comes from.

- *stated*: the passages that match it best hold each of its figures (as
  written or rounded the way it is written) and its names, and share enough
  of its words (in another language than the material: its figures and
  names suffice);
- *derived*: each figure the passages lack follows by one step of arithmetic
  from figures they state (``activities/arithmetic.py``: differences, sums,
  ratios, shares and changes in per cent, compound rates, averages, unit
  conversions), within the rounding the statement uses;
- *absent*: it says the material does not give something;
- *unsupported*: none of these; *invented* when it carries a figure found
  nowhere in the material and not derived, or a name the material never
  uses.

Footnote markers, links and citation brackets are not figures. Bounded and
linear in the texts (which are cut first); the model activity runs it off
the event loop.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, field

from activities import reading
from activities.derivation import derive, sequences, shown
from activities.figures import Figure, constants, convention, figures, hedged, plain, spaced_figures
from activities.number_words import worded_figures
from activities.statement_text import LINKED, NAME, Sentence, lacks, named_in, sentences, statements_of
from workflows.support_models import Statement, SupportCounts

MAX_SHOWN = 600_000  # characters of what it was shown looked at
MAX_PASSAGE = 2_000  # characters of one passage of the material (longer ones are cut)
MATCHED = 5  # passages a statement is compared with
QUERY_TERMS = 12  # its rarest terms find them
CONTEXT_MATCHED = 3  # more passages found with its context
HOLDING = 3  # and passages that hold its figures
MAX_HELD = 12  # of its figures, those whose passages are looked for
STATED_WORDS = 0.4  # words of a statement with figures a passage must share
STATED_WORDS_ONLY = 0.5  # without figures
FIGURES_WORDS = 0.2  # when the passage holds two of its figures (not years) or more
TRUSTED = 12  # of the report's own figures stated or derived before a statement, what it may compute from
NEAR_WORDS = 0.6  # of its words, in its matched passages together
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

    def __post_init__(self) -> None:
        self.values = sorted(v for f in self.figures + self.spelled for v in f.values)

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
        return is_cjk(self.text)

    def holds(self, figure: Figure, hedge: bool) -> bool:
        """Whether one of its figures (or numbers spelled out) rounds to ``figure``."""
        return _among(figure, self.values, hedge)

    def spelled_only(self, figure: Figure, hedge: bool) -> bool:
        """Whether it holds ``figure`` only as a number spelled out."""
        return not any(figure.matches(v, hedge) for g in self.figures for v in g.values)


def _among(figure: Figure, values: list[float], hedge: bool) -> bool:
    for r in figure.readings:
        tol = r.tolerance(hedge)
        at = bisect.bisect_left(values, r.value - tol)
        if at < len(values) and values[at] <= r.value + tol:
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


def _words(text: str) -> set[str]:
    return stems([t for t in reading.terms(text) if not any(c.isdigit() for c in t)])


class Material:
    """What the writer was shown, indexed for its statements."""

    def __init__(self, shown: str, question: str) -> None:
        self.passages = passages_of(shown)
        self.index = reading.Index([p.text for p in self.passages])
        self.words = {w.lower() for w in NAME.findall(shown[:MAX_SHOWN])}
        self.words |= {part for w in list(self.words) for part in re.split(r"[-'’]", w) if part}
        # what it states in figures (a number spelled out, "thirty countries", states only where its passage
        # speaks of the statement: a figure found nowhere else, "£30m", is still invented)
        self.values = sorted(v for p in self.passages for f in p.figures for v in f.values)
        self.where = sorted((v, i) for i, p in enumerate(self.passages) for v in p.values)  # which passage holds what
        self.question_figures = figures(plain(question), None)

    def given(self, figure: Figure, hedge: bool) -> bool:
        """Whether the question gives ``figure``."""
        return any(figure.matches(v, hedge) for g in self.question_figures for v in g.values)

    def anywhere(self, figure: Figure, hedge: bool) -> bool:
        """Whether any passage holds ``figure`` (or the question gives it)."""
        return self.given(figure, hedge) or _among(figure, self.values, hedge)

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
            for r in figure.readings:
                at = bisect.bisect_left(self.where, (r.value - r.tolerance(False), -1))
                while at < len(self.where) and self.where[at][0] <= r.value + r.tolerance(False):
                    if len(seen) >= HOLDING * 2:
                        break
                    seen.add(self.where[at][1])
                    at += 1
            count.update(seen)
        return [i for i, _ in sorted(count.items(), key=lambda item: -item[1])][: HOLDING * 2]

    def known(self, name: str) -> bool:
        return named_in(name, self.words)


def _overlaps(sentence: Sentence, matched: list[Passage], cross: bool) -> dict[int, float]:
    """For each passage, the share of the statement's words it holds (1.0
    where words cannot tell: another language or script, or a table row or
    a line of figures with no words, whose table's header then speaks)."""
    wanted = _words(sentence.bare) or _words(sentence.context if sentence.row else "")
    mine = is_cjk(sentence.bare)
    out = {}
    for p in matched:
        if cross or mine != p.cjk or not wanted:
            out[id(p)] = 1.0
        else:
            out[id(p)] = len(wanted & p.terms) / len(wanted)
    return out


def classify(
    sentence: Sentence, material: Material, cross: bool, trusted: list[tuple[float, bool]] | None = None
) -> Statement:
    """How ``sentence`` is supported by ``material``; ``cross``: the report
    is in another language than the material (its words cannot match);
    ``trusted``: (value, whether a percentage) of the figures the report
    stated or derived before it, the latest first."""
    text = " ".join(sentence.text.split())
    hedge = hedged(sentence.bare)
    if lacks(sentence.bare) and not _unfound(sentence, material, hedge):
        return Statement(text=text, support="absent")
    # in another language, a word the material lacks is a translation, not a name
    unknown = [] if cross else [n for n in sentence.names if not material.known(n)]
    matched = material.matching(sentence)
    overlap = _overlaps(sentence, matched, cross)
    factors = constants(sentence.bare)  # "365 days a year" needs no source
    figs = [f for f in sentence.figures if not material.given(f, hedge) and not any(f.matches(k) for k in factors)]
    holders = {i: [p for p in matched if p.holds(f, hedge)] for i, f in enumerate(figs)}
    lacking = [f for i, f in enumerate(figs) if not holders[i]]
    best = max(matched, key=lambda p: (sum(p.holds(f, hedge) for f in figs), overlap[id(p)]), default=None)
    if best is None or unknown:
        return _unsupported(text, figs, unknown, material, hedge)
    held = sum(1 for f in figs if best.holds(f, hedge) and not _year(f))
    needed = STATED_WORDS_ONLY if not figs else STATED_WORDS if held < 2 else FIGURES_WORDS
    local = _local(sentence, best, figs, hedge, overlap[id(best)])  # its words where its figures stand
    # its words in its best passage; with figures, enough of them near it (a sentence joins a few), or
    # hardly any words to tell by ("Answer: about 41.3 %.")
    words = local >= needed or (
        bool(figs)
        and (len(_words(sentence.bare)) <= 2 or (local >= FIGURES_WORDS and _near(sentence, matched) >= NEAR_WORDS))
    )
    if not lacking and words and (figs or sentence.names or not cross):
        return Statement(text=text, support="stated", url=best.url, passage=shown(best))
    # not stated: a figure its passages spell out only ("eleven farmers", 11) may still be computed
    lacking += [f for i, f in enumerate(figs) if holders[i] and all(p.spelled_only(f, hedge) for p in holders[i])]
    # a passage that holds one of its figures (not a year, not a count) speaks of what it speaks of
    holding = any(holders[i] for i, f in enumerate(figs) if not _year(f) and not f.small)
    if lacking and (holding or _speaks_of(sentence, matched, cross)):
        derived = derive(
            bare=sentence.bare,
            context=sentence.context,
            writing=sentence.writing,
            lacking=lacking,
            held=[(f, holders[i]) for i, f in enumerate(figs)],
            matched=matched,
            question=material.question_figures,
            trusted=trusted or [],
            hedge=hedge,
        )
        if derived is not None:
            basis, arithmetic = derived
            return Statement(text=text, support="derived", basis=basis, arithmetic=arithmetic)
    return _unsupported(text, figs, unknown, material, hedge)


def _unfound(sentence: Sentence, material: Material, hedge: bool) -> bool:
    """Whether a statement carries a figure (not a year: the one asked
    about, that the material lacks) found nowhere in the material: "the
    cost is not reported, though the institute spent £312,000" says more
    than what the material lacks, and is judged as any statement."""
    factors = constants(sentence.bare)
    return any(
        not f.year and not material.anywhere(f, hedge) and not any(f.matches(k) for k in factors)
        for f in sentence.figures
    )


def _local(sentence: Sentence, passage: Passage, figs: list[Figure], hedge: bool, overlap: float) -> float:
    """The share of the statement's words that the sentences of ``passage``
    holding its figures (with the passage's title) hold; ``overlap`` (the
    whole passage's) where words cannot tell or it has no figures."""
    wanted = _words(sentence.bare)
    if not figs or not wanted or overlap == 1.0:
        return overlap
    near = set().union(*(passage.around(f, hedge) or set() for f in figs))
    return len(wanted & near) / len(wanted)


def _speaks_of(sentence: Sentence, matched: list[Passage], cross: bool) -> bool:
    """Whether a passage it matched speaks of what it (with the sentence
    before it, or its table's header) speaks of: a word in common (or a
    language whose words cannot match)."""
    if cross or not matched:
        return bool(matched)
    wanted = _words(f"{sentence.bare} {sentence.context}")
    mine = is_cjk(sentence.bare)
    return not wanted or any(mine != p.cjk or wanted & p.terms for p in matched)


def _near(sentence: Sentence, matched: list[Passage]) -> float:
    """The share of the statement's words that its matched passages hold
    together."""
    wanted = _words(sentence.bare)
    return len(wanted & set().union(*(p.terms for p in matched))) / len(wanted) if wanted and matched else 0.0


def _unsupported(text: str, figs: list[Figure], unknown: list[str], material: Material, hedge: bool) -> Statement:
    """Unsupported; invented when one of its figures ``figs`` (not derived)
    is found nowhere in the material's figures (a number only spelled out
    somewhere, "thirty countries", does not clear "£30m"), or it carries a
    name the material never uses."""
    invented = bool(unknown) or any(not material.anywhere(f, hedge) for f in figs)
    return Statement(text=text, support="unsupported", invented=invented)


def _prose(report: str) -> str:
    """The report's lines but those with a link or an address (its sources'
    titles are in their language): what tells the language it is written
    in. The whole of it, not only its statements: three short sentences may
    hold too few function words to tell."""
    return "\n".join(line for line in report[:MAX_SHOWN].split("\n") if "](" not in line and "://" not in line)


def _year(figure: Figure) -> bool:
    v = figure.values[0]
    return v.is_integer() and 1800 <= v <= 2100


def support_of(report: str, shown: str, question: str = "") -> tuple[SupportCounts | None, list[Statement]]:
    """Each statement of ``report`` with its support by ``shown``, and their
    counts (None when it states nothing)."""
    said = statements_of(report, question, convention(shown[:MAX_SHOWN]))
    if not said:
        return None, []
    material = Material(shown, question)
    cross = not same_language(_prose(report) or " ".join(s.bare for s in said), shown[:MAX_SHOWN])
    trusted: list[tuple[float, bool]] = []  # the report's figures stated or derived so far, the latest first
    out = []
    for sentence in said:
        statement = classify(sentence, material, cross, trusted[:TRUSTED])
        if statement.support in ("stated", "derived"):
            trusted[:0] = [(f.values[0], f.percent) for f in sentence.figures if not _year(f)]
        out.append(statement)
    counts = SupportCounts()
    for s in out:
        setattr(counts, s.support, getattr(counts, s.support) + 1)
        counts.invented += s.invented
    return counts, out
