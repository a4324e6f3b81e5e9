"""Whether an invented statement contradicts its material: a figure found
nowhere in it stands where a sentence of a passage saying the same thing
gives a figure of the same kind a little apart (``activities/support.py``
asks, for statements judged invented).

A writer who makes a figure up beside true ones writes a near miss of the
true one: "224 patients" and "56.6 %" where the trial's abstract gives
"212 patients" and "58.5 %"; "198 (93.4 %) completed" where it gives "193
(91.0 %)". Such a statement is what a reader must not take as research, in
a report otherwise faithful: it is marked whatever the report's share of
invention (``workflows/statements.py``). A near miss is:

- a figure of the statement found nowhere in the material, of three
  significant digits or more (two-digit counts lie near one another by
  chance: "16 of 19");
- a figure of a sentence (or table row) of one of the statement's matched
  passages that shares ``SAME_WORDS`` of the statement's words, of the same
  kind (a percentage for a percentage, never a year), of three digits or
  more, within ``NEAR`` of it, and not one that rounds to it or that it
  rounds to ("84 %" beside "84.2 %" is the same figure, less precise).

Measured on the held-out suites' 104 faithful reports and the 24 strong
fixtures (none has a near miss) and on 82 held-out invented reports (17
have one, in their probe runs): ``tests/test_heldout_probe.py``,
``tests/test_contradiction.py``, docs/eval.md. Bounded: the matched passages' sentences, each read once.
"""

from __future__ import annotations

from dataclasses import dataclass

from activities import reading
from activities.figures import Figure, plain
from activities.material import Material, Passage, _read, stems, words_of
from activities.statement_text import Sentence, sentences

SAME_WORDS = 0.5  # of the statement's words, the sentence giving the other figure holds
NEAR = 0.08  # at most this far apart (relative): a near miss, not another quantity
MIN_DIGITS = 3  # significant digits of both figures


@dataclass(frozen=True)
class Contradiction:
    written: str  # the statement's figure, "56.6 %"
    given: str  # the passage's, "58.5 %"
    url: str
    passage: str  # the sentence giving it


def contradiction(
    sentence: Sentence, figs: list[Figure], matched: list[Passage], material: Material, hedge: bool
) -> Contradiction | None:
    """The first near miss of ``sentence``'s figures ``figs`` found nowhere
    in ``material`` by a sentence of ``matched`` saying the same thing, else
    None (see the module's note)."""
    wanted = words_of(sentence.bare)
    made_up = [f for f in figs if not f.year and f.digits >= MIN_DIGITS and not material.anywhere(f, hedge)]
    if not wanted or not made_up:
        return None
    for passage in matched:
        for unit, terms, found in _units(passage):
            if len(wanted & terms) < SAME_WORDS * len(wanted):
                continue
            for f in made_up:
                g = next((g for g in found if _near_miss(f, g, hedge)), None)
                if g is not None:
                    return Contradiction(f.text, g.text, passage.url, " ".join(unit.split())[:400])
    return None


def _near_miss(f: Figure, g: Figure, hedge: bool) -> bool:
    """Whether ``g`` is a figure of ``f``'s kind a little apart from it,
    not the same figure rounded either way."""
    if g.year or g.percent != f.percent or g.digits < MIN_DIGITS:
        return False
    if any(g.matches(v, hedge) for v in f.values) or any(f.matches(v, hedge) for v in g.values):
        return False
    a, b = f.values[0], g.values[0]
    return bool(a and b) and (a > 0) == (b > 0) and abs(a - b) <= NEAR * max(abs(a), abs(b))


def _units(passage: Passage) -> list[tuple[str, set[str], list[Figure]]]:
    """(text, word stems, figures) of each sentence or table row of
    ``passage``."""
    out = []
    for line in passage.text.split("\n"):
        for unit in sentences(line) if not line.lstrip().startswith("|") else [line]:
            out.append((unit, stems(reading.terms(plain(unit))), _read(plain(unit), passage.writing, True)))
    return out
