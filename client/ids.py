"""What a workflow id says: a podcast's or a deck's id is its run's id with
``-podcast`` or ``-slides``; a prose rewrite's starts with ``prose-``. Any
other id is a research run's (``research-…`` unless the user chose it)."""

from __future__ import annotations

SIDE_SUFFIXES = ("-podcast", "-slides", "-ask")  # -ask: the run's follow-up thread
PROSE_PREFIX = "prose-"


def thread_id(run_id: str) -> str:
    """The id of a run's follow-up thread (workflow ``FollowUp``)."""
    return f"{run_id}-ask"


def side_id(run_id: str, kind: str) -> str:
    """The id of a run's podcast or slides."""
    return f"{run_id}-{kind}"


def may_be_side_output(workflow_id: str) -> bool:
    """Whether the id has a side output's shape (a run's own id may have it too:
    ask Temporal for the workflow type to be sure)."""
    return workflow_id.endswith(SIDE_SUFFIXES) or workflow_id.startswith(PROSE_PREFIX)


def owner(workflow_id: str) -> str:
    """The run a podcast or deck belongs to; any other id is its own."""
    return next((workflow_id[: -len(s)] for s in SIDE_SUFFIXES if workflow_id.endswith(s)), workflow_id)
