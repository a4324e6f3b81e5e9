"""Whether a statement its material seems to hold says what the material
says of the same period and status: a figure given for another year, the
provisional figure called final, and "not given" for what a page gives
(``activities/support.py`` asks, of statements it would otherwise call
stated or absent).

A writer who misattaches a figure writes one the material holds, for the
wrong year or status: "1,241,900 t in 2020" where the table gives
1,241,900 t for 2021 and 1,284,600 t for 2020; "the audited leakage was
41.2 Ml/d" where 41.2 is the provisional figure and the audited one 42.7.
Every figure is in the material, so words and figures alone call it
stated. A figure is *tied* where the material says what it is given for:
a table cell to its row's label's and its column's header's periods and
to the status (``statuses``: provisional or final) its row's cells of
words or its header name; a sentence's figure to the one period the
sentence names, and to the one status a word within ``STATUS_WORDS`` words
of it names. A statement is misattached when:

- it names one period (or one status) and carries one figure of three
  significant digits or more (not a year): the figure is the period's, as
  the statement reads;
- the material ties that figure to other periods only, at every place
  that holds it (for a status: to the other status somewhere, and to its
  own nowhere);
- a sentence or row of its matched passages sharing ``SAME_WORDS`` of its
  words (of a row's few words, as many) and naming its names ties a figure
  of the same kind (a percentage for a percentage) within ``NEAR`` of it
  to the statement's period or status, not the same figure rounded.

A statement that the material lacks something is refuted when a sentence
or row of its matched passages that does not itself say something is
lacking names each of its periods and its names, shares ``ABSENT_WORDS``
of its words (those of saying something is lacking left out), gives a
figure (of the status it names, if one) and not the statement's own: "the
sources do not report the 2020 emissions" over a table row "| 2020 |
1.284,6 kt |". A statement that sources disagree ("no one agreed figure")
is no claim of absence. A figure tied to nothing, or to several periods
at once, is never judged: the check says nothing rather than guess.

Measured on the held-out suites' faithful reports and the strong fixtures
(none is marked) and on their invented ones: docs/eval.md,
``tests/test_attachment.py``. Bounded: periods and statuses are read by
patterns with no nested repetition, each passage's units once, a figure's
places found by bisection over the material's sorted figures (at most
``MAX_PLACES`` passages).
"""

from __future__ import annotations

import bisect
import re

from activities import reading
from activities.contradiction import Contradiction
from activities.figures import Figure, placed_figures, plain
from activities.material import _WORD, STEM, Material, Passage, _read, spans, stems, words_of
from activities.statement_text import Sentence, lacks, sentences
from activities.statement_text import names as names_in

SAME_WORDS = 0.5  # of the statement's words, the unit tying another figure to its period holds
NEAR = 0.2  # at most this far apart (relative): the same quantity of another period
MIN_DIGITS = 3  # significant digits of the statement's figure
ABSENT_WORDS = 0.6  # of an absence's words, the unit giving what it says is lacking holds
MIN_ABSENT_WORDS = 3  # an absence of fewer words tells too little to look for
MAX_TABLES = 48  # passages with a table an absence's row-and-column answer is looked for in, beyond its matched ones
MAX_PLACES = 24  # passages holding one figure looked at; a figure held more widely is left unjudged

Period = tuple[int, int]  # a year (2023, 2023) or a season or fiscal year (2022, 2023)
_PERIOD = re.compile(r"(?<![\d.,])((?:19|20)\d\d)(?:\s?[/–-]\s?((?:19|20)?\d\d)(?![-/.,]?\d))?(?![.,]?\d)")
# Words that make "not one agreed figure" a claim that sources disagree, not that they are silent.
_DISAGREE = {"agreed", "single", "one", "consistent", "unique", "same", "uniform"}
# Words that make "the Trust says it does not know the value" what someone said, not a claim about the material.
_ATTRIBUTED = {"says", "said", "told", "according", "know", "knows", "knew"}
# Words of a unit saying something is still to come ("results … are expected in the third quarter"): it gives
# no figure of it, whatever figures it holds ("ASTERION-4, of approximately 980 patients").
_PENDING = {
    "expected", "expects", "awaited", "pending", "upcoming", "forthcoming", "will", "scheduled", "due", "later",
    "prevista", "previsto", "previstas", "previstos", "prévu", "prévue", "prévus", "prévues", "attendu", "attendus",
    "erwartet", "erwarten", "geplant", "planned", "previsti", "attesi", "atteso", "verwacht",
}  # fmt: skip
# A name with its number ("ASTERION-4"): a unit of "ASTERION-3" does not speak of it.
_NUMBERED = re.compile(r"\b[A-Z][^\W\d_]{1,39}[-\u2011]\d{1,3}\b")
# Words of saying that something is lacking: not what it says is lacking.
_LACK_WORDS = words_of(
    "document documents source sources material page pages given give gives provide provides provided report "
    "reports reported state states stated mention mentions mentioned available contain contains include "
    "includes figure figures exact only no not any none therefore cannot calculate calculated possible "
    "determine determined say says disclose disclosed publish published specify specified identify identified name names named also "
    "amount amounts number numbers quantity value values however moreover thus so but yet still even "
    # the same in the other languages reports are written in, with their function words: in "los documentos no
    # indican la cantidad exacta de aceituna", only "cantidad", "aceituna" and "entregada" say what is lacking
    "documento documentos fuente fuentes cifra cifras exacta exacto indica indican recoge recogen dan da cantidad "
    "disponible disponibles ninguna ninguno sólo solo los las la el de del en y que por para con una un "
    "donnent donne indiquent indique chiffre chiffres exact exacte sources disponibles aucun aucune seul seule nombre "
    "seulement les le du des et pour ne pas est sont une "
    "dokumente dokumenten quellen angabe angaben zahl zahlen genaue genau enthalten enthält nennen nennt nicht "
    "keine kein nur vorliegenden unterlagen der die das den dem des und für zu von im ist sind eine ein anzahl "
    "documenti fonti dato dati indicano esatto esatta il lo gli non nessun nessuna solo di per che "
    "documenten bronnen geven geeft vermelden niet geen alleen het een van voor"
)

Tie = tuple[set[Period], set[str]]  # the periods and the status ("final", "provisional") a figure is given for
Unit = tuple[str, set[Period], list[tuple[Figure, Tie]], set[str]]  # text, periods it names, figures, stems
_TOKEN = re.compile(r"\S+")
STATUS_WORDS = 5  # a status word this many words from a figure of a sentence speaks of it
# Words calling a figure provisional or final (their beginnings), in the languages of the suites' pages.
_PROVISIONAL = (
    "provisiona", "provisoir", "provvisori", "prelimin", "prélimin", "unaudit", "unverif", "vorläufig",
    "vorlaeufig", "avance",
)  # fmt: skip
_FINAL = ("audited", "verified", "definitiv", "définiti", "endgültig", "endgueltig", "geprüft", "testiert", "auditad")
_FINAL_WORDS = {"final", "finale", "finales", "finali", "finaux"}


def periods(text: str) -> set[Period]:
    """The years and seasons ``text`` names: "2023", "2022/23", "2020/2021",
    "FY2024" (a span of one year; a longer one is its two years)."""
    out: set[Period] = set()
    for found in _PERIOD.finditer(text):
        start = int(found.group(1))
        end = found.group(2)
        stop = (int(end) if len(end) == 4 else start // 100 * 100 + int(end)) if end else start
        if stop == start + 1:
            out.add((start, stop))  # a season or a fiscal year
            continue
        out.add((start, start))
        if stop > start:
            out.add((stop, stop))  # a span of years: its ends
    return out


def agree(mine: set[Period], theirs: set[Period]) -> bool:
    """Whether a period of ``mine`` is one of ``theirs`` (a year is in the
    season it starts or ends)."""
    for a in mine:
        for b in theirs:
            if a == b or (a[0] == a[1] and b[0] != b[1] and a[0] in b) or (b[0] == b[1] and a[0] != a[1] and b[0] in a):
                return True
    return False


def statuses(text: str) -> set[str]:
    """Whether ``text`` calls its figures provisional or final ("audited",
    "endgültig", "provisoire"): the classes it names."""
    out = set()
    for word in _WORD.findall(text.lower()):
        if word.startswith(_PROVISIONAL):
            out.add("provisional")
        elif word.startswith(_FINAL) or word in _FINAL_WORDS:
            out.add("final")
    return out


def units(passage: Passage) -> list[Unit]:
    """Each sentence and table row of ``passage``, with the periods it
    names and each figure with what it is tied to (``Tie``: a cell, to its
    row's label's and its column's header's periods and to the status its
    row's cells of words or its header name, the header being the row
    above a rule row; a sentence's figures, to its period and its status
    when it names one only), read once."""
    if passage.attached is not None:
        return passage.attached
    out: list[Unit] = []
    lines = passage.text.split("\n")
    header: list[str] = []
    for n, line in enumerate(lines):
        if not line.lstrip().startswith("|"):
            header = []
            for unit in sentences(line):
                text = plain(unit)
                named = periods(text)
                figs = _prose_figures(text, named if len(named) == 1 else set(), passage.writing)
                out.append((unit, named, figs, stems(reading.terms(text))))
            continue
        cells = line.strip().strip("|").split("|")
        if set(line.strip()) <= set("|-: "):
            continue
        if n + 1 < len(lines) and set(lines[n + 1].strip()) <= set("|-: ") and "-" in lines[n + 1]:
            header = cells
            continue
        out.append(_row(line, cells, header, passage.writing))
    passage.attached = out
    return out


def _prose_figures(text: str, period: set[Period], writing: str | None) -> list[tuple[Figure, Tie]]:
    """A sentence's figures (not years), each tied to ``period`` and to the
    status a word within ``STATUS_WORDS`` words of it names ("the audited PPM
    for 2023 was 89.7 %"), when one class only: "estimates 13,000 t, though
    the final figure is not yet known" ties 13,000 to nothing."""
    spans = [(m.start(), m.end()) for m in _TOKEN.finditer(text)]
    starts = [a for a, _ in spans]
    said = [(n, statuses(text[a:b])) for n, (a, b) in enumerate(spans)]
    said = [(n, found) for n, found in said if found]
    out = []
    placed = set()
    for start, _, figure in placed_figures(text, writing):
        if figure.year:
            continue
        at = max(bisect.bisect_right(starts, start) - 1, 0)
        near = set().union(*(found for n, found in said if abs(n - at) <= STATUS_WORDS))
        out.append((figure, (period, near if len(near) == 1 else set())))
        placed.add(figure.text)
    # numbers grouped by spaces or spelled out: tied to the period only
    out += [(f, (period, set())) for f in _read(text, writing) if not f.year and f.text not in placed]
    return out


def _row(line: str, cells: list[str], header: list[str], writing: str | None) -> Unit:
    label = periods(plain(cells[0]))
    worded = set().union(*(statuses(c) for c in cells if not _read(plain(c), writing)))
    figs = []
    for i, cell in enumerate(cells[1:], start=1):
        column = plain(header[i]) if i < len(header) else ""
        status = worded | statuses(column)
        tie = (label | periods(column), status if len(status) == 1 else set())
        figs += [(f, tie) for f in _read(plain(cell), writing) if not f.year]
    named = label | {p for _, tie in figs for p in tie[0]}
    return line, named, figs, stems(reading.terms(plain(f"{line} {' '.join(header)}")))


def misattached(sentence: Sentence, matched: list[Passage], material: Material, hedge: bool) -> Contradiction | None:
    """The figure its matched passages tie to the statement's period (or
    to its status: final, provisional), where the statement gives it a
    figure the material ties to others only (see the module's note); None
    when it cannot tell."""
    figs = [f for f in sentence.figures if not f.year and f.digits >= MIN_DIGITS]
    if len(figs) != 1:
        return None
    figure = figs[0]
    text = plain(sentence.bare)
    mine: Tie = (periods(text), statuses(text))
    places = None
    for side in (0, 1):
        if len(mine[side]) != 1:
            continue
        places = _places(figure, material, hedge) if places is None else places
        places = places or []
        tied = [tie[side] for tie in places if tie[side]]
        if not tied or any(_agree(side, mine[side], there) for there in tied):
            continue  # the material ties it to the statement's own, or to nothing
        if side == 0 and len(tied) < len(places):
            continue  # a place names no period for it, or several: it may be the statement's
        found = _other(sentence, figure, mine, side, matched, hedge)
        if found is not None:
            return found
    return None


def _other(
    sentence: Sentence, figure: Figure, mine: Tie, side: int, matched: list[Passage], hedge: bool
) -> Contradiction | None:
    """A figure of ``figure``'s kind near it that a unit of ``matched``
    sharing the statement's words ties to the statement's period
    (``side`` 0) or status (1), and not to another period."""
    wanted = words_of(f"{sentence.bare} {sentence.context.split(chr(10))[0] if sentence.row else ''}")
    if not wanted:
        return None
    names = {n[:STEM] for n in sentence.names}  # the things it speaks of
    for passage in matched:
        for text, _, figs_there, terms in units(passage):
            words = {t for t in terms if not any(c.isdigit() for c in t)}
            if not names <= words:
                continue  # another thing's figure: its names are not the statement's
            # a row's few words (its label, its header) against as many of the statement's
            if len(wanted & words) < SAME_WORDS * (
                min(len(wanted), len(words)) if text.startswith("|") else len(wanted)
            ):
                continue
            for other, tie in figs_there:
                if len(tie[side]) != 1 or not _agree(side, mine[side], tie[side]) or not _another(figure, other, hedge):
                    continue
                if side == 1 and mine[0] and tie[0] and not agree(mine[0], tie[0]):
                    continue  # another year's final figure
                (what,) = tie[side]
                said = f"{other.text} for {_when(what)}" if side == 0 else f"{other.text} ({what})"
                return Contradiction(figure.text, said, passage.url, _short(text))
    return None


def _agree(side: int, mine: set, theirs: set) -> bool:
    return agree(mine, theirs) if side == 0 else bool(mine & theirs)


def _when(period: Period) -> str:
    return str(period[0]) if period[0] == period[1] else f"{period[0]}/{str(period[1])[2:]}"


def refuted_absence(sentence: Sentence, matched: list[Passage], material: Material) -> Contradiction | None:
    """A sentence or row of its matched passages giving what the statement
    says the material lacks (see the module's note), else None."""
    wanted = words_of(sentence.bare) - _LACK_WORDS
    mine, status = periods(plain(sentence.bare)), statuses(plain(sentence.bare))
    if set(_WORD.findall(sentence.bare.lower())) & (_DISAGREE | _ATTRIBUTED):
        return None
    # a row's label and a column's header tell what is lacking ("the release manager of 3.0.0"); else a
    # period tells it as a word does ("an audited leakage figure for 2022/23")
    found = _cell_answer(sentence, wanted, matched + _tables(material, matched, wanted))
    if found is not None or len(wanted) + bool(mine) < MIN_ABSENT_WORDS:
        return found
    # its names, the question's among them: "ORCHID-2" names the trial the question asks of
    names = [n for n in dict.fromkeys(sentence.names + names_in(sentence.bare)) if material.known(n)]
    if not mine and not names:
        return None
    # its own figures, not those the question gives it ("of patients on 80 mg who reached PASI 75")
    own = {v for f in sentence.figures if not f.year and f.digits >= 2 for v in f.values if v not in sentence.asked}
    # what it says is lacking beyond the question's subject ("… who had side effects"): the unit must speak of it
    beyond = wanted - stems(list(sentence.topic))
    numbered = {m.group(0).lower().replace("\u2011", "-") for m in _NUMBERED.finditer(sentence.bare)}
    for passage in (p for p in matched if _names_numbered(numbered, p.text)):
        for text, named, figs, terms in units(passage):
            if not text.lstrip().startswith("|") and not _names_numbered(numbered, text):
                continue  # a sentence of ASTERION-3 beside one of ASTERION-4 (a row's header may name it)
            if any(f.matches(v) for f, _ in figs for v in own):
                continue  # it gives the statement's own figure: the statement's source, not its refutation
            given = [
                f
                for f, tie in figs
                if f.digits >= 2 and not any(v in own for v in f.values) and (len(status) != 1 or status & tie[1])
            ]
            if (
                not given
                or lacks(text)
                or _PENDING & set(_WORD.findall(text.lower()))
                or (mine and not agree(mine, named))
            ):
                continue
            # a row names what its header names ("| 2021 | 528.730 | 405.830 |" under "| Año | … | Ferris Mareta |")
            if any(not words_of(n) <= terms for n in names) or len(wanted & terms) < ABSENT_WORDS * len(wanted):
                continue
            if len(beyond & terms) < ABSENT_WORDS * len(beyond):
                continue
            return Contradiction("", ", ".join(f.text for f in given[:3]), passage.url, _short(text))
    return None


def _cell_answer(sentence: Sentence, wanted: set[str], matched: list[Passage]) -> Contradiction | None:
    """A table row the absence names by its label ("3.0.0", "2021", "Dunmere"),
    with a value under a column its words name: "the documents do not
    identify the release manager of 3.0.0" over "| 3.0.0 | 2021-03-03 |
    Mei-Lin Zhou |" under "| Release | Release date | Release manager |".
    Every word of what it says is lacking beyond the question's subject
    must be the column's or the label's ("the signing key of 3.0.0's
    release manager" is not answered by the manager's name)."""
    low = sentence.bare.lower()
    beyond = wanted - stems(list(sentence.topic))
    for passage in matched:
        header: list[str] = []
        lines = passage.text.split("\n")
        source: set[str] = set()
        for n, line in enumerate(lines):
            if not line.lstrip().startswith("|"):
                # the page's title, as "Table from [Release team](…):" gives it: the statement's name of its source
                header, source = [], words_of(line[line.find("[") + 1 : line.find("](")]) if "](" in line else set()
                continue
            if set(line.strip()) <= set("|-: "):
                continue
            cells = [plain(c).strip() for c in line.strip().strip("|").split("|")]
            if n + 1 < len(lines) and set(lines[n + 1].strip()) <= set("|-: ") and "-" in lines[n + 1]:
                header = cells  # the row above a rule row heads the table
                continue
            label = cells[0]
            if not _names_label(label, low):
                continue
            for head, cell in zip(header[1:], cells[1:]):
                named = words_of(head) - _LACK_WORDS  # "| Name |" asks what "does not name" lacks
                rest = beyond - named - words_of(label) - source
                if named and named <= wanted and not rest and _a_value(cell, passage.writing):
                    return Contradiction("", _short(cell, 80), passage.url, _short(line))
    return None


def _tables(material: Material, matched: list[Passage], wanted: set[str]) -> list[Passage]:
    """Passages with a table speaking of what an absence says is lacking,
    beyond those it matched (a page's table is one passage among many
    repeating its words): at most ``MAX_TABLES``."""
    seen = {id(p) for p in matched}
    found = (
        p for p in material.passages if id(p) not in seen and wanted & p.terms and ("\n" + p.text).find("\n|") >= 0
    )
    return [p for _, p in zip(range(MAX_TABLES), found)]


def _names_label(label: str, low: str) -> bool:
    """Whether a statement (lower-cased) names a row's label as a whole
    word: one with a digit or a capital ("3.0.0", "2020", "Dunmere")."""
    if not label or len(label) > 60 or not any(c.isdigit() or c.isupper() for c in label):
        return False
    at, size = low.find(label.lower()), len(label)
    while at >= 0:
        before, after = low[at - 1 : at] if at else "", low[at + size : at + size + 1]
        if not (before.isalnum() or after.isalnum()):
            return True
        at = low.find(label.lower(), at + 1)
    return False


# cells that give nothing: a dash, "not available" as tables abbreviate it (English, German "k. A.", French "n.c.")
_NO_VALUE = {"", "-", "–", "—", "?", "x", "no", "none", "nil", "tbd", "tbc", "unknown"} | {
    a + b for a in ("n/", "n.", "n", "k.", "k", "s.", "s") for b in ("a", "d", "c", " a", " d", " c", "v", " v")
}


def _a_value(cell: str, writing: str | None) -> bool:
    """Whether a table cell gives something in words or dates: not empty,
    not a dash, not a "not stated", not a value still to come ("2024-10-21
    (planned)"); a cell's figures are the figure rule's, above."""
    low = cell.lower().strip(" .*")
    return (
        low not in _NO_VALUE
        and not any(not f.year for f in _read(cell, writing))
        and any(c.isalnum() for c in low)
        and not lacks(cell)
        and not (_PENDING & set(_WORD.findall(low)))
    )


def _names_numbered(numbered: set[str], text: str) -> bool:
    """Whether ``text`` names each numbered name of an absence as it is
    numbered: "ASTERION-4" is not named by a sentence of ASTERION-3."""
    if not numbered:
        return True
    text = text.lower().replace("\u2011", "-")
    return all(n in text for n in numbered)


def _places(figure: Figure, material: Material, hedge: bool) -> list[Tie] | None:
    """What each place of the material holding ``figure`` ties it to; None
    when it is held in more than ``MAX_PLACES`` passages."""
    found: set[int] = set()
    for low, high in spans(figure, hedge)[: len(figure.readings)]:  # as written: no other scale
        at = bisect.bisect_left(material.where, (low, -1))
        while at < len(material.where) and material.where[at][0] <= high:
            found.add(material.where[at][1])
            if len(found) > MAX_PLACES:
                return None
            at += 1
    out = []
    for i in sorted(found):
        for _, _, figs, _ in units(material.passages[i]):
            out += [tie for f, tie in figs if any(figure.matches(v, hedge) for v in f.values)]
    return out


def _another(figure: Figure, other: Figure, hedge: bool) -> bool:
    """Whether ``other`` is a figure of ``figure``'s kind near it, not the
    same figure rounded either way ("quasi 53.000" is 52.900)."""
    if other.percent != figure.percent or other.year:
        return False
    if any(other.matches(v, hedge) for v in figure.values) or any(figure.matches(v, hedge) for v in other.values):
        return False
    a, b = figure.readings[0], other.values[0]
    if abs(a.value - b) <= a.coarse / 2:
        return False
    return bool(a.value and b) and (a.value > 0) == (b > 0) and abs(a.value - b) <= NEAR * max(abs(a.value), abs(b))


def _short(text: str, size: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 1] + "…"
