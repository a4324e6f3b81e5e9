"""Persistent Python sessions for the coder agent's ``run_python`` tool.

- ``base.py``: the ``Sandbox`` protocol every backend implements, and replay
  of a session's earlier cells;
- ``local.py``: ``LocalSandbox``, one isolated local process per session;
- ``driver.py``: the program inside a local session process;
- ``e2b.py``: ``E2BSandbox``, sessions in E2B's cloud sandboxes;
- ``activities.py``: the ``run_python`` and ``close_sandbox`` activities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from activities.sandbox.base import Sandbox

if TYPE_CHECKING:
    from infra.settings import Settings


def make_sandbox(settings: Settings) -> Sandbox:
    """The backend the settings ask for: E2B (``DEEPRESEARCH_SANDBOX=e2b``) or local."""
    if settings.sandbox == "e2b":
        from activities.sandbox.e2b import E2BSandbox

        return E2BSandbox(api_key=settings.e2b_api_key)
    from activities.sandbox.local import LocalSandbox

    return LocalSandbox()
