"""What a request to the desk may set on a run: an allow-list of
``ResearchInput`` fields, and local documents only from the folders the
operator gave the desk (``--resources-dir``, ``DEEPRESEARCH_UI_RESOURCES``),
named relative to them. A request never names a path on the server."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath

from pydantic import ValidationError

from workflows.models import ResearchInput

RESOURCES_ENV = "DEEPRESEARCH_UI_RESOURCES"
MAX_RESOURCES = 50
MAX_NAME_CHARS = 1_000

# The run settings a page may choose; anything else in a request is refused.
DESK_FIELDS = (
    "locale",
    "max_plan_iterations",
    "max_step_num",
    "max_search_results",
    "auto_accept_plan",
    "enable_background_investigation",
    "enable_clarification",
    "max_clarification_rounds",
    "enable_deep_thinking",
    "report_style",
    "agent_max_turns",
    "parallel_research",
    "max_parallel_steps",
    "review_timeout_hours",
    "on_review_timeout",
    "token_budget",
    "evidence_pages",
    "evidence_tokens",
    "resources",
    "shared_with",  # who else may read it (the owner is who asks: never from the request)
)


class InputProblem(ValueError):
    """One line for the page: what in the request cannot be used."""


def resource_dirs(given: Sequence[Path | str] = (), setting: str | None = None) -> list[Path]:
    """The folders local documents may come from: ``given`` (the command line)
    and the setting (folders separated by ``os.pathsep``), each resolved; a
    missing one is an error."""
    folders = [*given, *(p for p in (setting or "").split(os.pathsep) if p.strip())]
    resolved: list[Path] = []
    for folder in folders:
        path = Path(folder).expanduser().resolve()
        if not path.is_dir():
            raise InputProblem(f"the resources folder {str(folder)!r} is not a folder")
        if path not in resolved:
            resolved.append(path)
    return resolved


def run_input(body: object, folders: Sequence[Path]) -> ResearchInput:
    """The run a request asks for, or ``InputProblem``."""
    if not isinstance(body, dict):
        raise InputProblem("send the run's settings as a JSON object")
    question = str(body.get("question") or "").strip()
    if not question:
        raise InputProblem("the question is empty: type what you want researched")
    unknown = sorted(str(k) for k in body if k != "question" and k not in DESK_FIELDS)
    if unknown:
        raise InputProblem(
            f"the desk does not take {', '.join(map(repr, unknown[:5]))}: it takes question, {', '.join(DESK_FIELDS)}"
        )
    settings = {k: v for k, v in body.items() if k in DESK_FIELDS and v not in (None, "", [])}
    if "resources" in settings:
        settings["resources"] = resolve_resources(settings["resources"], folders)
    try:
        return ResearchInput(question=question, **settings)
    except ValidationError as err:
        problem = err.errors()[0]
        raise InputProblem(f"invalid run settings: {'.'.join(map(str, problem['loc']))}: {problem['msg']}") from None


def resolve_resources(names: object, folders: Sequence[Path]) -> list[str]:
    """Each name, relative to the resources folders, as the absolute path of a
    file or folder inside one of them (the first that has it)."""
    if not folders:
        raise InputProblem(
            "this desk takes no local documents: start it with --resources-dir DIR "
            f"(or set {RESOURCES_ENV}) and name files inside that folder"
        )
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputProblem("resources: send a list of file or folder names inside the resources folder")
    if len(names) > MAX_RESOURCES:
        raise InputProblem(f"resources: at most {MAX_RESOURCES} names")
    return [_inside(name, folders) for name in names]


def _inside(name: str, folders: Sequence[Path]) -> str:
    shown = repr(name[:200])
    if not name.strip() or len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise InputProblem(f"resources: {shown} is not a file name")
    if PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute() or name.startswith("~"):
        raise InputProblem(f"resources: {shown} is a path on the server; name a file inside the resources folder")
    for root in folders:
        try:
            candidate = (root / name).resolve()
        except (OSError, RuntimeError):  # a link loop
            raise InputProblem(f"resources: {shown} cannot be read") from None
        if candidate != root and not candidate.is_relative_to(root):
            raise InputProblem(f"resources: {shown} leads outside the resources folder")
        if candidate.exists():
            return str(candidate)
    raise InputProblem(f"resources: there is no {shown} in the resources folder")
