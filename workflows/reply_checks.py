"""The run's own checks on what a model wrote, before anything of it is used.

The model activity measures each reply (``ModelReply.echo``: how much of it
repeats its instructions; ``ModelReply.in_locale``: how much is in the
locale's script); the workflow decides here, for every role the same way:

- a reply that is mostly its own instructions or the prompt's example
  (``workflows/echoes.py``) failed: it is asked for once more, with a word on
  what went wrong; still an echo, the caller falls back (the coordinator
  hands the question off, an agent's findings say nothing usable was
  written, the reporter's run gets the report built from the findings,
  ``workflows/fallback_report.py``);
- a report in another script than its locale's is asked for once more, in
  the locale's language; still not, it is kept, with a warning;
- a report that uses none of the findings' figures and names
  (``workflows/grounding.py``), or whose statements are mostly not in what
  it was shown (``ModelReply.held``, ``activities/held.py``), is asked for
  once more; still so, the run gets the report built from the findings.

Recorded replies carry none of these measures, so a replayed run decides as
it did.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

from workflows.activity_calls import ActivityCalls
from workflows.box import Box

with workflow.unsafe.imports_passed_through():  # side-effect free; not re-imported per run
    from workflows.echoes import echoed
    from workflows.grounding import grounded
    from workflows.languages import language_name
    from workflows.models import Message, ModelReply, ModelRequest

ECHO_PATCH = "re-ask-echoed-replies"
LANGUAGE_PATCH = "re-ask-report-language"
IN_LOCALE_LIMIT = 0.3  # a report with less of its writing in the locale's script is in another language

AGAIN = {
    "coordinator": "Your reply repeated your instructions instead of answering. Do not repeat them. Answer the "
    "user's message now: reply briefly to small talk, or call the hand-off tool with the research topic.",
    "reporter": "Your reply repeated your instructions instead of writing the report. Do not repeat them. Write "
    "the report now, from the findings and sources in the message above.",
}
AGENT_AGAIN = (
    "Your reply repeated your instructions instead of reporting on your step. Do not repeat them. Write your "
    "findings on the step now, from what you have read (or say plainly that nothing was found)."
)
NOTHING_USABLE = "(no usable findings: the {role}'s replies repeated its instructions instead of reporting on the step)"


class ReporterUngrounded(ApplicationError):
    """The reporter twice wrote a report that used none of the findings."""

    def __init__(self) -> None:
        super().__init__(
            "the reporter's reports twice used none of the findings' figures and names",
            type="ReporterUngrounded",
            non_retryable=True,
        )


GROUNDING_PATCH = "re-ask-ungrounded-reports"
REFERENCES_PATCH = "grounding-reads-references"  # recorded runs took "&#39;" for a figure 39
UNGROUNDED = (
    "Your report above uses none of the facts in the findings and evidence it was given. Write the report "
    "again from them: keep their figures, names and dates, and cite their pages."
)


async def grounded_report(box: Box, request: ModelRequest, reply: ModelReply, findings: list[str]) -> ModelReply:
    """The reporter's reply, asked for once more when it uses none of the
    findings' figures and names (``workflows/grounding.py``);
    ``ReporterUngrounded`` when the second does not either."""
    question = f"{box.request.question}\n{box.state.topic}"
    references = workflow.patched(REFERENCES_PATCH)  # "&#39;" read as "'", not as a figure 39
    if grounded(reply.content, findings, question, references) or not workflow.patched(GROUNDING_PATCH):
        return reply
    box.emit("notice", "the report uses none of the findings: asking the reporter to write it from them")
    again = await ask_again(box, request, UNGROUNDED, "reporter · asked again from the findings")
    if is_echo(again) or not grounded(again.content, findings, question, references):
        raise ReporterUngrounded()
    return again


class ReporterUnsupported(ApplicationError):
    """The reporter twice wrote a report that what it was shown does not hold."""

    def __init__(self) -> None:
        super().__init__(
            "the reporter's reports twice stated what the findings and evidence do not say",
            type="ReporterUnsupported",
            non_retryable=True,
        )


SUPPORT_PATCH = "re-ask-unsupported-reports"
HELD_LIMIT = 0.3  # a report with fewer of its statements in what it was shown is not a report of the research
UNSUPPORTED = (
    "Your first report stated mostly things that the findings and evidence above do not say. Write the report "
    "again using only them: state their facts with their figures, names and dates, say what they do not tell, "
    "and cite their pages. Add nothing they do not say."
)


def unsupported(reply: ModelReply) -> bool:
    """Whether the reply states mostly what it was not shown (a reply not
    judged, or recorded before replies were, is not)."""
    return reply.held is not None and reply.held < HELD_LIMIT


async def supported_report(box: Box, request: ModelRequest, reply: ModelReply, first: ModelReply) -> ModelReply:
    """The reporter's reply, asked for once more when fewer than
    ``HELD_LIMIT`` of its statements are in what it was shown;
    ``ReporterUnsupported`` when the second is no better: an echo, held
    as little, or stating too little to tell (SmolLM2's second replies:
    "Please refer to the report again, and cite all pages."). ``first`` is
    the reporter's first report: when ``reply`` is already a second one
    (asked again for using none of the findings), it is judged as a second
    one, never asked for a third time."""
    if reply is not first:
        no_better = (unsupported(first) and not well_held(reply)) or unsupported(reply)
        if no_better and workflow.patched(SUPPORT_PATCH):
            raise ReporterUnsupported()
        return reply
    if not unsupported(reply) or not workflow.patched(SUPPORT_PATCH):
        return reply
    share = f"{reply.held:.0%}"
    box.emit("notice", f"the report states mostly what its findings do not say ({share} held): asking again")
    again = await ask_again(box, request, UNSUPPORTED, "reporter · asked again (unsupported)")
    if is_echo(again) or not well_held(again):
        raise ReporterUnsupported()
    return again


def well_held(reply: ModelReply) -> bool:
    """Whether the reply was judged and enough of it is held."""
    return reply.held is not None and reply.held >= HELD_LIMIT


async def ask_again(box: Box, request: ModelRequest, nudge: str, where: str) -> ModelReply:
    """The reporter's request sent again with ``nudge`` after it (the
    findings may give way to it in a full window)."""
    more = [*request.messages, Message(role="user", content=nudge)]
    return await box.calls.chat(request.model_copy(update={"messages": more, "on_overflow": "trim"}), where)


class ReporterEchoed(ApplicationError):
    """The reporter repeated its instructions twice: no report was written."""

    def __init__(self) -> None:
        super().__init__(
            "the reporter's replies repeated its instructions twice instead of a report",
            type="ReporterEchoed",
            non_retryable=True,
        )


def is_echo(reply: ModelReply) -> bool:
    return echoed(reply.echo, bool(reply.tool_calls))


async def unechoed(
    calls: ActivityCalls, request: ModelRequest, reply: ModelReply, nudge: str, where: str
) -> ModelReply:
    """``reply``, or, when it repeats its instructions, the reply to the same
    request asked once more with ``nudge`` (the echo left out of the
    conversation). The caller checks the answer with ``is_echo``."""
    if not is_echo(reply) or not workflow.patched(ECHO_PATCH):
        return reply
    more = [*request.messages, Message(role="user", content=nudge)]
    again = request.model_copy(update={"messages": more, "on_overflow": "trim"})
    return await calls.chat(again, f"{where or request.role} · asked again (it repeated its instructions)")


async def agent_answer(
    calls: ActivityCalls, request: ModelRequest, reply: ModelReply, where: str
) -> tuple[str, str | None]:
    """An agent's findings from its answer (a reply without tool calls), and
    the conversation they end: an echo is asked for once more, without
    tools; still an echo, the findings say nothing usable was written."""
    if not is_echo(reply):
        return reply.content or "(no findings)", reply.history
    again = await unechoed(calls, request.model_copy(update={"tool_choice": "none"}), reply, AGENT_AGAIN, where)
    if is_echo(again):
        return NOTHING_USABLE.format(role=request.role), again.history
    return again.content or "(no findings)", again.history


async def checked_report(box: Box, request: ModelRequest, reply: ModelReply) -> ModelReply:
    """The reporter's reply, asked for again once if it repeats its
    instructions (``ReporterEchoed`` when it does twice) and once if it is
    in another language than the run's locale."""
    reply = await unechoed(box.calls, request, reply, AGAIN["reporter"], "reporter")
    if is_echo(reply):
        raise ReporterEchoed()
    if reply.in_locale is None or reply.in_locale >= IN_LOCALE_LIMIT or not workflow.patched(LANGUAGE_PATCH):
        return reply
    language = language_name(box.state.locale)
    box.emit("notice", f"the report is not in {language}: asking the reporter to write it again in {language}")
    again = request.model_copy(
        update={
            "history": reply.history,
            "on_overflow": "trim",  # the findings may give way to the report to rewrite
            "messages": [
                Message(
                    role="user",
                    content=f"The report above is not written in {language}. Write the whole report again in "
                    f"{language}: the same structure, facts, numbers and links, every sentence in {language}.",
                )
            ],
        }
    )
    try:
        rewritten = await box.calls.chat(again, "reporter · asked again in the run's language")
    except ActivityError as err:
        if is_cancelled_exception(err):
            raise
        rewritten = reply.model_copy(update={"content": ""})
    better = rewritten.content.strip() and not is_echo(rewritten) and (rewritten.in_locale or 0) > reply.in_locale
    if better and (rewritten.in_locale or 0) >= IN_LOCALE_LIMIT:
        return rewritten
    box.warn(f"the report is not written in {language}: the reporter wrote it in another language twice")
    return rewritten if better else reply
