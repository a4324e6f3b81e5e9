"""`deepresearch demo [QUESTION] [--auto-accept]`: the whole flow with no key
and no network.

The scripted demo model (client/demo/model.py) plays every role on loopback;
the built-in evaluation corpus (an invented province, client/evaluation/builtin)
is the web, served with a search engine on loopback; Python runs in the local
sandbox (client/demo/backend.py sets all this up, as for `worker --demo`,
`ui --demo` and `eval --demo`). Everything else is what `run` does
(client/commands/run.py, the same code path): the embedded Temporal dev server
when none is reachable, a worker in this process (on its own task queue, so no
other worker takes the run), live progress, the plan review at the terminal,
the report printed and saved.

The process's own model and search settings are replaced for the duration,
never read: a key in OPENAI_API_KEY or TAVILY_API_KEY is neither used nor sent.
"""

from __future__ import annotations

import argparse

from client.demo.backend import (  # noqa: F401 - the demo's names, where tests and hints look for them
    CORPUS,
    DEMO_TASK_QUEUE,
    SCRIPTED,
    demo_backend,
    demo_environment,
    ignored_pace,
    replaced_environment,
)
from client.display import make_console

DEFAULT_QUESTION = "By what percentage did Olvane Instruments' revenue grow from 2021 to 2023?"
START_NOTE = f"DEMO: {SCRIPTED} The workflow, search, crawling, code sandbox and citation checks are the real ones."
END_NOTE = (
    "That was the demo: the report above was written by the scripted demo model, not a language model. "
    "For real research set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server) and use `{cli} run`."
)


def steer_hint(cli: str, run_id: str, pace: float) -> str:
    """How to steer the demo's run while it researches (from another terminal)."""
    slower = "" if pace else f" (`{cli} demo --pace 3` gives each research turn 3 s: time to type it)"
    return (
        f'Steer it while it researches, from another terminal: `{cli} steer {run_id} "add a step on the 2022 '
        f'figures"`{slower}; the scripted planner adds the step, and the report opens with the guidance it followed.'
    )


def next_steps(cli: str, run_id: str) -> str:
    """What a keyless user can do next with the demo's run: every command
    named works without a key."""
    run = run_id
    return (
        f"Still without a key: `{cli} list`, `{cli} status {run}` and `{cli} result {run}` read the demo's runs "
        f"(from the data dir, when no server runs); for follow-up questions start `{cli} worker --demo` in another "
        f"terminal, then `{cli} ask {run} QUESTION`; the research desk: `{cli} ui --demo`; "
        f"an evaluation: `{cli} eval --demo`."
    )


async def main(args: argparse.Namespace) -> int:
    from client.commands import run
    from client.runs import new_workflow_id
    from infra.errors import cli_name

    ignored = ignored_pace()  # not a rate: refused before anything starts
    console = make_console()
    args.question = (args.question or "").strip() or DEFAULT_QUESTION
    args.task_queue = getattr(args, "task_queue", None) or DEMO_TASK_QUEUE
    args.worker, args.attach = True, None
    for name in ("output", "format", "id"):
        setattr(args, name, getattr(args, name, None))
    args.id = args.id or new_workflow_id()  # named in the next steps printed at the end
    console.print(START_NOTE, style="bold yellow", markup=False)
    console.print(f"question: {args.question}", markup=False)
    if ignored:
        console.print(ignored, markup=False)
    pace = getattr(args, "pace", 0.0) or 0.0
    console.print(steer_hint(cli_name(), args.id, pace), markup=False)
    with demo_backend(pace=pace):
        code = await run.main(args)
    console.print(END_NOTE.format(cli=cli_name()), style="bold yellow", markup=False)
    console.print(next_steps(cli_name(), args.id), markup=False)
    return code
