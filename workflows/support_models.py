"""How a report's statements are supported: the shapes (contract: SPEC 3d).

The model activity classifies each statement of the reporter's reply
(``activities/support.py``) and returns them with their counts; the workflow
decides from the counts (``workflows/reply_checks.py``) and the result
carries the statements.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from workflows.model_base import Model

SupportClass = Literal["stated", "derived", "absent", "unsupported"]


class Basis(Model):
    """A figure a derived statement starts from, and the passage stating it."""

    figure: str
    url: str = ""
    passage: str = ""


class Statement(Model):
    model_config = ConfigDict(defer_build=True, serialize_by_alias=True, validate_by_name=True)

    text: str
    support: SupportClass
    # stated: the page and the passage that state it
    url: str | None = None
    passage: str | None = None
    # derived: the figures it starts from and the arithmetic
    basis: list[Basis] | None = Field(default=None, alias="from")
    arithmetic: str | None = None
    # unsupported, and carrying a figure or a name the material lacks: invention
    invented: bool = False
    # invented, where a passage saying the same thing (``url``, ``passage``) gives this figure instead
    contradicts: str | None = None


class SupportCounts(Model):
    """How many of a text's statements are of each class."""

    stated: int = 0
    derived: int = 0
    absent: int = 0
    unsupported: int = 0
    invented: int = 0  # of the unsupported: with a figure or a name the material lacks

    @property
    def judged(self) -> int:
        """Statements that claim something (a statement that the material
        lacks something claims nothing to hold)."""
        return self.stated + self.derived + self.unsupported

    def supported_share(self) -> float | None:
        """(stated + derived) / judged; None when none is judged."""
        return (self.stated + self.derived) / self.judged if self.judged else None

    def invented_share(self) -> float | None:
        return self.invented / self.judged if self.judged else None
