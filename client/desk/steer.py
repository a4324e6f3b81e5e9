"""The desk's steer box: ``POST /api/runs/{id}/steer`` with ``{"note": …,
"urls": […]}`` sends the run the ``steer`` update (workflows/steering.py), its
wait bounded as the CLI's (client/updates.py). The answer is the update's
``{"accepted", "applies_at", "message"}``; a refusal is one line (409), a run
that has ended says to ask its report instead."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from client.desk.problem import Problem
from client.errors import rejection_reason
from client.updates import execute_update

if TYPE_CHECKING:
    from temporalio.client import Client

ENDED = "the run has ended: a steer can no longer reach it; ask a follow-up question about its report instead"


async def steer_run(client: Client, run_id: str, body: Any, by: str | None = None) -> dict:
    """The update's answer, naming ``by`` as who steers; Problem with one
    line when it cannot be sent or is refused."""
    if not isinstance(body, dict):
        raise Problem('send {"note": "…", "urls": ["https://…"]}')
    note, urls = body.get("note"), body.get("urls") or []
    if not isinstance(note, str) or not note.strip():
        raise Problem("the note is empty: say what the research should do differently")
    if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
        raise Problem('"urls" must be a list of web addresses')
    steer = {"note": note.strip(), "urls": [url.strip() for url in urls if url.strip()]}
    if by:
        steer["by"] = by
    try:
        return await execute_update(client, run_id, "steer", [steer], result_type=dict)
    except WorkflowUpdateFailedError as err:
        raise Problem(rejection_reason(err), 409) from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND and "completed" in err.message:
            raise Problem(ENDED, 409) from None
        raise
