"""Whether a statement's new figures follow from figures its material states
(``activities/support.py`` asks; ``activities/arithmetic.py`` does the
arithmetic): the pool of figures a statement may compute from, and the
derivation of each figure it adds, in up to two steps (a difference, then
the share it is of a total: "an increase of 7.6 (7.6 / 18.4 = 0.413)").

The pool, most relevant first and bounded (``arithmetic.MAX_POOL``): the
material's values of the figures the statement itself states; those of the
sentence before it or of its table's earlier rows that the material states
or the report already derived (``trusted``); the question's figures; the
factors its words name ("a quarter"); then the figures of its best-matching
passages, their lines that share most with the statement first. Pure
functions on bounded inputs.
"""

from __future__ import annotations

from activities import reading
from activities.arithmetic import MAX_POOL, Derivations, is_year, run_candidates
from activities.dates import MAX_DATES, dates, names_days
from activities.figures import Figure, figures, plain, word_factors
from workflows.support_models import Basis

SHOWN_PASSAGE = 400  # characters of a passage kept with a figure it gives
PASSES = 2  # a figure derived may be the start of the next one's arithmetic
STRICT_DIGITS = 4  # from a wide pool, a figure of fewer digits is matched by chance: it needs an anchor


def shown(passage) -> str:
    text = " ".join(passage.text.split())
    return text if len(text) <= SHOWN_PASSAGE else text[: SHOWN_PASSAGE - 1] + "…"


def _matched_value(figure: Figure, passages: list, hedge: bool):
    """(value as the material writes it, whether a percentage, passage) of the
    first passage holding ``figure``, else None."""
    for p in passages:
        for g in p.figures:
            if figure.matches(g.values[0], hedge):
                return g.values[0], g.percent, p
    return None


def derive(
    *,
    bare: str,
    context: str,
    writing: str | None,
    lacking: list[Figure],
    held: list[tuple[Figure, list]],
    matched: list,
    question: list[Figure],
    trusted: list[tuple[float, bool]],
    hedge: bool,
    strict: bool = False,
    table: str = "",
) -> tuple[list[Basis], str] | None:
    """The basis and arithmetic of each figure in ``lacking`` when every one
    follows from the pool (see the module's note); else None. ``held``: the
    statement's figures with the passages that hold them. ``strict``:
    ``trusted`` is a wide pool (the report's figures around it), so a
    figure of fewer than ``STRICT_DIGITS`` significant digits starts from
    the statement's own figures or one it derives first. ``table``: the
    table it is a row of, with the cells the material or the report's
    supported statements give, whose columns it may total or average ("|
    Total | 46.885 |")."""
    near = [g for g in figures(context, writing) if not g.small][:MAX_POOL]  # what it speaks of
    mine = figures(bare, writing)
    counts = [g for g in mine if g.small]  # its own small figures ("±2 mm"), when stated
    own, origin, listed = _own(held, [(g, matched) for g in near + counts], hedge)
    given = [(g.values[0], g.percent) for g in question] + [(k, False) for k in word_factors(f"{bare} {context}")]
    # what the report stated or derived before it (it may compute from its own earlier figures)
    pool = own + given + list(trusted) + _passage_pool(matched, set(reading.terms(f"{bare} {context}")), origin)
    runs = _runs(matched, listed, table, writing)
    if names_days(bare, f"{context}\n{table}"):
        runs.append(_days(f"{bare} {context}", matched))
    years = _years([*near, *mine, *question], matched)
    percent = any(f.percent for f in lacking)
    basis: list[Basis] = []
    based: set[float] = set()  # figures in the basis, or derived
    steps: list[str] = []
    todo = list(lacking)
    anchors = {v for v, _ in own} | (set() if strict else {v for v, _ in trusted} | {v for v, _ in given})
    # a one-digit figure ("£5 million") from the report's earlier figures only as the sentence before
    # writes them: 18 m of depth times 290,000 homes is chance, not arithmetic
    close = {v for v, _ in own} | {v for v, _ in given} | {v for v, _ in trusted if any(g.matches(v) for g in near)}
    for _ in range(PASSES):
        found = Derivations(
            pool,
            runs,
            {v for v, _ in own},
            percent=percent,
            units=f"{bare} {context}",
            years=years,
            anchored=any(not is_year(v) for v, _ in own),
            strict=strict,
        )
        left = []
        for f in todo:
            d = found.find(f, hedge, anchors, close, STRICT_DIGITS if strict else 0)
            if d is None:
                left.append(f)
                continue
            steps.append(d.how)
            pool.insert(0, (d.value, f.percent))  # the next figure may start from it
            anchors.add(d.value)
            close.add(d.value)
            for v in dict.fromkeys(d.uses):
                if v in based:
                    continue  # a figure derived a step before, or already listed: the arithmetic shows it
                based.add(v)
                p = origin.get(v)
                basis.append(Basis(figure=f"{v:,.10g}", url=getattr(p, "url", ""), passage=shown(p) if p else ""))
            based.add(d.value)
        todo = left
        if not todo:
            return basis, "; ".join(steps)
    return None


def _own(
    held: list[tuple[Figure, list]], spoken: list[tuple[Figure, list]], hedge: bool
) -> tuple[list[tuple[float, bool]], dict[float, object], list[float]]:
    """(value, percentage) of the statement's figures the material holds
    (``held``) and of those it speaks of (``spoken``: its sentence before,
    its own counts), as the material writes them; the passage of each; and
    its own held figures in order (what "(16.880 + 12.430 + 7.960) / 3"
    lists)."""
    own: list[tuple[float, bool]] = []
    origin: dict[float, object] = {}
    listed: list[float] = []
    for n, (f, holders) in enumerate([*held, *spoken]):
        found = _matched_value(f, holders, hedge)
        if found is not None:  # as the material writes it; a percentage when either says so
            own.append((found[0], found[1] or f.percent))
            origin.setdefault(found[0], found[2])
            if n < len(held) and not is_year(found[0]):
                listed.append(found[0])
    return own, origin, listed


def _runs(matched: list, listed: list[float], table: str, writing: str | None) -> list:
    """The sums and averages a statement may give: of its best passages'
    runs of figures, of the figures it lists, of its table's columns."""
    runs = [p.runs() for p in matched[:3]]
    if len(listed) >= 3:
        runs.append(run_candidates([listed]))
    if table:
        runs.append(sequences(table, figures(table, writing), writing))
    return runs


def _days(spoken: str, matched: list) -> list:
    """The days between two dates, when a statement counts days: between
    one it writes or speaks of (``spoken``) and any other (op "days"), or
    between two of its passages' (op "days-far", for three digits or more:
    "154 days" between a plan's date and the opening's, as a page gives
    both), sorted by value."""
    near = dates(spoken)[:MAX_DATES]
    far = list(dict.fromkeys(d for p in matched[:3] for d in dates(p.text) if d not in near))
    every = [*near, *far][:MAX_DATES]
    out = []
    for i, a in enumerate(every):
        for b in every[i + 1 :]:
            if a != b:
                op = "days" if a in near or b in near else "days-far"
                late, early = max(a, b), min(a, b)
                out.append((float((late - early).days), 1, op, (float(late.toordinal()), float(early.toordinal()))))
    out.sort(key=lambda c: c[0])
    return out


def _years(found: list[Figure], matched: list) -> set[float]:
    """The values written as years (``Figure.year``) by the statement, what
    it speaks of, the question or its passages, and nowhere as a count."""
    theirs = [g for p in matched for g in p.figures]
    years = {g.values[0] for g in [*found, *theirs] if g.year}
    return years - {g.values[0] for g in [*found, *theirs] if not g.year}


def _passage_pool(matched: list, wanted: set[str], origin: dict[float, object]) -> list[tuple[float, bool]]:
    """The figures of the matched passages, their lines that share most with
    ``wanted`` first, counts (small whole numbers) after the rest."""
    big: list[tuple[float, bool]] = []
    small: list[tuple[float, bool]] = []
    for p in matched:
        lines = p.lines()
        order = sorted(range(len(lines)), key=lambda n: -len(wanted & lines[n][0]))
        for n in order:
            for g in lines[n][1]:
                (small if g.small else big).append((g.values[0], g.percent))
                origin.setdefault(g.values[0], p)
    return big + small


def sequences(text: str, found: list[Figure], writing: str | None) -> list:
    """``run_candidates`` of a passage: its table's columns, else its figures
    that are not years, in order."""
    rows = [line for line in text.split("\n") if line.strip().startswith("|")]
    if len(rows) >= 3:
        columns: dict[int, list[float]] = {}
        for row in rows:
            for n, cell in enumerate(row.strip().strip("|").split("|")):
                cells = figures(plain(cell), writing)
                if cells and not cells[0].small:
                    columns.setdefault(n, []).append(cells[0].values[0])
        return run_candidates([c for c in columns.values() if len(c) >= 3])
    values = [f.values[0] for f in found if not (f.values[0].is_integer() and 1800 <= f.values[0] <= 2100)]
    return run_candidates([values] if len(values) >= 3 else [])
