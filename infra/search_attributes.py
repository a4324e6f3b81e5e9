"""The search attributes that let the Temporal UI (and ``deepresearch list``)
list and filter runs by phase and title, and their registration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workflows.models import PHASE_ATTRIBUTE, TITLE_ATTRIBUTE

if TYPE_CHECKING:
    from temporalio.service import ServiceClient

# Registered at start so the Temporal UI can list and filter runs by them.
SEARCH_ATTRIBUTES = {PHASE_ATTRIBUTE.name: "Keyword", TITLE_ATTRIBUTE.name: "Text"}


async def search_attributes_ready(service: ServiceClient, namespace: str) -> bool:
    """Whether the server knows our search attributes; registers them when it
    lets us (dev server, self-hosted with operator rights). ``service``: the
    full client's ``service_client`` or the quick way's."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import (
        AddSearchAttributesRequest,
        ListSearchAttributesRequest,
    )

    try:
        known = await service.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
        missing = {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in known.custom_attributes}
        if missing:
            kinds = {
                "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
                "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
            }
            await service.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=namespace,
                    search_attributes={k: kinds[v] for k, v in missing.items()},
                )
            )
        return True
    except Exception:  # no rights (e.g. Temporal Cloud without setup): run without them
        return False
