"""The search attributes that let the Temporal UI (and ``deepresearch list``,
and the desk) list and filter runs by phase, title, owner and who a run is
shared with, and their registration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workflows.models import OWNER_ATTRIBUTE, PHASE_ATTRIBUTE, SHARED_ATTRIBUTE, TITLE_ATTRIBUTE

if TYPE_CHECKING:
    from temporalio.common import SearchAttributePair
    from temporalio.service import ServiceClient

# Registered at start so the Temporal UI can list and filter runs by them.
SEARCH_ATTRIBUTES = {
    PHASE_ATTRIBUTE.name: "Keyword",
    TITLE_ATTRIBUTE.name: "Text",
    OWNER_ATTRIBUTE.name: "Keyword",
    SHARED_ATTRIBUTE.name: "KeywordList",
}
OWNER_ATTRIBUTES = frozenset({OWNER_ATTRIBUTE.name, SHARED_ATTRIBUTE.name})


async def search_attributes_ready(service: ServiceClient, namespace: str) -> frozenset[str]:
    """Which of our search attributes the server knows (empty: none, falsy);
    registers the missing ones when it lets us (dev server, self-hosted with
    operator rights). A server set up by hand with only the first two (phase
    and title) still gets those. ``service``: the full client's
    ``service_client`` or the quick way's."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import (
        AddSearchAttributesRequest,
        ListSearchAttributesRequest,
    )

    try:
        known = await service.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    except Exception:  # no rights (e.g. Temporal Cloud without setup): run without them
        return frozenset()
    have = frozenset(k for k in SEARCH_ATTRIBUTES if k in known.custom_attributes)
    missing = {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in have}
    if not missing:
        return have
    kinds = {
        "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
        "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
    }
    try:
        await service.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes={k: kinds[v] for k, v in missing.items()})
        )
    except Exception:  # no rights to add: those it has
        return have
    return frozenset(SEARCH_ATTRIBUTES)


def owner_pairs(ready: frozenset[str], owner: str | None, shared_with: list[str]) -> list[SearchAttributePair]:
    """A run's owner and sharing as search attributes, when the server knows them."""
    from temporalio.common import SearchAttributePair

    if not owner or not OWNER_ATTRIBUTES <= ready:
        return []
    pairs: list[SearchAttributePair] = [SearchAttributePair(OWNER_ATTRIBUTE, owner)]
    if shared_with:
        pairs.append(SearchAttributePair(SHARED_ATTRIBUTE, list(shared_with)))
    return pairs


def owner_keywords(ready: frozenset[str], owner: str | None, shared_with: list[str]) -> dict[str, str | list[str]]:
    """The same as plain values, for the quick way's start (client/quick.py)."""
    return {pair.key.name: pair.value for pair in owner_pairs(ready, owner, shared_with)}
