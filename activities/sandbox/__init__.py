"""Persistent Python sessions for the coder agent's ``run_python`` tool.

- ``base.py``: the ``Sandbox`` protocol every backend implements, and replay
  of a session's earlier cells;
- ``local.py``: ``LocalSandbox``, one isolated local process per session;
- ``driver.py``: the program inside a local session process;
- ``e2b.py``: ``E2BSandbox``, sessions in E2B's cloud sandboxes;
- ``remote.py`` and ``service.py``: the sandbox as a service of its own (no
  keys, no network), and the worker's client for it;
- ``activities.py``: the ``run_python`` and ``close_sandbox`` activities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from activities.sandbox.base import Sandbox

if TYPE_CHECKING:
    from infra.settings import Settings


def make_sandbox(settings: Settings) -> Sandbox:
    """The backend ``DEEPRESEARCH_SANDBOX`` asks for: ``e2b``, ``remote`` (the
    sandbox service), ``local`` (refuses to run code it cannot isolate) or
    ``local-unisolated`` (runs it anyway)."""
    if settings.sandbox == "e2b":
        from activities.sandbox.e2b import E2BSandbox

        return E2BSandbox(api_key=settings.e2b_api_key)
    if settings.sandbox == "remote":
        from activities.sandbox.remote import RemoteSandbox

        return RemoteSandbox(settings.sandbox_url or "")
    from activities.sandbox.local import LocalSandbox

    return LocalSandbox(allow_unisolated=settings.sandbox == "local-unisolated", hidden=[str(settings.data_dir)])
