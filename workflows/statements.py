"""The reporter's statements, traced (SPEC 3d): what the workflow makes of how
each statement of a report is supported (``ModelReply.statements``, measured
by the model activity: ``activities/support.py``).

A report is asked for again, or replaced, only for invention: statements
carrying a figure or a name the material lacks. Derived figures, paraphrase,
"the sources do not give this", footnote markers and citation style are
never a reason. So:

- a report with fewer than ``INVENTED_LIMIT`` of its judged statements
  invented (and fewer than ``MANY_INVENTED``) ships as written, unless more than half of them are unsupported
  with one invented (``mostly_invention``: it would fail if asked again), or more than half of three or
  more with none invented (``mostly_unfound``: fiction in the material's own words);
- one with more is asked for once more, told which statements its material
  does not hold; the better of the two ships, its unsupported statements
  marked, unless more than half of that one's statements are found in no
  source (``mostly_unsupported``): then the reporter has failed and the run's report is built from the
  findings (``workflows/fallback_report.py``): a weak model's fluent fiction
  never ships as research;
- a report that uses none of the findings' figures and names is asked for
  again as before (``reply_checks.grounded_report``), unless it says what the
  material lacks: an honest "the sources do not give this" is an answer;
- a report that only says what the material lacks (no statement stated,
  derived or unsupported) over findings that hold facts is asked for once
  more (``only_absent``); the second ships as any second report is judged
  (an honest "not given" twice is an answer), unless it again only says
  what is lacking in none of the findings' figures and names (SmolLM2's
  "what they did not provide", twice): the reporter has failed;
- a report that states nothing (no sentence with a figure or a name beyond
  the question's, none saying what the material lacks: SmolLM2's "changes
  largely due to weather conditions", an outline of headings, the question
  restated) over findings that hold facts is asked for once more
  (``states_nothing``); a second that states nothing either is the
  reporter's failure, as fiction is. None of the 33 strong fixtures
  states nothing.

Whatever the share of invention, a statement whose figure a passage
saying the same thing gives otherwise (a near miss, ``contradicted``: "224
patients" where the trial's abstract gives 212) is marked, with a warning,
and listed first in the note with the figure its source gives.

Every report that was judged ends with a short note on how its statements
are supported (``support_note``). Pure functions beside the two calls.
"""

from __future__ import annotations

from temporalio import workflow

from workflows.box import Box
from workflows.reply_checks import ReporterUngrounded, ReporterUnsupported, ask_again, grounded_report, is_echo

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.grounding import MIN_ITEMS, findings_items, grounded
    from workflows.models import EvidencePage, ModelReply, ModelRequest
    from workflows.state import RunState
    from workflows.support_models import Statement, SupportCounts

PAGES_PATCH = "support-reads-the-pages-read"  # recorded runs judged a report by what it was shown only
MAX_SUPPORT_PAGES = 40  # of the pages the run read, those a report's statements may be found in
NOTHING_PATCH = "re-ask-reports-stating-nothing"  # recorded runs shipped a report that stated nothing
ABSENT_PATCH = "re-ask-reports-only-saying-what-is-not-given"  # recorded runs shipped them
MOSTLY_PATCH = "re-ask-mostly-unsupported-reports"  # recorded runs shipped a first report mostly unsupported
UNFOUND_PATCH = "re-ask-reports-mostly-found-in-no-source"  # recorded runs shipped one that invented nothing
MIN_UNFOUND = 3  # judged statements at least, for a report inventing nothing to be judged mostly unfound
PATCH = "trace-statements"  # recorded runs judged reports by the share of statements held (re-ask-unsupported-reports)
INVENTED_LIMIT = 0.25  # a report with at least this share of its statements invented is asked for again
MIN_INVENTED = 2  # and at least this many
MANY_PATCH = "re-ask-reports-with-many-invented-statements"  # recorded runs judged by the share alone
MANY_INVENTED = 7  # or at least this many invented statements
MANY_LIMIT = 0.15  # that are at least this share of them (a long copied report with invention beside it)
LISTED = 8  # unsupported statements named in a re-ask or a note
CONTRADICTED_PATCH = "mark-statements-their-sources-contradict"  # recorded runs marked them only among much invention
MARK = " *(not found in the sources)*"
# A statement whose every figure a source holds, but gives for another year or status, or that says a
# source lacks what one gives (``activities/attachment.py``): not "not found", said otherwise.
OTHERWISE_MARK = " *(a source says otherwise)*"
NOTE_HEADING = "## How the statements are supported"
ASK_AGAIN = (
    "Your report above states things that the findings and evidence do not say: figures or names that appear "
    "nowhere in them. These statements, for example:\n{listed}\n\nWrite the report again using only the findings "
    "and evidence: keep what they state, compute from their figures where useful (show the arithmetic), say "
    "plainly what they do not give, and cite their pages. Add nothing they do not say."
)

UNFOUND_AGAIN = (
    "Most statements of your report above are found nowhere in the findings and evidence, though their words "
    "and names are the findings'. These statements, for example:\n{listed}\n\nWrite the report again using only "
    "what the findings and evidence say: keep what they state, with its figures, names and dates, compute from "
    "their figures where useful (show the arithmetic), say plainly what they do not give, and cite their pages. "
    "Add nothing they do not say."
)

STATE_IT = (
    "Your report above states none of the research's facts: no figure, date or name from the findings, and "
    "nothing about what they do not give. Write the report again from the findings and evidence: state what they "
    "found with its figures, names and dates, compute from them where the question asks, say plainly what they "
    "do not give, and cite their pages."
)

ONLY_ABSENT = (
    "Your report above only says what the findings and evidence do not give, and states nothing of what they "
    "do give. Read them again: if they answer the question, write the report from them with their figures, "
    "names and dates, and cite their pages; if they truly do not, say so, and report what they do say on the "
    "question's subject, cited."
)


def support_pages(state: RunState) -> list[EvidencePage]:
    """The pages the run read (its crawls that gave a page's text, the first
    ``MAX_SUPPORT_PAGES``): a report's statement that one of them states is
    stated, though the passages shown to the reporter left it out. A strong
    model's faithful report (or an outside check's, written from the
    documents) names a publication's date or a figure of a page the run
    read that no passage shown carried."""
    pages = [
        EvidencePage(url=r.sources[0].url, title=r.sources[0].title, blob=r.blob or "") for r in state.pages_with_text()
    ]
    return pages[:MAX_SUPPORT_PAGES]


def only_absent(reply: ModelReply, findings: list[str], question: str) -> bool:
    """Whether a judged reply claims nothing but that the material lacks
    something (no statement stated, derived or not found in the sources)
    while the findings, or what the reporter was shown for them, hold facts:
    SmolLM2 on brackwater-mayor, "doesn't provide any details about the
    total number of votes cast" over a page giving 3,412 votes. Such a
    reply passed as an honest answer, and used none of the findings."""
    counts = reply.support
    if not reply.judged or counts is None or not counts.absent or counts.judged:
        return False
    return max(len(findings_items(findings, question)), reply.shown_items or 0) >= MIN_ITEMS


def states_nothing(reply: ModelReply, findings: list[str], question: str) -> bool:
    """Whether a judged reply states nothing at all (``support`` None: no
    statement, not even one saying what the material lacks) while the
    findings, or what the reporter was shown for them, hold facts
    (``MIN_ITEMS`` figures and names the question does not give): a text
    that reports none of the research. A step whose model wrote nothing
    usable has its passages stand for its findings (``shown_items``)."""
    if not reply.judged or reply.support is not None or not reply.content.strip():
        return False
    return max(len(findings_items(findings, question)), reply.shown_items or 0) >= MIN_ITEMS


def invented_too_much(counts: SupportCounts | None, many: bool = False) -> bool:
    """Whether a report's invented statements are a real share of it: at
    least ``INVENTED_LIMIT`` of them and two, or half of a short one's; or
    nothing it claims is found in its sources (a report of none of the
    research, whatever it names); with ``many``, also ``MANY_INVENTED`` of
    them or more that are ``MANY_LIMIT`` of the report (SmolLM2 on
    chengbo-zh at ``7b9124d``: 8 of 36 statements invented, "Mlacron
    Industries", "Tempwell Shipyard", beside 27 copied; of the 104
    faithful held-out reports, none has more than 6: figures from a page
    the run never read)."""
    if counts is None or not counts.judged:
        return False
    share = counts.invented / counts.judged
    invented = (counts.invented >= MIN_INVENTED and share >= INVENTED_LIMIT) or (counts.invented and share >= 0.5)
    invented = invented or (many and counts.invented >= MANY_INVENTED and share >= MANY_LIMIT)
    return bool(invented) or counts.stated + counts.derived == 0


def mostly_invention(counts: SupportCounts | None) -> bool:
    """Whether a first report reads as a weak model's fiction though few of
    its statements carry a figure or name found nowhere: more than half of
    them unsupported (``mostly_unsupported``, what fails a report asked for
    again) and one at least invented. SmolLM2's kittiwake-decline report,
    as judged while a list's numbers still counted as figures: one
    statement stated of three, a "1 %" found nowhere."""
    return counts is not None and counts.invented > 0 and counts.judged > 0 and mostly_unsupported(counts)


def mostly_unfound(counts: SupportCounts | None) -> bool:
    """Whether a first report that invents nothing is still mostly found in
    no source: more than half of its judged statements (``MIN_UNFOUND`` at
    least) unsupported. SmolLM2 at ``d90c946``, fiction in the material's
    own words, shipped unmarked: olvane-founder, 5 of 7 ("launched a new
    product in January 2019 and is now focused on sea salt monitoring");
    olvane-revenue-2012, 3 of 4 ("sold to a Chinese company called Chengbo
    Marine Instruments"). Asked again; still so, the findings are the
    report (``mostly_unsupported``). Of the 122 faithful held-out reports
    and the strong fixtures, none is."""
    return counts is not None and counts.judged >= MIN_UNFOUND and mostly_unsupported(counts)


def mostly_unsupported(counts: SupportCounts | None) -> bool:
    """Whether more than half of a report's judged statements are found in
    none of its sources (or it states nothing to judge): a report asked for
    again that is still so is fiction, not research."""
    return counts is None or counts.unsupported * 2 > counts.judged


def marked(report: str, statements: list[Statement]) -> str:
    """``report`` with each unsupported statement followed by ``MARK``, and
    each a source contradicts but does not lack by ``OTHERWISE_MARK`` (the
    first place its text stands as written; one that does not stand so is
    left, and still listed in the note)."""
    for s in statements:
        mark = OTHERWISE_MARK if s.contradicts and not s.invented else MARK
        if (s.support == "unsupported" or s.contradicts) and s.text in report and s.text + mark not in report:
            report = report.replace(s.text, s.text + mark, 1)
    return report


def contradicted(statements: list[Statement]) -> list[Statement]:
    """The statements a passage saying the same thing contradicts: a near
    miss of its figure ("224 patients" where the source gives 212,
    ``activities/contradiction.py``), its figure another year's or status's,
    or "not given" for what a page gives (``activities/attachment.py``):
    marked in any report, for a reader must not take them as research,
    however faithful the rest."""
    return [s for s in statements if s.support in ("unsupported", "absent") and s.contradicts]


def contradicted_warning(statements: list[Statement]) -> str:
    found = contradicted(statements)
    one = found[0]
    what = (
        "give a figure its sources give otherwise"
        if all(s.invented for s in found)
        else "say what its sources say otherwise"
    )
    return (
        f"{len(found)} statement(s) of the report {what} (e.g. "
        f"“{_short(one.text, 80)}”: a source gives {one.contradicts}): they are marked in the report"
    )


def support_note(counts: SupportCounts | None, statements: list[Statement]) -> str:
    """The report's closing note: how many statements are stated, derived,
    say what the sources lack, or were not found in them (each listed)."""
    if counts is None or not statements:
        return ""
    parts = [
        f"{counts.stated} stated by a source",
        f"{counts.derived} derived by arithmetic from stated figures",
        f"{counts.absent} saying what the sources do not give",
        f"{counts.unsupported} not found in the sources",
    ]
    total = counts.stated + counts.derived + counts.absent + counts.unsupported
    text = f"\n\n{NOTE_HEADING}\n\nOf the report's {total} statements: {'; '.join(parts)}."
    missing = sorted(
        (s for s in statements if s.support == "unsupported" or s.contradicts), key=lambda s: not s.contradicts
    )
    if missing:
        heading = (
            "Not found in the sources"
            if all(s.invented or not s.contradicts for s in missing)
            else ("Not found in the sources, or given otherwise by them")
        )
        text += f"\n\n{heading}:\n" + "\n".join(f"- {_item(s)}" for s in missing[:LISTED])
        if len(missing) > LISTED:
            text += f"\n- … and {len(missing) - LISTED} more"
    return text + "\n"


def _item(s: Statement) -> str:
    """An unsupported statement as the note lists it; with the figure a
    source gives instead, and that source, where one does."""
    if not s.contradicts:
        return f"“{_short(s.text)}”"
    return f"“{_short(s.text)}” (a source gives {s.contradicts}{': ' + s.url if s.url else ''})"


def _short(text: str, size: int = 200) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _listed(reply: ModelReply) -> str:
    found = [s.text for s in reply.statements if s.invented] or [
        s.text for s in reply.statements if s.support == "unsupported"
    ]
    return "\n".join(f"- {_short(t)}" for t in found[:LISTED])


async def traced_report(box: Box, request: ModelRequest, reply: ModelReply, findings: list[str]) -> ModelReply:
    """The reporter's reply to ship. Asked for again once, at most: for
    using none of the findings (not an answer that says what they lack), for
    stating nothing, or for invention; the better of the two ships (its
    unsupported statements marked, see ``write_report``) unless most of it
    is found in no source: ``ReporterUngrounded`` / ``ReporterUnsupported``
    then (the run reports its findings)."""
    first = reply
    if not (reply.support and reply.support.absent):
        reply = await grounded_report(box, request, reply, findings)  # may ask again, for the findings
    question = f"{box.request.question}\n{box.state.topic}"
    if reply is first and states_nothing(first, findings, question) and workflow.patched(NOTHING_PATCH):
        box.emit("notice", "the report states none of the research's facts: asking the reporter again")
        reply = await ask_again(box, request, STATE_IT, "reporter · asked again (nothing stated)")
        if is_echo(reply):
            raise ReporterUnsupported()
    elif reply is first and only_absent(first, findings, question) and workflow.patched(ABSENT_PATCH):
        box.emit("notice", "the report only says what the findings do not give: asking the reporter again")
        again = await ask_again(box, request, ONLY_ABSENT, "reporter · asked again (only what is not given)")
        if is_echo(again) or not again.content.strip():
            reply = first
        elif only_absent(again, findings, question) and not grounded(again.content, findings, question):
            raise ReporterUngrounded()  # a lack twice, in none of the research's words: no answer
        else:
            reply = again  # an honest "not given" twice, naming what the research found, ships
    many = workflow.patched(MANY_PATCH)
    if reply is first:
        counts = first.support
        invented = invented_too_much(counts, many) or (mostly_invention(counts) and workflow.patched(MOSTLY_PATCH))
        unfound = not invented and mostly_unfound(counts) and workflow.patched(UNFOUND_PATCH)
        if not invented and not unfound:
            return first
        reply = await _asked_again(box, request, first, unfound)
    if mostly_unsupported(reply.support):  # asked again (above, or for the findings): still fiction
        raise ReporterUnsupported()
    if invented_too_much(reply.support, many):
        box.warn("the reporter twice wrote statements its sources do not hold: they are marked in the report")
    return reply


async def _asked_again(box: Box, request: ModelRequest, first: ModelReply, unfound: bool) -> ModelReply:
    """The better of ``first`` and the reporter's reply when asked again,
    told which statements its sources do not hold: for invention
    (``unfound`` False: the one with the smaller invented share) or for
    statements found in no source though nothing is invented (the one with
    the smaller unsupported share)."""
    counts = first.support
    assert counts is not None
    if unfound:
        what = f"{counts.unsupported} of {counts.judged} statements found in none of its sources"
        nudge, label = UNFOUND_AGAIN.format(listed=_listed(first)), "reporter · asked again (found in no source)"
    else:
        what = f"{counts.invented} of {counts.judged} statements with figures or names its sources do not hold"
        nudge, label = ASK_AGAIN.format(listed=_listed(first)), "reporter · asked again (invented statements)"
    box.emit("notice", f"the report states {what}: asking the reporter again")
    again = await ask_again(box, request, nudge, label)
    second = None if is_echo(again) or not again.content.strip() else again
    worse = _unsupported if unfound else _invented  # a second that states too little to tell is no better
    return first if second is None or worse(second) > worse(first) else second


def _unsupported(reply: ModelReply) -> float:
    """A reply's unsupported share; one that states too little to judge
    counts as wholly unsupported."""
    counts = reply.support
    return counts.unsupported / counts.judged if counts and counts.judged else 1.0


def _invented(reply: ModelReply) -> float:
    """A reply's invented share; one that states too little to judge counts
    as wholly invented (it answers nothing)."""
    share = reply.support.invented_share() if reply.support else None
    return 1.0 if share is None else share
