"""What every keyless command shares (`demo`, `worker --demo`, `ui --demo`,
`eval --demo`): the scripted demo model (client/demo/model.py) and the
built-in corpus served as an offline web with its own search engine, both on
loopback, and the process's environment pointed at them for the duration.

The process's own model and search settings are replaced, never read: a key
in OPENAI_API_KEY or TAVILY_API_KEY is neither used nor sent. The corpus web
takes the same port each time when it is free, so the pages a demo run cited
are where it found them for the next keyless command too.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from client.talk import DEMO_TASK_QUEUE  # the demo's task queue (named there for the hints)

CORPUS = Path(__file__).resolve().parent.parent / "evaluation" / "builtin" / "corpus"
DEMO_KEY = "demo-key-never-leaves-loopback"
DEMO_MODEL = "demo-scripted"
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
SCRIPTED = (
    "the model is scripted. No language model and no network: a rule-based stand-in "
    "(client/demo/model.py) picks sentences from an offline corpus about Vellmark, a province invented "
    "for this project, served on loopback with its own search engine."
)


def web_port() -> int:
    """The corpus web's preferred port: the same for every keyless command,
    below Linux's ephemeral range (another is taken when it is busy)."""
    return 20_000 + int(hashlib.sha256(DEMO_TASK_QUEUE.encode()).hexdigest()[:8], 16) % 12_000


def demo_environment(model_url: str, web_url: str, mcp_config: Path) -> dict[str, str]:
    """What the demo sets: the model, search and crawling all on loopback; no
    MCP server (an empty configuration) and no tracing export."""
    web = {"TAVILY_API_KEY": DEMO_KEY, "TAVILY_BASE_URL": web_url} if web_url else {}
    return {
        "DEEPRESEARCH_MCP_CONFIG": str(mcp_config),
        "OPENAI_API_KEY": DEMO_KEY,
        "OPENAI_BASE_URL": model_url,
        "DEEPRESEARCH_MODEL": DEMO_MODEL,
        "DEEPRESEARCH_SEARCH_ENGINE": "tavily",
        **web,
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


PACE = "DEEPRESEARCH_MODEL_RPS"


def ignored_pace(env: Mapping[str, str] | None = None) -> str | None:
    """What a keyless command says of ``DEEPRESEARCH_MODEL_RPS``, which it
    clears with the other model settings: nothing when it is unset; a value
    that is not a rate is refused as `worker` refuses it (ConfigError, one
    line, before anything starts); any other is said to be ignored."""
    from infra.settings import Settings

    value = ((os.environ if env is None else env).get(PACE) or "").strip()
    if not value:
        return None
    Settings.from_env({PACE: value})  # raises ConfigError for a value that is not a rate
    return f"{PACE}={value} is ignored here: the demo's scripted model runs on loopback and has no provider limit"


@dataclass
class Backend:
    model_url: str
    web_url: str


@contextmanager
def demo_backend(web: bool = True, pace: float = 0.0) -> Iterator[Backend]:
    """The demo model and (``web``) the corpus web running, and the
    environment pointed at them, until the block ends. Without ``web`` (an
    `eval --demo` brings its own corpus web) search stays as the caller sets it.
    ``pace``: seconds each agent turn of the demo model takes."""
    from client.demo.model import DemoModel
    from client.evaluation.web import CorpusWeb

    with tempfile.TemporaryDirectory(prefix="deepresearch-demo-") as scratch, DemoModel(pace=pace) as model:
        mcp_config = Path(scratch) / "mcp.json"
        mcp_config.write_text('{"mcpServers": {}}\n', encoding="utf-8")
        if not web:
            with replaced_environment(demo_environment(model.base_url, "", mcp_config)):
                yield Backend(model.base_url, "")
            return
        with CorpusWeb(CORPUS, port=web_port(), any_port_if_taken=True) as corpus:
            with replaced_environment(demo_environment(model.base_url, corpus.base_url, mcp_config)):
                yield Backend(model.base_url, corpus.base_url)
