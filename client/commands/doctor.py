"""`deepresearch doctor`: checks the configuration, one row per check, each
failure naming what to set; exits non-zero when a check a run needs fails.

Checks: Temporal (where `run` would look), the model endpoint, each role's
model, tool calling and JSON output (each one tiny request sent as runs send
it: streamed, through the worker's own ``ModelEndpoint``), the context window
and where it came from (a warning when it is a guess for a server that is
not OpenAI's), the speech endpoint (one word spoken), the search engine and
the sandbox's isolation. A local model server is found as `run` finds it
(infra/local_models.py). Every probe has a short timeout, so a dead endpoint
fails in seconds, and a server that takes the connection but does not answer
is told apart from one that cannot be reached."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from client.devserver import port_open
from client.options import DEV_SERVER_PORT, connection, dev_server_ports
from infra.errors import ConfigError, cli_name
from infra.local_models import candidates, local_settings
from infra.settings import ROLES, Settings

OPENAI = "https://api.openai.com/v1"
CHAT_SECONDS = 60.0  # a slow local model answers a tiny request within this
ENDPOINT_TIMEOUT = httpx.Timeout(10.0, connect=3.0)
SPEECH_TIMEOUT = httpx.Timeout(30.0, connect=3.0)


@dataclass
class Row:
    check: str
    status: str  # "ok", "FAIL", "warn", "skip"
    detail: str
    needed: bool = False  # a run cannot work while it fails

    def line(self) -> str:
        return f"{self.status:<5} {self.check:<24} {self.detail}"


async def main(args: argparse.Namespace) -> int:
    rows: list[Row] = []
    conn = connection(args)
    rows.append(await temporal_row(conn))
    settings, local_line = await local_settings()
    if local_line:
        print(local_line, flush=True)
    try:
        settings.check()
        problem = None
    except ConfigError as err:
        problem = str(err)
    base = settings.openai_base_url or OPENAI
    endpoint, listed = await endpoint_row(settings, base, found=bool(local_line))
    rows.append(endpoint)
    alive = endpoint.status == "ok"
    rows += model_rows(settings, listed, alive)
    rows.append(await tool_row(settings, base) if alive else Row("tool calling", "skip", "no model endpoint"))
    rows.append(await json_row(settings, base) if alive else Row("JSON output", "skip", "no model endpoint"))
    rows.append(window_row(settings))
    rows.append(await speech_row(settings))
    rows.append(await search_row(settings, problem))
    rows.append(await sandbox_row(settings))
    for row in rows:
        print(row.line(), flush=True)
    failed = [row.check for row in rows if row.needed and row.status == "FAIL"]
    if failed:
        print(f"{len(failed)} needed check(s) failed: {', '.join(failed)}", flush=True)
        return 1
    print("all needed checks passed", flush=True)
    return 0


async def temporal_row(conn) -> Row:
    if not conn.address_given:  # where `run` looks: the embedded server's port (DEEPRESEARCH_DEV_SERVER_PORT)
        conn = dataclasses.replace(conn, address=f"localhost:{dev_server_ports()[0]}")
    host, _, port = conn.address.rpartition(":")
    host, number = host or "localhost", int(port or DEV_SERVER_PORT)
    if await asyncio.to_thread(port_open, host, number, 2.0):
        return Row("Temporal", "ok", f"{conn.address} answers", needed=conn.address_given)
    if not conn.address_given:
        return Row("Temporal", "ok", f"nothing at {conn.address}: `{cli_name()} run` starts an embedded server")
    return Row(
        "Temporal",
        "FAIL",
        f"nothing answers at {conn.address}: start it (`{cli_name()} server`) or set TEMPORAL_ADDRESS",
        needed=True,
    )


def _headers(settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {settings.openai_api_key or 'not-needed'}"}


def unreachable(err: httpx.HTTPError, timeout: httpx.Timeout) -> str:
    """What went wrong, after the address: a server that took the connection
    and said nothing is not one that cannot be reached."""
    if isinstance(err, httpx.ReadTimeout):
        return f"accepted the connection but did not answer in {timeout.read:g} s (busy, or stuck?)"
    if isinstance(err, httpx.ConnectTimeout):
        return f"did not accept a connection in {timeout.connect:g} s"
    return f"cannot be reached ({type(err).__name__})"


async def endpoint_row(settings: Settings, base: str, found: bool = False) -> tuple[Row, set[str] | None]:
    """The endpoint's row, and the models it lists (None: it lists none).
    ``found``: a local server found on a well-known port, not set by the user."""
    if not settings.openai_api_key and not settings.openai_base_url:
        probed = ", ".join(urlsplit(url).netloc for _, url in candidates(os.environ))
        detail = f"OPENAI_API_KEY is not set and no local model server answers ({probed}): "
        detail += "export your key, start a local server, or set OPENAI_BASE_URL (docs/local-models.md)"
        return Row("model endpoint", "FAIL", detail, needed=True), None
    where = f"{base} (OPENAI_BASE_URL)" if settings.openai_base_url else f"{base} (OpenAI)"
    where = f"{base} (a local server found without OPENAI_API_KEY)" if found else where
    try:
        # Through the same proxies as the model client (httpx reads them from the environment).
        async with httpx.AsyncClient(timeout=ENDPOINT_TIMEOUT) as client:
            response = await client.get(base.rstrip("/") + "/models", headers=_headers(settings))
    except httpx.HTTPError as err:
        fix = (
            "a server that answers one request at a time (llama-cpp-python) answers nothing while it writes: "
            "try again when it is free"
            if isinstance(err, httpx.ReadTimeout)
            else "start the server, or set OPENAI_BASE_URL to a running OpenAI-compatible endpoint"
        )
        return Row("model endpoint", "FAIL", f"{where} {unreachable(err, ENDPOINT_TIMEOUT)}: {fix}", needed=True), None
    if response.status_code in (401, 403):
        fix = "check OPENAI_API_KEY" if settings.openai_api_key else "set OPENAI_API_KEY"
        return Row(
            "model endpoint", "FAIL", f"{where} refuses the key (HTTP {response.status_code}): {fix}", True
        ), None
    listed = None
    if response.status_code == 200:
        try:
            listed = {e["id"] for e in response.json().get("data", []) if isinstance(e, dict) and "id" in e}
        except (ValueError, AttributeError, TypeError):
            listed = None
    return Row("model endpoint", "ok", f"{where} answers", needed=True), listed


def model_rows(settings: Settings, listed: set[str] | None, alive: bool) -> list[Row]:
    by_model: dict[str, list[str]] = {}
    for role in ROLES:
        by_model.setdefault(settings.model_for(role), []).append(role)
    rows = []
    for model, roles in by_model.items():
        who = ", ".join(roles) if len(roles) < len(ROLES) else "every role"
        name = f"model {model}"[:40]
        if not alive:
            rows.append(Row(name, "skip", f"{who}: no model endpoint"))
        elif listed is None or model in listed:
            said = "listed by the endpoint" if listed is not None else "the endpoint lists no models"
            rows.append(Row(name, "ok", f"{who}: {said}", needed=True))
        else:
            variables = " or ".join(f"DEEPRESEARCH_MODEL_{r.upper()}" for r in roles[:2])
            offered = ", ".join(sorted(listed)[:5]) or "none"
            rows.append(
                Row(
                    name,
                    "FAIL",
                    f"{who}: not served (it offers: {offered}); set {variables} or DEEPRESEARCH_MODEL",
                    True,
                )
            )
    return rows


PING = {
    "type": "function",
    "function": {
        "name": "ping",
        "description": "Answer the user's ping.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    },
}


async def tool_row(settings: Settings, base: str) -> Row:
    """A tool call as a run asks for one: streamed, ``tool_choice`` auto."""
    model = settings.model_for("researcher")
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Call the ping tool with the word 'hello'."}],
        "tools": [PING],
        "tool_choice": "auto",
        "max_tokens": 64,
    }
    if settings.tool_calling == "json":  # runs send no tools: nothing to try
        return Row("tool calling", "ok", "DEEPRESEARCH_TOOL_CALLING=json: tools are described in the prompt")
    fix = "set DEEPRESEARCH_TOOL_CALLING=json if this model has no tool calling"
    from worker import probe_chat  # what runs do: the worker's own ModelEndpoint

    probe = await probe_chat(settings, body, CHAT_SECONDS)
    completion = probe.completion
    if not probe.streams_tools:
        return Row(
            "tool calling",
            "warn",
            f"{model}: the server sent an empty stream for a streamed tool call (llama-cpp-python's "
            "chatml-function-calling cannot stream one, and ignores max_tokens when not streamed): runs describe "
            "the tools in the prompt instead, as DEEPRESEARCH_TOOL_CALLING=json does",
        )
    if completion is None:
        return Row("tool calling", "warn", f"{model}: the request failed ({probe.problem}); {fix}")
    if completion.tool_calls:
        return Row("tool calling", "ok", f"{model} called the tool")
    return Row("tool calling", "warn", f"{model} answered without calling the tool; {fix}")


async def json_row(settings: Settings, base: str) -> Row:
    model = settings.model_for("planner")
    body = {
        "model": model,
        "messages": [{"role": "user", "content": 'Reply with this JSON object only: {"ok": true}'}],
        "response_format": {"type": "json_object"},
        "max_tokens": 32,
    }
    from worker import probe_chat

    probe = await probe_chat(settings, body, CHAT_SECONDS)
    try:
        if probe.completion is None:
            raise ValueError(probe.problem)
        value = json.loads(probe.completion.content or "")
    except ValueError as err:
        return Row("JSON output", "warn", f"{model}: no JSON object ({str(err)[:80]}); plans are repaired or re-asked")
    if isinstance(value, dict):
        return Row("JSON output", "ok", f"{model} replied with a JSON object")
    return Row("JSON output", "warn", f"{model}: not a JSON object; plans are repaired or re-asked")


def window_row(settings: Settings) -> Row:
    """The context window and where it came from: a guess (a model name, the
    default) is fine for OpenAI, not for a server that runs the model with a
    window of its own choosing."""
    window = settings.context_window_for("researcher")
    source = settings.context_window_source
    told = source.startswith(("DEEPRESEARCH_CONTEXT_WINDOW", "the server"))
    if told or not settings.openai_base_url:
        return Row("context window", "ok", f"{window:,} tokens, from {source}")
    return Row(
        "context window",
        "warn",
        f"{window:,} tokens, a guess ({source.removesuffix(' (set DEEPRESEARCH_CONTEXT_WINDOW)')}): "
        f"{settings.openai_base_url} does not tell its window (llama-cpp-python tells none); set "
        "DEEPRESEARCH_CONTEXT_WINDOW to the window the server runs (llama-cpp-python: its --n_ctx, default 2,048)",
    )


async def speech_row(settings: Settings) -> Row:
    """One word spoken, as a podcast speaks (podcasts only: never needed)."""
    where = settings.tts_base_url or OPENAI
    if not settings.tts_base_url and not settings.openai_api_key:
        return Row("speech endpoint", "warn", "none: podcasts need DEEPRESEARCH_TTS_BASE_URL or OPENAI_API_KEY")
    from worker import audio_format

    fix = "set DEEPRESEARCH_TTS_BASE_URL to an OpenAI-compatible speech server (podcasts only)"
    voice = settings.tts_voices[0]
    body = {"model": settings.tts_model, "voice": voice, "input": "ok", "response_format": "mp3"}
    try:
        async with httpx.AsyncClient(timeout=SPEECH_TIMEOUT) as client:
            response = await client.post(where.rstrip("/") + "/audio/speech", json=body, headers=_headers(settings))
    except httpx.HTTPError as err:
        return Row("speech endpoint", "warn", f"{where} {unreachable(err, SPEECH_TIMEOUT)}: {fix}")
    if response.status_code != 200:
        said = " ".join(response.text.split())[:100]
        return Row(
            "speech endpoint",
            "warn",
            f"{where} refused to speak (HTTP {response.status_code}: {said}); model {settings.tts_model}: {fix}",
        )
    try:
        spoken = audio_format(response.content)
    except ValueError as err:
        return Row("speech endpoint", "warn", f"{where} sent no usable audio ({err}): {fix}")
    return Row("speech endpoint", "ok", f"{where}, model {settings.tts_model}: spoke a word ({spoken})")


# Each engine's default address (activities/search/; a test keeps them equal).
SEARCH_DEFAULTS = {
    "tavily": "https://api.tavily.com",
    "brave": "https://api.search.brave.com",
    "arxiv": "https://export.arxiv.org",
    "duckduckgo": "https://duckduckgo.com",
}


def search_address(settings: Settings) -> tuple[str, str]:
    """Where the search engine answers, and the variable that sets it."""
    engine = settings.search_engine
    given = {
        "tavily": (settings.tavily_base_url, "TAVILY_BASE_URL"),
        "searxng": (settings.searxng_url, "SEARXNG_URL"),
        "brave": (settings.brave_base_url, "BRAVE_BASE_URL"),
        "arxiv": (settings.arxiv_base_url, "ARXIV_BASE_URL"),
    }.get(engine, (None, "DEEPRESEARCH_SEARCH_ENGINE"))
    return given[0] or SEARCH_DEFAULTS.get(engine, ""), given[1]


async def search_row(settings: Settings, problem: str | None) -> Row:
    """The engine is configured and its address answers HTTP at all (no
    search is made: a search may cost a credit)."""
    if problem and ("SEARCH" in problem or any(k in problem for k in ("TAVILY", "SEARXNG", "BRAVE"))):
        return Row("search engine", "FAIL", problem, needed=True)
    address, variable = search_address(settings)
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, connect=3.0)) as client:
            await client.get(address)
    except httpx.HTTPError as err:
        fix = (
            "the keyless engine needs the internet: set TAVILY_API_KEY, or SEARXNG_URL with "
            "DEEPRESEARCH_SEARCH_ENGINE=searxng"
            if settings.search_engine == "duckduckgo"
            else f"check {variable}"
        )
        detail = f"{settings.search_engine}: {address} cannot be reached ({type(err).__name__}): {fix}"
        if settings.search_engine == "duckduckgo":  # the default, nothing configured: runs fail at their first search
            return Row("search engine", "warn", detail)
        return Row("search engine", "FAIL", detail, needed=True)
    note = {"duckduckgo": "keyless (set TAVILY_API_KEY for Tavily)", "tavily": "Tavily, with its key"}
    engine = note.get(settings.search_engine, settings.search_engine)
    return Row("search engine", "ok", f"{engine}, {address} answers", needed=True)


async def sandbox_row(settings: Settings) -> Row:
    fix = "DEEPRESEARCH_SANDBOX=e2b (E2B_API_KEY), remote (DEEPRESEARCH_SANDBOX_URL) or local-unisolated"
    if settings.sandbox != "local":
        return Row("sandbox", "ok", f"DEEPRESEARCH_SANDBOX={settings.sandbox}")
    from worker import make_sandbox  # the worker's own choice of backend

    isolation = await make_sandbox(settings).isolation()
    if isolation.refusal:
        return Row("sandbox", "warn", f"code steps cannot run here (not isolated): set {fix}")
    parts = [p for p, on in (("network", isolation.network), ("pid", isolation.pid)) if on]
    return Row("sandbox", "ok", f"local, isolated ({', '.join(parts)}, user: {isolation.user})")
