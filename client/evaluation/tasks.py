"""Task files of ``deepresearch eval`` (SPEC 3b): one JSON object per line,
validated line by line; a bad line is one error naming ``file:line``.
``resources`` are relative to the folder holding the task file."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from client.errors import CliError
from workflows.clean import split_lines
from workflows.eval_models import EvalTask
from workflows.models import ResearchInput

MAX_TASK_FILE = 10_000_000  # bytes


def _problems(err: ValidationError) -> str:
    def where(loc: tuple) -> str:
        return ".".join(str(part) for part in loc if not str(part).startswith(("str", "Number")))

    return "; ".join(f"{where(e['loc']) or 'line'}: {e['msg']}" for e in err.errors()[:3])


def parse_task(text: str, folder: Path) -> EvalTask:
    """One line of a task file; ValueError with the problem (no position)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    try:
        task = EvalTask.model_validate(data)
    except ValidationError as err:
        raise ValueError(_problems(err)) from None
    for kind in (task.facts, task.avoid):
        ids = [fact.id for fact in kind]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"fact id {twice[0]!r} appears twice")
    options = dict(task.options)
    if "question" in options or "resources" in options:
        raise ValueError("options: give the question and resources as the task's own fields")
    try:
        ResearchInput(question=task.question, **options)
    except ValidationError as err:
        raise ValueError(f"options: {_problems(err)}") from None
    return task.model_copy(update={"resources": [inside(resource, folder) for resource in task.resources]})


def inside(resource: str, folder: Path) -> str:
    """A task's resource as an absolute path inside ``folder`` (the task file's,
    resolved): ValueError for one that is absent or leads outside it, by an
    absolute path, ``..`` or a symbolic link. A folder inside is fine: the
    indexer reads a link in it only when it points inside it too."""
    shown = repr(resource[:200])
    try:
        path = (folder / resource).resolve()
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL
        raise ValueError(f"resource {shown} cannot be read") from None
    if path != folder and not path.is_relative_to(folder):
        raise ValueError(f"resource {shown} leads outside the task file's folder {folder} (to {path}): not read")
    if not path.exists():
        raise ValueError(f"resource {shown} not found (looked in {folder})")
    return str(path)


def load_tasks(path: Path, only: list[str] | None = None) -> list[EvalTask]:
    """The tasks of a task file (only those named in ``only``, in file order)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_TASK_FILE:
            raise CliError(f"{path}: larger than {MAX_TASK_FILE // 1_000_000} MB; is it a task file?")
        text = path.read_text(encoding="utf-8-sig")  # a byte order mark (Windows editors) is not part of line 1
    except FileNotFoundError:
        raise CliError(f"no such task file: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise CliError(f"cannot read the task file {path}: {err}") from None
    folder = path.resolve().parent
    tasks: list[EvalTask] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(split_lines(text), 1):  # JSON may hold U+2028 and the like unescaped
        if not line.strip():
            continue
        try:
            task = parse_task(line, folder)
        except ValueError as err:
            raise CliError(f"{path}:{number}: {err}") from None
        if task.id in seen:
            raise CliError(f"{path}:{number}: task id {task.id!r} is already used on line {seen[task.id]}")
        seen[task.id] = number
        tasks.append(task)
    if not tasks:
        raise CliError(f"{path}: no tasks in the file")
    if only:
        unknown = [name for name in only if name not in seen]
        if unknown:
            raise CliError(f"no task {unknown[0]!r} in {path} (its tasks: {', '.join(seen)})")
        tasks = [task for task in tasks if task.id in only]
    return tasks


def parse_only(value: str | None) -> list[str] | None:
    """``--only a,b`` as a list of task ids (None: every task)."""
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise CliError("--only names no task")
    return names
