"""Local OpenAI-compatible model servers as a first-class path.

With no ``OPENAI_API_KEY`` (and no ``OPENAI_BASE_URL``), ``run`` and
``worker`` look for a model server on a well-known local port (Ollama 11434,
llama.cpp 8080, LM Studio 1234, vLLM 8000; ``DEEPRESEARCH_LOCAL_MODEL_URLS``
replaces the list) and use the first that answers ``/v1/models``. For a local
server (found, or named by ``OPENAI_BASE_URL`` without a key):

- the model is the first one ``/v1/models`` lists, unless ``DEEPRESEARCH_MODEL``
  names one;
- the context window is what the server tells (Ollama ``/api/show``,
  llama.cpp's ``llama-server`` ``/props`` ``n_ctx``, vLLM ``/v1/models``
  ``max_model_len``), unless ``DEEPRESEARCH_CONTEXT_WINDOW`` is set.
  llama-cpp-python's server tells none (``/props`` is 404 there, and its
  ``/v1/models`` holds only ids, ``owned_by: "me"``): the line says the
  window is a guess, and ``doctor`` warns.

Probes use short timeouts (a closed port answers at once; nothing here waits
more than about two seconds) and run in the client or worker process at
start, never in workflow code.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from infra.settings import DEFAULT_CONTEXT_WINDOW, Settings, context_window_for

WELL_KNOWN = (
    ("Ollama", "http://127.0.0.1:11434/v1"),
    ("llama.cpp", "http://127.0.0.1:8080/v1"),
    ("LM Studio", "http://127.0.0.1:1234/v1"),
    ("vLLM", "http://127.0.0.1:8000/v1"),
)
OLLAMA_DEFAULT_NUM_CTX = 4096  # Ollama's window when neither the model file nor the server sets one
CONNECT_TIMEOUT = 0.3
READ_TIMEOUT = 2.0


@dataclass(frozen=True)
class LocalServer:
    name: str  # "Ollama", "llama.cpp", "LM Studio", "vLLM" or "a local server"
    base_url: str  # …/v1
    models: tuple[str, ...] = ()
    listing: tuple[dict, ...] = ()  # /v1/models' entries as given


@dataclass(frozen=True)
class Resolved:
    """What the local path decided: the environment the settings are read
    from, the line to show, and where the context window came from."""

    env: dict[str, str]
    line: str | None = None
    window_source: str | None = None


def candidates(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """(name, base URL) of the servers probed, in order of preference."""
    given = (env.get("DEEPRESEARCH_LOCAL_MODEL_URLS") or "").strip()
    if not given:
        return WELL_KNOWN
    urls = [u.strip().rstrip("/") for u in given.replace(";", ",").split(",") if u.strip()]
    return tuple((_name_by_port(u), u if u.endswith("/v1") else u + "/v1") for u in urls)


def _name_by_port(url: str) -> str:
    port = urlsplit(url).port
    return {11434: "Ollama", 8080: "llama.cpp", 1234: "LM Studio", 8000: "vLLM"}.get(port or 0, "a local server")


def _named(name: str, listing: tuple[dict, ...]) -> str:
    """llama-cpp-python's server lists its models as ``owned_by: "me"``."""
    return "llama-cpp-python" if listing and all(e.get("owned_by") == "me" for e in listing) else name


def _client() -> httpx.AsyncClient:
    timeout = httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)
    return httpx.AsyncClient(timeout=timeout, trust_env=False, follow_redirects=False)


async def list_models(client: httpx.AsyncClient, base_url: str) -> tuple[dict, ...] | None:
    """``/v1/models``' entries, or None when no OpenAI-compatible server answers."""
    try:
        response = await client.get(base_url.rstrip("/") + "/models")
        data = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    return tuple(e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str))


async def detect(env: Mapping[str, str]) -> LocalServer | None:
    """The first well-known local server that answers, probed together."""
    found = candidates(env)
    async with _client() as client:
        listings = await asyncio.gather(*(list_models(client, url) for _, url in found))
    for (name, url), listing in zip(found, listings):
        if listing is not None:
            return LocalServer(_named(name, listing), url, tuple(e["id"] for e in listing), listing)
    return None


async def context_window(base_url: str, model: str, listing: tuple[dict, ...] = ()) -> tuple[int, str] | None:
    """The window the server says it has for ``model``, and which endpoint said it."""
    for entry in listing:
        value = entry.get("max_model_len")
        if entry.get("id") == model and isinstance(value, int) and value > 0:
            return value, "/v1/models max_model_len"
    root = base_url.rstrip("/").removesuffix("/v1")
    async with _client() as client:
        props, show = await asyncio.gather(_json(client, "GET", root + "/props"), _ollama_show(client, root, model))
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        n_ctx = props.get("n_ctx") or (settings.get("n_ctx") if isinstance(settings, dict) else None)
        if isinstance(n_ctx, int) and n_ctx > 0:
            return n_ctx, "/props n_ctx"
    if show:
        return show, "/api/show"
    return None


async def _ollama_show(client: httpx.AsyncClient, root: str, model: str) -> int | None:
    shown = await _json(client, "POST", root + "/api/show", {"model": model})
    if not isinstance(shown, dict):
        return None
    for line in str(shown.get("parameters") or "").splitlines():  # a num_ctx the model file sets wins
        name, _, value = line.strip().partition(" ")
        if name == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    info = shown.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if key.endswith(".context_length") and isinstance(value, int) and value > 0:
                # What the model was trained for; Ollama runs it with its own
                # default num_ctx unless told, and cuts longer prompts silently.
                return min(value, OLLAMA_DEFAULT_NUM_CTX)
    return None


async def _json(client: httpx.AsyncClient, method: str, url: str, body: dict | None = None) -> object:
    try:
        response = await client.request(method, url, json=body)
        return response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


async def resolve(env: Mapping[str, str] | None = None) -> Resolved:
    """The environment to read the settings from: with no key, a local
    server's address, model and context window filled in where not set."""
    env = dict(os.environ if env is None else env)
    if env.get("OPENAI_API_KEY"):
        return Resolved(env)
    found = not env.get("OPENAI_BASE_URL")
    if found:
        server = await detect(env)
        if server is None:
            return Resolved(env)
        env["OPENAI_BASE_URL"] = server.base_url
    else:
        base = env["OPENAI_BASE_URL"]
        async with _client() as client:
            listing = await list_models(client, base)
        if listing is None:
            return Resolved(env)  # not answering: check_model_endpoint says so
        server = LocalServer(_named(_name_by_port(base), listing), base, tuple(e["id"] for e in listing), listing)
    if not env.get("DEEPRESEARCH_MODEL") and server.models:
        env["DEEPRESEARCH_MODEL"] = server.models[0]
    model = env.get("DEEPRESEARCH_MODEL") or ""
    source = None
    if env.get("DEEPRESEARCH_CONTEXT_WINDOW"):
        source = "DEEPRESEARCH_CONTEXT_WINDOW"
    elif model and (told := await context_window(server.base_url, model, server.listing)):
        env["DEEPRESEARCH_CONTEXT_WINDOW"] = str(max(told[0], 1024))
        source = f"the server ({told[1]})"
    if not found:
        return Resolved(env, None, source)
    name = server.name
    if name == "a local server" and source:  # not on its usual port: named by what told the window
        name = next((n for part, n in _TELLERS if part in source), name)
    what = f"the {name} server" if name != "a local server" else name
    if source:
        window = f", context window {env['DEEPRESEARCH_CONTEXT_WINDOW']} from {source}"
    else:
        guess = context_window_for(model) if model else DEFAULT_CONTEXT_WINDOW
        window = f"; it does not tell its context window: {guess:,} tokens assumed, set DEEPRESEARCH_CONTEXT_WINDOW"
    line = f"no OPENAI_API_KEY: using {what} at {server.base_url} (model {model or '?'}{window})"
    return Resolved(env, line, source)


_TELLERS = (("/api/show", "Ollama"), ("/props", "llama.cpp"), ("max_model_len", "vLLM"))


async def local_settings(env: Mapping[str, str] | None = None) -> tuple[Settings, str | None]:
    """The worker's settings, a local server filled in where there is no
    key, and the one line that says which server (None when none is used)."""
    resolved = await resolve(env)
    settings = Settings.from_env(resolved.env)
    if resolved.window_source and resolved.window_source != "DEEPRESEARCH_CONTEXT_WINDOW":
        settings = dataclasses.replace(settings, context_window_source=resolved.window_source)
    return settings, resolved.line
