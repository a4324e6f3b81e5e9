"""Worker-side configuration, read from the environment (see README,
"Configuration").

Secrets live here and only here: they are read by the worker process and are
never put into workflow inputs, results or history.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from infra.errors import ConfigError
from infra.user_limits import UserLimits

# Payloads above this size go to external storage (infra/converter.py; the SDK
# warns at 512 KiB), not into history.
PAYLOAD_THRESHOLD = 128 * 1024
ROLES = (
    "coordinator",
    "planner",
    "researcher",
    "coder",
    "analyst",
    "reporter",
    "reasoning",
    "podcast",
    "slides",
    "prose",
    "followup",
)
DEFAULT_TTS_MODEL = "gpt-4o-mini-tts"
DEFAULT_TTS_VOICES = ("alloy", "onyx")  # the first for the female host, the second for the male
DEFAULT_MODEL = "gpt-4.1-mini"
SEARCH_ENGINES = ("tavily", "duckduckgo", "searxng", "brave", "arxiv")
# The variable each search engine cannot work without (keyless engines need none).
SEARCH_ENGINE_REQUIRES = {
    "tavily": ("TAVILY_API_KEY", "export your Tavily key"),
    "searxng": ("SEARXNG_URL", "export the address of your SearxNG instance, e.g. http://localhost:8888"),
    "brave": ("BRAVE_API_KEY", "export your Brave Search API key"),
}
SANDBOXES = ("local", "e2b", "remote", "local-unisolated")

# Context windows by model-name prefix, most specific first. Unknown models get
# a conservative default; DEEPRESEARCH_CONTEXT_WINDOW overrides.
_CONTEXT_WINDOWS = (
    ("gpt-4.1", 1_000_000),
    ("gpt-4o", 128_000),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("deepseek", 64_000),
    ("qwen", 32_000),
    ("llama", 128_000),
    ("claude", 200_000),
    ("gemini", 1_000_000),
)
DEFAULT_CONTEXT_WINDOW = 32_000

# -- the model call: output bounds and streaming (activities/llm.py) ---------------
# Each role's output bound in tokens, fitted to its job; the room left in the
# context window caps it too. DEEPRESEARCH_MAX_OUTPUT_TOKENS[_ROLE] overrides.
MAX_OUTPUT_TOKENS = {
    "coordinator": 1_024,  # a routing reply or a short direct answer
    "planner": 2_048,
    "reporter": 8_192,
    "reasoning": 8_192,  # a reasoning model thinks within its bound
    "podcast": 4_096,
    "slides": 4_096,
    "prose": 4_096,
    "followup": 4_096,  # a cited answer to a follow-up question
}
DEFAULT_MAX_OUTPUT_TOKENS = 2_048  # a researcher's, coder's or analyst's turn


def _model_call_settings(env: Mapping[str, str]) -> dict:
    """The model call's settings: output bounds, silence timeout, streaming."""
    default = _tokens(env, "DEEPRESEARCH_MAX_OUTPUT_TOKENS")
    bounds = {
        role: _tokens(env, f"DEEPRESEARCH_MAX_OUTPUT_TOKENS_{role.upper()}")
        or default
        or MAX_OUTPUT_TOKENS.get(role, DEFAULT_MAX_OUTPUT_TOKENS)
        for role in ROLES
    }
    stream = (env.get("DEEPRESEARCH_MODEL_STREAM") or "on").strip().lower() not in ("0", "false", "no", "off")
    return dict(
        max_output_tokens=bounds,
        model_idle_timeout=_seconds(env, "DEEPRESEARCH_MODEL_IDLE_TIMEOUT", 120.0),
        model_stream=stream,
        model_rps=_rate(env, "DEEPRESEARCH_MODEL_RPS"),
    )


def _rate(env: Mapping[str, str], name: str) -> float | None:
    """Requests a second (``0.5``: one every two seconds); None when unset."""
    value = (env.get(name) or "").strip()
    if not value:
        return None
    try:
        rate = float(value)
    except ValueError:
        rate = -1.0
    if not 0.001 <= rate <= 100_000:
        raise ConfigError(
            f"{name} must be a number of requests a second (e.g. 5, or 0.5 for one every two seconds), got {value!r}"
        )
    return rate


def _tokens(env: Mapping[str, str], name: str) -> int | None:
    value = (env.get(name) or "").strip()
    if not value:
        return None
    if not value.isdigit() or not 16 <= int(value) <= 1_000_000:
        raise ConfigError(f"{name} must be a whole number of tokens from 16 to 1000000, got {value!r}")
    return int(value)


def default_data_dir() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("deepresearch", appauthor=False))


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    value = env.get("DEEPRESEARCH_DATA_DIR")
    return Path(value).expanduser() if value else default_data_dir()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _int(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name)
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number of tokens, got {value!r}") from None
    if number < 1024:
        raise ConfigError(f"{name} must be at least 1024 tokens, got {number}")
    return number


def _voices(value: str | None) -> tuple[str, str]:
    if not (value or "").strip():
        return DEFAULT_TTS_VOICES
    voices = [v.strip() for v in (value or "").split(",") if v.strip()]
    if len(voices) != 2:
        raise ConfigError(f"DEEPRESEARCH_TTS_VOICES must name two voices, e.g. alloy,onyx; got {value!r}")
    return voices[0], voices[1]


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    value = env.get(name)
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {value!r}") from None
    if not 0 < seconds <= 1500:
        raise ConfigError(f"{name} must be between 0 and 1500 seconds, got {value}")
    return seconds


@dataclass(frozen=True)
class Settings:
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    models: dict[str, str] = field(default_factory=dict)
    context_windows: dict[str, int] = field(default_factory=dict)
    search_engine: str = "tavily"
    tavily_api_key: str | None = None
    tavily_base_url: str | None = None
    searxng_url: str | None = None
    brave_api_key: str | None = None
    brave_base_url: str | None = None
    arxiv_base_url: str | None = None
    include_domains: tuple[str, ...] = ()
    exclude_domains: tuple[str, ...] = ()
    sandbox: str = "local"
    e2b_api_key: str | None = None
    data_dir: Path = field(default_factory=default_data_dir)
    allow_private_urls: bool = False
    # When set, the only web origins the crawl tool fetches (``deepresearch eval``: its offline web).
    crawl_only: tuple[str, ...] = ()
    # Whether the worker offers the user's MCP servers (``deepresearch eval``: no, its runs stay offline).
    mcp: bool = True
    model_timeout: float = 300.0  # seconds for one model HTTP call
    tool_calling: str = "native"  # or "json": tools described in the prompt
    tts_model: str = DEFAULT_TTS_MODEL  # the podcast's speech model
    tts_voices: tuple[str, str] = DEFAULT_TTS_VOICES
    tts_base_url: str | None = None  # default: OPENAI_BASE_URL
    sandbox_url: str | None = None  # the sandbox service, for DEEPRESEARCH_SANDBOX=remote
    context_window_source: str = ""  # where the default role's window came from (`doctor` shows it)
    max_output_tokens: dict[str, int] = field(default_factory=dict)  # by role; see MAX_OUTPUT_TOKENS
    model_idle_timeout: float = 120.0  # seconds without a token before a streamed call gives up
    model_stream: bool = True  # stream completions (DEEPRESEARCH_MODEL_STREAM=off: one JSON body)
    # Model requests a second for the whole deployment (every worker), paced by
    # Temporal on the model task queue (worker.py); None: not paced.
    model_rps: float | None = None
    # Per-user limits the runs keep (infra/user_limits.py; off by default).
    user_limits: UserLimits = field(default_factory=UserLimits)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        default_model = env.get("DEEPRESEARCH_MODEL") or DEFAULT_MODEL
        models = {role: env.get(f"DEEPRESEARCH_MODEL_{role.upper()}") or default_model for role in ROLES}
        default_window = _int(env, "DEEPRESEARCH_CONTEXT_WINDOW")
        windows = {
            role: _int(env, f"DEEPRESEARCH_CONTEXT_WINDOW_{role.upper()}")
            or default_window
            or context_window_for(models[role])
            for role in ROLES
        }
        tavily_key = env.get("TAVILY_API_KEY") or None
        # Tavily when its key is there, else the keyless DuckDuckGo.
        engine = (env.get("DEEPRESEARCH_SEARCH_ENGINE") or "").strip().lower() or (
            "tavily" if tavily_key else "duckduckgo"
        )
        e2b_key = env.get("E2B_API_KEY") or None
        sandbox = (env.get("DEEPRESEARCH_SANDBOX") or ("e2b" if e2b_key else "local")).strip().lower()
        return cls(
            openai_api_key=env.get("OPENAI_API_KEY") or None,
            openai_base_url=env.get("OPENAI_BASE_URL") or None,
            models=models,
            context_windows=windows,
            search_engine=engine,
            tavily_api_key=tavily_key,
            tavily_base_url=env.get("TAVILY_BASE_URL") or None,
            searxng_url=(env.get("SEARXNG_URL") or "").strip() or None,
            brave_api_key=env.get("BRAVE_API_KEY") or None,
            brave_base_url=env.get("BRAVE_BASE_URL") or None,
            arxiv_base_url=env.get("ARXIV_BASE_URL") or None,
            include_domains=parse_domains(env.get("DEEPRESEARCH_SEARCH_INCLUDE_DOMAINS")),
            exclude_domains=parse_domains(env.get("DEEPRESEARCH_SEARCH_EXCLUDE_DOMAINS")),
            sandbox=sandbox,
            e2b_api_key=e2b_key,
            data_dir=data_dir(env),
            allow_private_urls=_truthy(env.get("DEEPRESEARCH_ALLOW_PRIVATE_URLS")),
            model_timeout=_seconds(env, "DEEPRESEARCH_MODEL_TIMEOUT", 300.0),
            tool_calling=(env.get("DEEPRESEARCH_TOOL_CALLING") or "native").strip().lower(),
            tts_model=(env.get("DEEPRESEARCH_TTS_MODEL") or DEFAULT_TTS_MODEL).strip(),
            tts_voices=_voices(env.get("DEEPRESEARCH_TTS_VOICES")),
            tts_base_url=(env.get("DEEPRESEARCH_TTS_BASE_URL") or "").strip() or env.get("OPENAI_BASE_URL") or None,
            sandbox_url=(env.get("DEEPRESEARCH_SANDBOX_URL") or "").strip() or None,
            context_window_source=window_source(default_window, models["researcher"]),
            **_model_call_settings(env),
            user_limits=UserLimits.from_env(env),
        )

    def check(self) -> None:
        """Raise ConfigError naming what to set, before any work starts."""
        if not self.openai_api_key and not self.openai_base_url:
            raise ConfigError(
                "OPENAI_API_KEY is not set: export your key (or OPENAI_BASE_URL for a "
                "local OpenAI-compatible server such as Ollama or vLLM)"
            )
        if self.search_engine not in SEARCH_ENGINES:
            raise ConfigError(
                f"DEEPRESEARCH_SEARCH_ENGINE={self.search_engine!r} is not supported; "
                f"use one of: {', '.join(SEARCH_ENGINES)}"
            )
        required = SEARCH_ENGINE_REQUIRES.get(self.search_engine)
        values = {
            "TAVILY_API_KEY": self.tavily_api_key,
            "SEARXNG_URL": self.searxng_url,
            "BRAVE_API_KEY": self.brave_api_key,
        }
        if required and not values[required[0]]:
            variable, hint = required
            raise ConfigError(
                f"{variable} is not set: DEEPRESEARCH_SEARCH_ENGINE={self.search_engine} needs it; "
                f"{hint} (or use DEEPRESEARCH_SEARCH_ENGINE=duckduckgo, which needs no key)"
            )
        if self.search_engine == "searxng" and not _is_http_url(self.searxng_url):
            raise ConfigError(
                f"SEARXNG_URL={self.searxng_url!r} is not an http(s) address: "
                "set it to your SearxNG instance, e.g. http://localhost:8888"
            )
        if self.tool_calling not in ("native", "json"):
            raise ConfigError(
                f"DEEPRESEARCH_TOOL_CALLING={self.tool_calling!r} is not supported; use 'native' "
                "(the API's tool calls) or 'json' (for models without tool calling)"
            )
        if self.sandbox not in SANDBOXES:
            raise ConfigError(
                f"DEEPRESEARCH_SANDBOX={self.sandbox!r} is not supported; use one of: {', '.join(SANDBOXES)}"
            )
        if self.sandbox == "e2b" and not self.e2b_api_key:
            raise ConfigError("DEEPRESEARCH_SANDBOX=e2b needs E2B_API_KEY: export your E2B key")
        if self.sandbox == "remote" and not _is_http_url(self.sandbox_url):
            raise ConfigError(
                "DEEPRESEARCH_SANDBOX=remote needs DEEPRESEARCH_SANDBOX_URL, the sandbox service's address "
                "(e.g. http://sandbox:8090, see docs/sandbox.md)"
            )

    def model_for(self, role: str) -> str:
        return self.models.get(role) or self.models.get("researcher") or DEFAULT_MODEL

    def context_window_for(self, role: str) -> int:
        return self.context_windows.get(role) or DEFAULT_CONTEXT_WINDOW

    def max_output_for(self, role: str) -> int:
        return self.max_output_tokens.get(role) or MAX_OUTPUT_TOKENS.get(role, DEFAULT_MAX_OUTPUT_TOKENS)

    @property
    def secrets(self) -> list[str]:
        """Every secret value, for tests and log scrubbing."""
        return [s for s in (self.openai_api_key, self.tavily_api_key, self.brave_api_key, self.e2b_api_key) if s]


def parse_domains(value: str | None) -> tuple[str, ...]:
    """``"example.com, https://www.Docs.org/path"`` -> ``("example.com", "www.docs.org")``."""
    domains: list[str] = []
    for item in (value or "").replace(";", ",").replace(" ", ",").split(","):
        item = item.strip().lower()
        if "://" in item:
            item = urlsplit(item).hostname or ""
        item = item.split("/", 1)[0].removeprefix("*.").strip(".")
        if item and item not in domains:
            domains.append(item)
    return tuple(domains)


def _is_http_url(value: str | None) -> bool:
    parts = urlsplit(value or "")
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def window_source(given: int | None, model: str) -> str:
    if given:
        return "DEEPRESEARCH_CONTEXT_WINDOW"
    name = model.lower().rsplit("/", 1)[-1]
    if any(name.startswith(prefix) for prefix, _ in _CONTEXT_WINDOWS):
        return f"the model name {model!r} (built-in table)"
    return "the default for unknown models (set DEEPRESEARCH_CONTEXT_WINDOW)"


def context_window_for(model: str) -> int:
    name = model.lower().rsplit("/", 1)[-1]
    for prefix, window in _CONTEXT_WINDOWS:
        if name.startswith(prefix):
            return window
    return DEFAULT_CONTEXT_WINDOW


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner may enter (0700): the dev server's
    database, reports, blobs and payloads are nobody else's business."""
    path = Path(path).expanduser()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        if path.stat().st_uid == os.geteuid() and path.stat().st_mode & 0o077:
            path.chmod(0o700)
    except OSError:
        pass
    return path


async def check_model_endpoint(settings: Settings, timeout: float = 3.0) -> None:
    """ConfigError (one line, what to set) when OPENAI_BASE_URL is set but
    nothing answers there; the default OpenAI endpoint is not probed."""
    import asyncio

    url = settings.openai_base_url
    if not url:
        return
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        writer.close()
    except (OSError, TimeoutError) as err:
        reason = (
            "nothing listens there"
            if isinstance(err, ConnectionRefusedError)
            else ("no answer" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__))
        )
        raise ConfigError(
            f"the model endpoint OPENAI_BASE_URL={url} cannot be reached ({reason}): start the server, "
            "or set OPENAI_BASE_URL to a running OpenAI-compatible endpoint"
        ) from None
