"""Recorded histories replay against the current workflow code.

A change to workflow logic that would break running workflows fails here.
Re-record (after a deliberate, versioned change) with:
    RECORD_HISTORIES=1 ./dr test tests/test_workflow.py tests/test_crash.py tests/test_continue_as_new.py \
        tests/test_hostile_model.py tests/test_nothing_lost.py tests/test_side_outputs.py \
        tests/test_research_goes_on.py tests/test_schedules.py tests/test_eval_e2e.py tests/test_recheck.py \
        tests/test_evidence.py \
        tests/test_echoing_model.py tests/test_faults.py tests/test_report_support.py tests/test_steering.py \
        tests/test_ownership.py tests/test_user_limits.py tests/test_rate_limits.py tests/test_evidence_ahead.py
(Record only new histories: a history recorded by the old code is what
proves the new code can still replay it.)
"""

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from infra.converter import data_converter
from workflows.deep_research import DeepResearch
from workflows.eval_suite import EvalSuite
from workflows.follow_up import FollowUp
from workflows.podcast import Podcast
from workflows.prose import Prose
from workflows.slides import Slides

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_there_are_histories_to_replay():
    assert (
        {
            "happy_path",
            "edited_plan",
            "greeting",
            "plan_failed",
            "crash_recovery",
            "continued_between_steps",
            "continued_inside_steps",
            "long_pages_read_in_parts",
            "context_window_learned",
            "podcast",
            "slides",
            "prose",
            "follow_up_thread",
            "continued_from_run",
            "eval_suite_resumed",
            "prose_handed_off",
            "question_as_plan",
            "failing_coder_closed",
            "cancelled",  # recorded before the cancelled-phase patch
            "cancelled_phase",
            "rechecked_changed",  # a scheduled run that re-checked its sources and found a change
            "rechecked_unchanged",  # one that found none: no model call
            "scheduled_before_recheck",  # a scheduled run recorded before the recheck-sources patch
            "evidence_gathered",  # a research step that read before its first turn (recorded before its lead was followed)
            "lead_followed",  # a research step that followed the lead its pages gave, beside its agent's loop
            "nothing_read",  # a run whose every search failed: findings and report say so
            "enough_context_researched",  # "enough context" with nothing read: researched anyway
            "reporter_failed_with_passages",  # the reporter failed: findings and the passages they rest on
            "reporter_echoed",
            "reporter_failed",
            "researcher_echoed",
            "coordinator_echoed",
            "report_language_asked_again",
            "rate_limit_waited",  # a model call on the model queue, refused (429), waited out, called again
            "report_unsupported",  # a report stating what its material does not say, twice: the findings and pages
            "report_traced",  # a strong report's statements traced (stated, derived, absent), shipped as written
            "report_invented_marked",  # half invention twice: kept, its unsupported statements marked
            "steered_mid_step",  # two steers told a running step, then the steps not started revised (workflows/steering.py)
            "steered_during_report",  # a steer while the reporter wrote: the report written again with it
            "steered_page_read",  # a steer with a page: read by the workflow, its passages in the evidence and report
            "owned_run",  # a run with an owner, shared; its plan accepted by a named user ({"feedback", "by"})
            "owner_limits_waited",  # a run held back by its owner's concurrent-runs limit, then run
            "cancelled_again",  # every call refused (waits backing off); cancelled, then again while reporting
            "evidence_beside_first_turn",  # a researcher's first turn beside its step's reading, not after it
            "evidence_asked_again",  # a model that answered before it saw its passages, asked again; the next step read first
            "evidence_gathered_ahead",  # the steps read while the plan waited for review; an edit reread only what it changed
            "report_stated_nothing",  # a report stating nothing, twice: the findings (and the first with one-batch activations)
            "report_mostly_invented",  # a first report mostly unsupported, one statement invented: asked again, then the findings
            "report_stated_by_page_read",  # a statement no passage shown held, stated by a page the run read
            "report_only_absent",  # a first report only saying what the findings lack: asked again, the faithful second ships
            "report_many_invented_marked",  # five invented of 25 beside 20 copied: asked again, then kept with them marked
        }
        <= {p.stem for p in HISTORIES}
    )


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays(path: Path, tmp_path: Path):
    replayer = Replayer(
        workflows=[DeepResearch, Podcast, Slides, Prose, FollowUp, EvalSuite], data_converter=data_converter(tmp_path)
    )
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    await replayer.replay_workflow(history)
