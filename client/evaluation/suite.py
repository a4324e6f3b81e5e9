"""Preparing an evaluation suite: the task file and corpus the user named (or
the built-in ones), each fact's source documents, the worker's settings
pointed at the offline web, and the suite's deterministic workflow id."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from client.errors import CliError
from client.evaluation.corpus import Document, load_corpus
from client.evaluation.tasks import load_tasks, parse_only
from client.options import OPTION_OF_FIELD, RUN_OPTIONS
from infra.eval_score import Text, source_paths
from infra.settings import Settings, context_window_for
from workflows.eval_models import EvalSuiteInput, EvalTask

BUILTIN = Path(__file__).resolve().parent / "builtin"
JUDGE_ROLE = "judge"
# The roles a research run uses (what --json's "models" names).
RUN_ROLES = ("coordinator", "planner", "researcher", "coder", "analyst", "reporter")


@dataclass
class Suite:
    name: str
    tasks: list[EvalTask]
    corpus_folder: Path
    documents: list[Document]


def locate(args: argparse.Namespace) -> tuple[str, Path, Path]:
    """(suite name, task file, corpus folder) from --suite / --tasks / --corpus."""
    if args.tasks or args.corpus:
        if args.suite:
            raise CliError("give either --suite or --tasks with --corpus, not both")
        if not (args.tasks and args.corpus):
            raise CliError("--tasks and --corpus go together: a task file and the corpus folder it asks about")
        return Path(args.tasks).stem, Path(args.tasks), Path(args.corpus)
    name = args.suite or "builtin"
    if name != "builtin":
        raise CliError(f"no suite named {name!r}: the one built in is 'builtin' (or give --tasks and --corpus)")
    tasks, corpus = BUILTIN / "tasks.jsonl", BUILTIN / "corpus"
    if not tasks.is_file() or not corpus.is_dir():
        raise CliError(f"the built-in suite is not installed here (no {tasks}); give --tasks and --corpus")
    return "builtin", tasks, corpus


def with_sources(task: EvalTask, documents: dict[str, Text]) -> EvalTask:
    """The task with each fact's source documents named (those the task file
    gives, else the documents that hold an accepted string)."""
    facts = [fact.model_copy(update={"sources": source_paths(fact, documents)}) for fact in task.facts]
    return task.model_copy(update={"facts": facts})


def load_suite(args: argparse.Namespace) -> Suite:
    name, task_file, corpus_folder = locate(args)
    tasks = load_tasks(task_file, parse_only(args.only))
    try:
        documents = load_corpus(corpus_folder)
    except ValueError as err:
        raise CliError(str(err)) from None
    texts = {document.path: Text(f"{document.title}\n{document.text}") for document in documents}
    known = set(texts)
    for task in tasks:
        for fact in task.facts:
            missing = [path for path in fact.sources if path not in known]
            if missing:
                raise CliError(f"{task_file}: task {task.id}, fact {fact.id}: no document {missing[0]!r} in the corpus")
    return Suite(name, [with_sources(task, texts) for task in tasks], corpus_folder, documents)


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The run options given on the command line (every task's defaults)."""
    from pydantic import ValidationError

    from workflows.models import ResearchInput

    given = {field: getattr(args, field) for _, field, _ in RUN_OPTIONS if hasattr(args, field)}
    given.pop("auto_accept_plan", None)  # always accepted
    try:
        ResearchInput(question="check", **given)
    except ValidationError as err:
        problems = "; ".join(f"{OPTION_OF_FIELD.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}" for e in err.errors())
        raise CliError(f"invalid run options: {problems}") from None
    return given


def eval_settings(base: Settings, web_url: str, judge_model: str | None) -> Settings:
    """The user's model settings, with search and crawling on the offline web
    and nowhere else, no MCP servers (and the judge's model when one is asked for)."""
    models, windows = dict(base.models), dict(base.context_windows)
    if judge_model:
        models[JUDGE_ROLE] = judge_model
        given = os.environ.get("DEEPRESEARCH_CONTEXT_WINDOW_JUDGE") or os.environ.get("DEEPRESEARCH_CONTEXT_WINDOW")
        windows[JUDGE_ROLE] = int(given) if (given or "").isdigit() else context_window_for(judge_model)
    return dataclasses.replace(
        base,
        models=models,
        context_windows=windows,
        search_engine="tavily",
        tavily_api_key="offline-corpus",
        tavily_base_url=web_url,
        include_domains=(),
        exclude_domains=(),
        allow_private_urls=True,  # the offline web is on loopback ...
        crawl_only=(web_url,),  # ... and the only web the runs may read
        mcp=False,  # the user's MCP servers could reach beyond it
    )


def models_used(settings: Settings, judge: bool) -> dict[str, str]:
    roles = RUN_ROLES + ((JUDGE_ROLE,) if judge else ())
    return {role: settings.model_for(role) for role in roles}


def suite_id(suite: Suite, request: EvalSuiteInput, models: dict[str, str], base_url: str | None) -> str:
    """The same suite, corpus, options and models give the same id: running
    the same command again attaches to the suite (finished or not)."""
    digest = hashlib.sha256()
    for document in suite.documents:
        digest.update(f"{document.path}\0{document.text}\0".encode())
    body = {"input": request.model_dump(mode="json"), "models": models, "base_url": base_url or ""}
    digest.update(json.dumps(body, sort_keys=True).encode())
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", suite.name)[:40].strip("-") or "suite"
    return f"eval-{name}-{digest.hexdigest()[:10]}"


def preferred_port(workflow_id: str) -> int:
    """The offline web's port for this suite: the same on every attach, so
    pages a run found before a restart are still where it found them. Below
    Linux's ephemeral range (32768 and up), so an outgoing connection's own
    port rarely holds it; when something does, the web takes any free port
    (scores match documents by path, whatever the port)."""
    return 20_000 + int(hashlib.sha256(workflow_id.encode()).hexdigest()[:8], 16) % 12_000
