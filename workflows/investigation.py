"""Step 2 of the flow, the background investigation: index the user's local
documents (if any) and run one web search on the topic before planning; what
it finds is extra context for the planner."""

from __future__ import annotations

from workflows.box import Box


async def investigate(box: Box) -> str:
    r, found = box.request, ""
    if r.resources:
        indexed = await box.calls.index_resources(r.resources)
        found += f"## Local documents\n{indexed}\n\n"
    if r.enable_background_investigation:
        found += (await box.calls.search(box.state.topic, "investigation")).content
    return found
