"""The base of every data model (``workflows/models.py`` re-exports it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from workflows.clean import clean_deep


class Model(BaseModel):
    """Base of every data model: strings are cleaned on the way in
    (``workflows.clean``), so whatever a model, a page or a client sent can
    always be serialised again. Schemas are built on first use, so a command
    that reads one status does not build the other forty."""

    model_config = ConfigDict(defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _clean_strings(cls, data: Any) -> Any:
        return clean_deep(data) if isinstance(data, dict) else data


def build_schemas() -> None:
    """Build every model's schema now. They are deferred so that a CLI command
    builds only the few it reads; the worker calls this at start, so no
    workflow task pays for a build or runs one inside the sandbox."""
    pending = list(Model.__subclasses__())
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        model.model_rebuild()
