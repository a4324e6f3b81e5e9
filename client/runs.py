"""Starting research runs."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from infra.connection import Connection
from infra.search_attributes import search_attributes_ready
from workflows.models import PHASE_ATTRIBUTE, ResearchInput, ResearchResult

WORKFLOW_TYPE = "DeepResearch"


def new_workflow_id() -> str:
    return f"research-{uuid.uuid4().hex[:8]}"


async def start_research(
    client: Client, conn: Connection, request: ResearchInput, workflow_id: str
) -> WorkflowHandle[Any, ResearchResult]:
    attributes = (
        TypedSearchAttributes([SearchAttributePair(PHASE_ATTRIBUTE, "coordinating")])
        if await search_attributes_ready(client, conn.namespace)
        else TypedSearchAttributes.empty
    )
    return await client.start_workflow(
        WORKFLOW_TYPE,
        request,
        id=workflow_id,
        task_queue=conn.task_queue,
        result_type=ResearchResult,
        search_attributes=attributes,
        static_summary=" ".join(request.question.split())[:200],
        memo={"question": request.question[:1000]},
        static_details=run_details(request),
    )


def run_details(request: ResearchInput) -> str:
    """The run's settings, as the Temporal UI shows them beside the question."""
    changed = request.model_dump(exclude_defaults=True, exclude={"question"})
    lines = [f"**Question:** {request.question}"]
    lines += [f"- `{name}`: {value}" for name, value in changed.items()]
    return "\n".join(lines)[:2000]
