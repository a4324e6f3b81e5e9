"""`deepresearch demo [QUESTION] [--auto-accept]`: the whole flow with no key
and no network.

The scripted demo model (client/demo/model.py) plays every role on loopback;
the built-in evaluation corpus (an invented province, client/evaluation/builtin)
is the web, served with a search engine on loopback; Python runs in the local
sandbox. Everything else is what `run` does (client/commands/run.py, the same
code path): the embedded Temporal dev server when none is reachable, a worker
in this process (on its own task queue, so no other worker takes the run),
live progress, the plan review at the terminal, the report printed and saved.

The process's own model and search settings are replaced for the duration,
never read: a key in OPENAI_API_KEY or TAVILY_API_KEY is neither used nor sent.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from client.display import make_console

DEMO_TASK_QUEUE = "deep-research-demo"
DEFAULT_QUESTION = "By what percentage did Olvane Instruments' revenue grow from 2021 to 2023?"
CORPUS = Path(__file__).resolve().parent.parent / "evaluation" / "builtin" / "corpus"
DEMO_KEY = "demo-key-never-leaves-loopback"
# Settings that would send the demo elsewhere or change how it runs: unset for its duration.
CLEARED_PREFIXES = ("DEEPRESEARCH_MODEL_", "DEEPRESEARCH_CONTEXT_WINDOW", "DEEPRESEARCH_SEARCH_", "OTEL_")
CLEARED = (
    "E2B_API_KEY",
    "DEEPRESEARCH_SANDBOX_URL",
    "DEEPRESEARCH_TOOL_CALLING",
    "DEEPRESEARCH_PAYLOAD_S3_BUCKET",
    "DEEPRESEARCH_TTS_BASE_URL",
    "SEARXNG_URL",
    "BRAVE_API_KEY",
    "BRAVE_BASE_URL",
    "ARXIV_BASE_URL",
)
START_NOTE = (
    "DEMO: the model is scripted. No language model and no network: a rule-based stand-in "
    "(client/demo/model.py) picks sentences from an offline corpus about Vellmark, a province invented "
    "for this project, served on loopback with its own search engine. The workflow, search, crawling, "
    "code sandbox and citation checks are the real ones."
)
END_NOTE = (
    "That was the demo: the report above was written by the scripted demo model, not a language model. "
    "For real research set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server) and use `{cli} run`."
)


def demo_environment(model_url: str, web_url: str, mcp_config: Path) -> dict[str, str]:
    """What the demo sets: the model, search and crawling all on loopback; no
    MCP server (an empty configuration) and no tracing export."""
    return {
        "DEEPRESEARCH_MCP_CONFIG": str(mcp_config),
        "OPENAI_API_KEY": DEMO_KEY,
        "OPENAI_BASE_URL": model_url,
        "DEEPRESEARCH_MODEL": "demo-scripted",
        "DEEPRESEARCH_SEARCH_ENGINE": "tavily",
        "TAVILY_API_KEY": DEMO_KEY,
        "TAVILY_BASE_URL": web_url,
        "DEEPRESEARCH_ALLOW_PRIVATE_URLS": "1",
        "DEEPRESEARCH_SANDBOX": "local",
        # loopback never through a proxy the environment may name
        "NO_PROXY": _no_proxy(os.environ.get("NO_PROXY")),
        "no_proxy": _no_proxy(os.environ.get("no_proxy")),
    }


def _no_proxy(value: str | None) -> str:
    hosts = [h.strip() for h in (value or "").split(",") if h.strip()]
    return ",".join(dict.fromkeys([*hosts, "127.0.0.1", "localhost"]))


@contextmanager
def replaced_environment(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set and the other model/search settings
    unset; restored afterwards."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name in CLEARED or name.startswith(CLEARED_PREFIXES):
            del os.environ[name]
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


async def main(args: argparse.Namespace) -> int:
    from client.commands import run
    from client.demo.model import DemoModel
    from client.evaluation.web import CorpusWeb
    from infra.errors import cli_name

    console = make_console()
    args.question = (args.question or "").strip() or DEFAULT_QUESTION
    args.task_queue = getattr(args, "task_queue", None) or DEMO_TASK_QUEUE
    args.worker, args.attach = True, None
    for name in ("output", "format", "id"):
        setattr(args, name, getattr(args, name, None))
    console.print(START_NOTE, style="bold yellow", markup=False)
    console.print(f"question: {args.question}", markup=False)
    with (
        tempfile.TemporaryDirectory(prefix="deepresearch-demo-") as scratch,
        CorpusWeb(CORPUS) as web,
        DemoModel() as model,
    ):
        mcp_config = Path(scratch) / "mcp.json"
        mcp_config.write_text('{"mcpServers": {}}\n', encoding="utf-8")
        with replaced_environment(demo_environment(model.base_url, web.base_url, mcp_config)):
            code = await run.main(args)
    console.print(END_NOTE.format(cli=cli_name()), style="bold yellow", markup=False)
    return code
