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
  from figures they state (``activities/figures.py``: differences, sums,
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
from activities.figures import Derivations, Figure, constants, convention, figures, hedged, plain, run_candidates
from activities.statement_text import LINKED, MAX_FIGURES, NAME, Sentence, lacks, statements_of
from workflows.support_models import Basis, Statement, SupportCounts

MAX_SHOWN = 600_000  # characters of what it was shown looked at
MAX_PASSAGE = 2_000  # characters of one passage of the material (longer ones are cut)
MATCHED = 5  # passages a statement is compared with
QUERY_TERMS = 12  # its rarest terms find them
CONTEXT_MATCHED = 3  # more passages found with its context
SHOWN_PASSAGE = 400  # characters of a passage kept with a statement
STATED_WORDS = 0.4  # words of a statement with figures a passage must share
STATED_WORDS_ONLY = 0.5  # without figures
DERIVED_WORDS = 0.15  # (and at least one word): a derived figure speaks of what its passage does
STEM = 6
_PARAGRAPH = re.compile(r"\n[ \t]*\n")


COMMON_WORDS = 50  # the commonest words of what a report was shown: its language's function words
MIN_COMMON_SHARE = 0.2  # a report with fewer of its words among them is in another language
_WORD = re.compile(r"[^\W\d_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _function_words(text: str) -> list[str]:
    """Lower-cased words, stop words kept; CJK text character by character."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
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
    values: list[float] = field(default_factory=list)  # of its figures, sorted
    _lines: list[tuple[set[str], list[Figure]]] | None = None
    _runs: list | None = None

    def __post_init__(self) -> None:
        self.values = sorted(v for f in self.figures for v in f.values)

    def lines(self) -> list[tuple[set[str], list[Figure]]]:
        """(terms, figures that are not counts) of each line, read once."""
        if self._lines is None:
            self._lines = [
                (set(reading.terms(line)), [f for f in figures(plain(line), self.writing) if not f.small])
                for line in self.text.split("\n")
            ]
        return self._lines

    def runs(self) -> list:
        """The sums and averages of its runs of figures (``run_candidates``
        of a table's columns, else of its figures that are not years), once."""
        if self._runs is None:
            self._runs = run_candidates(_sequences(self))
        return self._runs

    def holds(self, figure: Figure, hedge: bool) -> bool:
        """Whether one of its figures rounds to ``figure``."""
        return _among(figure, self.values, hedge)


def _among(figure: Figure, values: list[float], hedge: bool) -> bool:
    for r in figure.readings:
        tol = r.tolerance(hedge)
        at = bisect.bisect_left(values, r.value - tol)
        if at < len(values) and values[at] <= r.value + tol:
            return True
    return False


def _url_of(text: str) -> str:
    found = LINKED.search(text)
    return found.group(1) if found else ""


def passages_of(shown: str) -> list[Passage]:
    """What the writer was shown, as passages with their pages: paragraphs,
    a list cut into its items (a findings line names its page)."""
    out: list[Passage] = []
    for paragraph in _PARAGRAPH.split(shown[:MAX_SHOWN]):
        lines = [line for line in paragraph.strip().split("\n") if line.strip()]
        if not lines:
            continue
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
                out.append(Passage(text, _url_of(piece), figures(clean, writing), stems(reading.terms(clean)), writing))
    return out


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
        self.values = sorted(v for p in self.passages for v in p.values)
        self.question_figures = figures(plain(question), None)

    def anywhere(self, figure: Figure, hedge: bool) -> bool:
        """Whether any passage holds ``figure`` (or the question gives it)."""
        return _given(figure, self, hedge) or _among(figure, self.values, hedge)

    def matching(self, sentence: Sentence) -> list[Passage]:
        """The passages that match the statement best, then those that match
        it with its context (the sentence before, the table it is a row of)."""
        found = [i for _, i in self.index.scores(sentence.bare, QUERY_TERMS)[:MATCHED]]
        if sentence.context:
            more = self.index.scores(f"{sentence.bare} {sentence.context}", QUERY_TERMS)[:MATCHED]
            found += [i for _, i in more if i not in found][:CONTEXT_MATCHED]
        return [self.passages[i] for i in found]

    def known(self, name: str) -> bool:
        return name in self.words or all(p in self.words for p in re.split(r"[-'’]", name) if p)


def _given(figure: Figure, material: Material, hedge: bool) -> bool:
    return any(figure.matches(v, hedge) for g in material.question_figures for v in g.values)


def _shown(passage: Passage) -> str:
    text = " ".join(passage.text.split())
    return text if len(text) <= SHOWN_PASSAGE else text[: SHOWN_PASSAGE - 1] + "…"


def classify(sentence: Sentence, material: Material, cross: bool) -> Statement:
    """How ``sentence`` is supported by ``material``; ``cross``: the report
    is in another language than the material (its words cannot match)."""
    text = " ".join(sentence.text.split())
    if lacks(sentence.bare):
        return Statement(text=text, support="absent")
    hedge = hedged(sentence.bare)
    # in another language, a word the material lacks is a translation, not a name
    unknown = [] if cross else [n for n in sentence.names if not material.known(n)]
    matched = material.matching(sentence)
    wanted = _words(sentence.bare)
    overlap = {id(p): len(wanted & p.terms) / len(wanted) if wanted else 0.0 for p in matched}
    factors = constants(sentence.bare)  # "365 days a year" needs no source
    figs = [f for f in sentence.figures if not _given(f, material, hedge) and not any(f.matches(k) for k in factors)]
    holders = {i: [p for p in matched if p.holds(f, hedge)] for i, f in enumerate(figs)}
    lacking = [f for i, f in enumerate(figs) if not holders[i]]
    best = max(matched, key=lambda p: (sum(p.holds(f, hedge) for f in figs), overlap[id(p)]), default=None)
    words_ok = best is not None and (cross or overlap[id(best)] >= (STATED_WORDS if figs else STATED_WORDS_ONLY))
    if best is not None and not unknown and not lacking and words_ok and (figs or sentence.names or not cross):
        return Statement(text=text, support="stated", url=best.url, passage=_shown(best))
    if lacking and not unknown and best is not None and (cross or overlap[id(best)] >= DERIVED_WORDS):
        derived = _derived(sentence, lacking, figs, holders, matched, hedge)
        if derived is not None:
            basis, arithmetic = derived
            return Statement(text=text, support="derived", basis=basis, arithmetic=arithmetic)
    invented = bool(unknown) or any(not material.anywhere(f, hedge) for f in lacking)
    return Statement(text=text, support="unsupported", invented=invented)


def _derived(
    sentence: Sentence,
    lacking: list[Figure],
    figs: list[Figure],
    holders: dict[int, list[Passage]],
    matched: list[Passage],
    hedge: bool,
) -> tuple[list[Basis], str] | None:
    """The basis and arithmetic of each figure the passages lack, when every
    one follows from figures they state; else None. The pool: the figures of
    the statement the passages hold, then the passages' own, from the lines
    that share most with the statement."""
    own: list[tuple[float, bool]] = []
    origin: dict[float, Passage] = {}
    near = [f for f in figures(sentence.context, sentence.writing) if not f.small][:MAX_FIGURES]  # what it speaks of
    for f, held_by in [(f, holders[i][:1]) for i, f in enumerate(figs)] + [(f, matched) for f in near]:
        for p in held_by:
            found = next((g for g in p.figures if f.matches(g.values[0], hedge)), None)
            if found is not None:
                own.append((found.values[0], found.percent))
                origin.setdefault(found.values[0], p)
                break
    wanted = set(reading.terms(f"{sentence.bare} {sentence.context}"))
    pool, runs = list(own), []
    for p in matched[:3]:
        for g in _relevant_figures(p, wanted):
            pool.append((g.values[0], g.percent))
            origin.setdefault(g.values[0], p)
        runs.append(p.runs())
    percent = any(f.percent for f in lacking)
    found = Derivations(pool, runs, {v for v, _ in own}, percent=percent, units=sentence.bare)
    basis: list[Basis] = []
    steps: list[str] = []
    for f in lacking:
        d = found.find(f, hedge)
        if d is None:
            return None
        steps.append(d.how)
        for v in dict.fromkeys(d.uses):
            p = origin.get(v)
            basis.append(Basis(figure=f"{v:,.10g}", url=p.url if p else "", passage=_shown(p) if p else ""))
    return basis, "; ".join(steps)


def _relevant_figures(passage: Passage, wanted: set[str]) -> list[Figure]:
    """The passage's figures that are not counts, those of its lines that
    share most terms with ``wanted`` first."""
    lines = passage.lines()
    if len(lines) == 1:
        return lines[0][1]
    order = sorted(range(len(lines)), key=lambda n: -len(wanted & lines[n][0]))
    return [f for n in order for f in lines[n][1]]


def _sequences(passage: Passage) -> list[list[float]]:
    """The runs of figures whose sums and averages are tried: a table's
    columns, else the passage's figures that are not years, in order."""
    rows = [line for line in passage.text.split("\n") if line.strip().startswith("|")]
    if len(rows) >= 3:
        columns: dict[int, list[float]] = {}
        for row in rows:
            for n, cell in enumerate(row.strip().strip("|").split("|")):
                found = figures(plain(cell), passage.writing)
                if found and not found[0].small:
                    columns.setdefault(n, []).append(found[0].values[0])
        return [c for c in columns.values() if len(c) >= 3]
    values = [f.values[0] for f in passage.figures if not (f.values[0].is_integer() and 1800 <= f.values[0] <= 2100)]
    return [values] if len(values) >= 3 else []


def support_of(report: str, shown: str, question: str = "") -> tuple[SupportCounts | None, list[Statement]]:
    """Each statement of ``report`` with its support by ``shown``, and their
    counts (None when it states nothing)."""
    said = statements_of(report, question, convention(shown[:MAX_SHOWN]))
    if not said:
        return None, []
    material = Material(shown, question)
    cross = not same_language(" ".join(s.bare for s in said), shown[:MAX_SHOWN])
    out = [classify(s, material, cross) for s in said]
    counts = SupportCounts()
    for s in out:
        setattr(counts, s.support, getattr(counts, s.support) + 1)
        counts.invented += s.invented
    return counts, out
