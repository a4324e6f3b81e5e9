"""How each statement of a report is supported by what its writer was shown
(SPEC 3d): ``stated``, ``derived``, ``absent`` or ``unsupported``.

A statement is a sentence (or a table row) of the report that carries a
figure or a name beyond the question's own, or that says the material lacks
something. What the writer was shown (the request as sent but its system
prompt: findings, evidence passages after links to their pages, the
background search) and the pages the run read are cut into passages, each
with the page it comes from (``activities/material.py``).

- *stated*: the passages that match it best hold each of its figures (as
  written or rounded the way it is written) and its names, and share enough
  of its words (in another language than the material: its figures and
  names suffice);
- *derived*: each figure the passages lack follows by one step of arithmetic
  from figures they state (``activities/arithmetic.py``: differences, sums,
  ratios, shares and changes in per cent, compound rates, averages, unit
  conversions), within the rounding the statement uses;
- then, over the whole report (``restated``): the arithmetic it shows,
  checked as written (``activities/expressions.py``), a figure it derives
  elsewhere restated, a table's computed column from the figures stated
  around it;
- *absent*: it says the material does not give something;
- *unsupported*: none of these; *invented* when it carries a figure found
  nowhere in the material and not derived, or a name the material never
  uses.

Footnote markers, links and citation brackets are not figures. Bounded and
linear in the texts (which are cut first); the model activity runs it off
the event loop.
"""

from __future__ import annotations

from activities.attachment import misattached, refuted_absence
from activities.contradiction import Contradiction, contradiction
from activities.derivation import derive, shown
from activities.expressions import shown_arithmetic
from activities.figures import Figure, constants, convention, figures, hedged
from activities.material import (
    MAX_SHOWN,
    Material,
    Passage,
    is_cjk,
    language_of,
    same_language,
    translated,
    words_of,
)
from activities.statement_text import Sentence, lacks, person_names, statements_of
from workflows.support_models import Basis, Statement, SupportClass, SupportCounts

STATED_WORDS = 0.4  # words of a statement with figures a passage must share
STATED_WORDS_ONLY = 0.5  # without figures
FIGURES_WORDS = 0.2  # when the passage holds two of its figures (not years) or more
TRUSTED = 12  # of the report's own figures stated or derived before a statement, what it may compute from
NEAR_WORDS = 0.6  # of its words, in its matched passages together


def _overlaps(sentence: Sentence, matched: list[Passage], cross: bool, material: Material) -> dict[int, float]:
    """For each passage, the share of the statement's words it holds (1.0
    where words cannot tell: another language or script, the report's or
    the passage's, or a table row or a line of figures with no words, whose
    table's header then speaks)."""
    wanted = words_of(sentence.bare) or words_of(sentence.context if sentence.row else "")
    mine = is_cjk(sentence.bare)
    out = {}
    for p in matched:
        if cross or mine != p.cjk or not wanted or material.foreign(p):
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
        found = refuted_absence(sentence, material.matching(sentence), material)
        return Statement(text=text, support="absent") if found is None else _contradicted(text, found, False, "absent")
    # in another language, a word the material lacks is a translation, not a name
    # in another language, a word the material lacks is a translation, not a name ("Mouette", "Linlan"); over
    # material it translates in part, a common word is known (``Material.known``)
    people = set(person_names(sentence.bare))
    unknown = [] if cross else [n for n in sentence.names if not material.known(n, n in people)]
    matched = material.matching(sentence)
    overlap = _overlaps(sentence, matched, cross, material)
    factors = constants(sentence.bare)  # "365 days a year" needs no source
    figs = [f for f in sentence.figures if not material.given(f, hedge) and not any(f.matches(k) for k in factors)]
    holders = {i: [p for p in matched if p.holds(f, hedge)] for i, f in enumerate(figs)}
    lacking = [f for i, f in enumerate(figs) if not any(p.writes(f, hedge) for p in holders[i])]
    best = max(matched, key=lambda p: (sum(p.holds(f, hedge) for f in figs), overlap[id(p)]), default=None)
    if best is None or unknown:
        return _unsupported(text, sentence, matched, figs, unknown, material, hedge)
    held = sum(1 for f in figs if best.holds(f, hedge) and not _year(f))
    needed = STATED_WORDS_ONLY if not figs else STATED_WORDS if held < 2 else FIGURES_WORDS
    local = _local(sentence, best, figs, hedge, overlap[id(best)])  # its words where its figures stand
    # its words in its best passage; with figures, enough of them near it (a sentence joins a few), or
    # hardly any words to tell by ("Answer: about 41.3 %.")
    words = local >= needed or (
        bool(figs)
        and (len(words_of(sentence.bare)) <= 2 or (local >= FIGURES_WORDS and _near(sentence, matched) >= NEAR_WORDS))
    )
    if not lacking and words and (figs or sentence.names or not cross):
        found = misattached(sentence, matched, material, hedge)
        if found is not None:  # its figure is another period's
            return _contradicted(text, found, False)
        return Statement(text=text, support="stated", url=best.url, passage=shown(best))
    # not stated: a figure its passages spell out only ("eleven farmers", 11) may still be computed
    lacking += [
        f
        for i, f in enumerate(figs)
        if f not in lacking and holders[i] and all(p.spelled_only(f, hedge) for p in holders[i])
    ]
    # a passage that holds one of its figures (not a year, not a count) speaks of what it speaks of
    holding = any(holders[i] for i, f in enumerate(figs) if not _year(f) and not f.small)
    # one that speaks of none of its passages computes from its own figures, the question's and the
    # report's earlier ones only ("| 2020/21 → 2021/22 | −4.450 t |" under a table's "| Paso | Variación |")
    speaks = holding or _speaks_of(sentence, matched, cross, material)
    if lacking:
        derived = derive(
            bare=sentence.bare,
            context=sentence.context,
            writing=sentence.writing,
            lacking=lacking,
            held=[(f, holders[i]) for i, f in enumerate(figs)],
            matched=matched if speaks else [],
            question=material.question_figures,
            trusted=trusted or [],
            hedge=hedge,
        )
        if derived is not None:
            basis, arithmetic = derived
            return Statement(text=text, support="derived", basis=basis, arithmetic=arithmetic)
    return _unsupported(text, sentence, matched, figs, unknown, material, hedge)


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
    wanted = words_of(sentence.bare)
    if not figs or not wanted or overlap == 1.0:
        return overlap
    near = set().union(*(passage.around(f, hedge) or set() for f in figs))
    return len(wanted & near) / len(wanted)


def _speaks_of(sentence: Sentence, matched: list[Passage], cross: bool, material: Material) -> bool:
    """Whether a passage it matched speaks of what it (with the sentence
    before it, or its table's header) speaks of: a word in common (or a
    language whose words cannot match)."""
    if cross or not matched:
        return bool(matched)
    wanted = words_of(f"{sentence.bare} {sentence.context}")
    mine = is_cjk(sentence.bare)
    return not wanted or any(mine != p.cjk or material.foreign(p) or wanted & p.terms for p in matched)


def _near(sentence: Sentence, matched: list[Passage]) -> float:
    """The share of the statement's words that its matched passages hold
    together."""
    wanted = words_of(sentence.bare)
    return len(wanted & set().union(*(p.terms for p in matched))) / len(wanted) if wanted and matched else 0.0


def _unsupported(
    text: str,
    sentence: Sentence,
    matched: list[Passage],
    figs: list[Figure],
    unknown: list[str],
    material: Material,
    hedge: bool,
) -> Statement:
    """Unsupported; invented when one of its figures (not derived, not the
    question's) is found nowhere in the material's figures (a number only
    spelled out somewhere, "thirty countries", does not clear "£30m"), or it
    carries a name the material never uses; and when a passage saying the
    same thing gives a figure a little apart from its own, that passage and
    figure (``activities/contradiction.py``); when none is, and a figure of
    it is another period's, the passage giving the period's
    (``activities/attachment.py``)."""
    invented = bool(unknown) or any(not material.anywhere(f, hedge) for f in figs)
    if not invented:  # each of its figures is in the material: perhaps given for another period
        found = misattached(sentence, matched, material, hedge)
        return Statement(text=text, support="unsupported") if found is None else _contradicted(text, found, False)
    found = contradiction(sentence, figs, matched, material, hedge)
    if found is None:
        return Statement(text=text, support="unsupported", invented=True)
    return _contradicted(text, found, True)


def _contradicted(text: str, found: Contradiction, invented: bool, support: SupportClass = "unsupported") -> Statement:
    """With the passage that says otherwise: unsupported, a near miss of its
    figure (invented) or its figure another period's (not invented: it is
    in the material); absent, what it says is lacking, that a page gives."""
    return Statement(
        text=text,
        support=support,
        invented=invented,
        url=found.url,
        passage=found.passage,
        contradicts=found.given,
    )


def _prose(report: str) -> str:
    """The report's lines but those with a link or an address (its sources'
    titles are in their language): what tells the language it is written
    in. The whole of it, not only its statements: three short sentences may
    hold too few function words to tell."""
    return "\n".join(line for line in report[:MAX_SHOWN].split("\n") if "](" not in line and "://" not in line)


def _year(figure: Figure) -> bool:
    v = figure.values[0]
    return v.is_integer() and 1800 <= v <= 2100


def support_of(
    report: str, shown: str, question: str = "", pages: list[tuple[str, str, str]] = ()
) -> tuple[SupportCounts | None, list[Statement]]:
    """Each statement of ``report`` with its support by ``shown`` and the
    ``pages`` the run read ((url, title, text): a statement a page states
    is stated, though no passage shown held it), and their counts (None
    when it states nothing)."""
    said = statements_of(report, question, convention(shown[:MAX_SHOWN]))
    if not said:
        return None, []
    material = Material(shown, question, pages)
    prose = _prose(report) or " ".join(s.bare for s in said)
    cross = not same_language(prose, shown[:MAX_SHOWN])
    material.translations = translated(prose, material.passages)
    material.report_language = language_of(prose[:20_000])
    trusted: list[tuple[float, bool]] = []  # the report's figures stated or derived so far, the latest first
    out = []
    for sentence in said:
        statement = classify(sentence, material, cross, trusted[:TRUSTED])
        if statement.support in ("stated", "derived"):
            trusted[:0] = [(f.values[0], f.percent) for f in sentence.figures if not f.year]  # "1,960 t" is no year
        out.append(statement)
    out = restated(said, out, material, cross)
    counts = SupportCounts()
    for s in out:
        setattr(counts, s.support, getattr(counts, s.support) + 1)
        counts.invented += s.invented
    return counts, out


RESTATED_DIGITS = 3  # a figure of this many significant digits, or more, found again is the same figure
MAX_RESTATED = 400  # the report's supported figures looked at
PASSES = 3  # a statement derived by the report's own figures may be what the next one computes from


def restated(said: list[Sentence], out: list[Statement], material: Material, cross: bool) -> list[Statement]:
    """``out`` with each unsupported statement derived from the report's
    own supported statements, when it names nothing the material lacks:
    - one that shows its arithmetic ("£486.3m ÷ 211,840 = £2,295.60",
      "1.21281^(1/5) = 1.03934") where every relation holds, from figures
      the material or the report's supported statements give
      (``activities/expressions.py``), and whose other figures are such
      figures or what it computes;
    - one that restates figures the report derives elsewhere (the material
      lacks them), before it or after (an answer first, "about £2,295.60 per
      resident", then its arithmetic), each of its figures such a figure
      (three significant digits or more, not a year) or held by the material.
    Repeated ``PASSES`` times: a chain of shown steps resolves."""
    for _ in range(PASSES):
        found: list[tuple[Figure, int]] = []  # figures of supported statements, and which
        for n, (sentence, statement) in enumerate(zip(said, out, strict=True)):
            if statement.support in ("stated", "derived"):
                found += [(f, n) for f in sentence.figures if not f.year]
        found = found[:MAX_RESTATED]
        changed = False
        for n, (sentence, statement) in enumerate(zip(said, out, strict=True)):
            if statement.support != "unsupported" or (not cross and any(not material.known(x) for x in sentence.names)):
                continue
            derived = (
                _shown(sentence, material, found, n)
                or _restating(sentence, material, found, n, out)
                or _computed(sentence, material, found, n)
            )
            if derived is not None:
                out[n] = Statement(text=statement.text, support="derived", basis=derived[0], arithmetic=derived[1])
                changed = True
        if not changed:
            break
    return out


def _shown(
    sentence: Sentence, material: Material, found: list[tuple[Figure, int]], me: int
) -> tuple[list[Basis], str] | None:
    """Its shown arithmetic, when it holds from known figures and accounts
    for each of its figures."""
    hedge = hedged(sentence.bare)

    def known(f: Figure) -> bool:
        return material.anywhere(f, hedge) or any(
            n != me and any(f.matches(v, hedge) for v in g.values) for g, n in found
        )

    def growth(f: Figure) -> bool:
        """A growth factor of a known percentage: 1.05 for "about 5 %", 0.95 for a fall of 5 %."""
        r = f.readings[0]
        if f.percent or not 0.5 < r.value < 2 or r.value == 1:
            return False
        change = abs(r.value - 1) * 100
        tolerance = r.precision * 100 * 0.55 + 1e-9
        pool = [v for g, n in found if n != me and g.percent for v in g.values] + material.percents
        return any(abs(v - change) <= tolerance for v in pool)

    arithmetic = shown_arithmetic(sentence.text, sentence.writing, lambda f: known(f) or growth(f))
    if arithmetic is None:
        return None
    computed = [x for v in arithmetic.values for x in (v, v * 100, v / 100)]
    for f in sentence.figures:
        accounted = known(f) or growth(f) or any(f.matches(v, True) for v in computed + arithmetic.constants)
        if not (f.year or material.given(f, hedge) or accounted):
            return None
    return [], "; ".join(arithmetic.how)


def _restating(
    sentence: Sentence, material: Material, found: list[tuple[Figure, int]], me: int, out: list[Statement]
) -> tuple[list[Basis], str] | None:
    """The statements it restates the figures of, when each of its figures
    is such a figure or held by the material, one at least restated."""
    hedge = hedged(sentence.bare)
    figs = [f for f in sentence.figures if not material.given(f, hedge)]
    # only a figure the material lacks (one the report computed) is restated: a figure the material states
    # ("4417 ships") put in another statement ("the quay lost 4417 of its boats") is judged by the material
    again = {id(f): None if material.anywhere(f, hedge) else _again(f, found, me, hedge) for f in figs}
    if not any(v is not None for v in again.values()):
        return None
    if not all(again[id(f)] is not None or material.anywhere(f, hedge) for f in figs):
        return None
    sources = [(f, again[id(f)]) for f in figs if again[id(f)] is not None]
    basis = [Basis(figure=f.text, url=out[m].url or "", passage=_short(out[m].text)) for f, m in sources]
    how = "; ".join(f"{f.text} as the report gives it in “{_short(out[m].text, 80)}”" for f, m in sources)
    return basis, how


NEARBY = 6  # statements either side whose supported figures a statement may compute from
WIDE_DIGITS = 5  # a figure of so many significant digits may come from the whole report's


def _computed(
    sentence: Sentence, material: Material, found: list[tuple[Figure, int]], me: int
) -> tuple[list[Basis], str] | None:
    """Its figures derived from the supported figures of the statements
    around it (``NEARBY`` either side: a table's computed column from the
    rows and sentences that state its inputs), strictly: a figure of fewer
    than four significant digits starts from its own figures or one it
    derives first."""
    hedge = hedged(sentence.bare)
    figs = [f for f in sentence.figures if not f.year and not material.given(f, hedge)]
    lacking = [f for f in figs if not material.anywhere(f, hedge)]
    if not lacking:
        return None
    matched = material.matching(sentence)
    held = [(f, [p for p in matched if p.holds(f, hedge)]) for f in figs if f not in lacking]
    # the statements around it; for figures of five significant digits or more (chance is rare), the whole
    # report's figures of three digits or more, the nearest first ("≈ £2,327.35" from a budget stated above)
    wide = all(f.digits >= WIDE_DIGITS for f in lacking)
    near = sorted(
        (abs(n - me), i, g)
        for i, (g, n) in enumerate(found)
        if n != me and (abs(n - me) <= NEARBY or (wide and g.digits >= 3))
    )
    pool = [(g.values[0], g.percent) for _, _, g in near]
    known = [g for _, _, g in near]
    table = _held_cells(sentence.context, material, known, hedge) if sentence.row else ""
    return derive(
        bare=sentence.bare,
        context=sentence.context,
        writing=sentence.writing,
        lacking=lacking,
        held=held,
        matched=[],
        question=material.question_figures,
        trusted=pool,
        hedge=hedge,
        strict=True,
        table=table,
    )


def _held_cells(context: str, material: Material, known: list[Figure], hedge: bool) -> str:
    """A row's table above it with each cell kept whose figures the
    material or the report's supported statements give (the others
    emptied): what its columns' totals and averages may come from."""
    out = []
    for line in context.split("\n"):
        cells = line.strip().strip("|").split("|")
        kept = [cell if all(_given(f, material, known, hedge) for f in figures(cell, None)) else " " for cell in cells]
        out.append("| " + " | ".join(kept) + " |")
    return "\n".join(out)


def _given(figure: Figure, material: Material, known: list[Figure], hedge: bool) -> bool:
    return material.anywhere(figure, hedge) or any(figure.matches(v, hedge) for g in known for v in g.values)


def _again(figure: Figure, found: list[tuple[Figure, int]], me: int, hedge: bool) -> int | None:
    """Which other supported statement gives ``figure`` (within its rounding), if one does."""
    if figure.year or figure.digits < RESTATED_DIGITS:
        return None
    return next((n for g, n in found if n != me and any(figure.matches(v, hedge) for v in g.values)), None)


def _short(text: str, size: int = 200) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"
