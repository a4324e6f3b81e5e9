"""Starting research runs: with the SDK's full client (``run``, the desk,
tests), or the quick way (``start``, client/quick.py). Both send the same
workflow input, memo, Temporal UI summary and details, and phase."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from temporalio.common import SearchAttributePair, TypedSearchAttributes

from infra.search_attributes import owner_keywords, owner_pairs, search_attributes_ready
from workflows.models import PHASE_ATTRIBUTE, ResearchInput, ResearchResult

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

    from infra.connection import Connection

WORKFLOW_TYPE = "DeepResearch"
FIRST_PHASE = "coordinating"


def new_workflow_id() -> str:
    return f"research-{uuid.uuid4().hex[:8]}"


async def start_research(
    client: Client, conn: Connection, request: ResearchInput, workflow_id: str
) -> WorkflowHandle[Any, ResearchResult]:
    return await client.start_workflow(
        WORKFLOW_TYPE,
        wire_input(request),
        id=workflow_id,
        task_queue=conn.task_queue,
        result_type=ResearchResult,
        search_attributes=await run_attributes(client, conn, request),
        static_summary=run_summary(request),
        memo=run_memo(request),
        static_details=run_details(request),
    )


async def run_attributes(client: Client, conn: Connection, request: ResearchInput) -> TypedSearchAttributes:
    """A new run's search attributes: its first phase, its owner and who it
    is shared with (those the server knows)."""
    ready = await search_attributes_ready(client.service_client, conn.namespace)
    if not ready:
        return TypedSearchAttributes.empty
    pairs = [SearchAttributePair(PHASE_ATTRIBUTE, FIRST_PHASE)] if PHASE_ATTRIBUTE.name in ready else []
    return TypedSearchAttributes(pairs + owner_pairs(ready, request.owner, request.shared_with))


def wire_input(request: ResearchInput) -> dict[str, Any]:
    """The workflow input as sent: the options the user set, not the defaults,
    so a newer CLI starts runs on workers of an older version (whose input
    model refuses fields it does not know) unless a new option is used."""
    return request.model_dump(mode="json", exclude_defaults=True)


async def start_research_quickly(conn: Connection, request: ResearchInput, workflow_id: str) -> None:
    """``start_research`` without the SDK's full client or the converter;
    raises ``quick.NotQuick`` (before starting anything) when it needs them."""
    from client import quick

    service = await quick.service(conn)
    ready = await search_attributes_ready(service, conn.namespace)
    await quick.start(
        service,
        conn,
        WORKFLOW_TYPE,
        workflow_id,
        wire_input(request),
        memo=run_memo(request),
        summary=run_summary(request),
        details=run_details(request),
        keywords=({PHASE_ATTRIBUTE.name: FIRST_PHASE} if PHASE_ATTRIBUTE.name in ready else {})
        | owner_keywords(ready, request.owner, request.shared_with),
    )


async def check_continue_from(client: Client, conn: Connection, request: ResearchInput) -> str | None:
    """``--continue-from ID`` names a completed research run with a report:
    one clear line (CliError) before anything starts, otherwise. A cancelled
    run counts (its partial report): the note returned says so, to be shown."""
    if not request.continue_from:
        return None
    from client.errors import CliError
    from infra.finished_runs import NoReport, finished_research

    try:
        earlier = await finished_research(client, request.continue_from, conn.namespace)
    except NoReport as err:
        raise CliError(str(err)) from None
    if earlier.status == "cancelled":
        return (
            f"note: run {request.continue_from} was cancelled; this run builds on its partial report "
            "(what it had found when it stopped)"
        )
    return None


def run_summary(request: ResearchInput) -> str:
    """The question on one line, as the Temporal UI lists the run."""
    return " ".join(request.question.split())[:200]


def run_memo(request: ResearchInput) -> dict[str, str]:
    """What ``list`` and the desk show of a run before it has a title."""
    return {"question": request.question[:1000]}


def run_details(request: ResearchInput) -> str:
    """The run's settings, as the Temporal UI shows them beside the question."""
    changed = request.model_dump(exclude_defaults=True, exclude={"question"})
    lines = [f"**Question:** {request.question}"]
    lines += [f"- `{name}`: {value}" for name, value in changed.items()]
    return "\n".join(lines)[:2000]
