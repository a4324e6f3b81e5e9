"""API keys never leave the worker's configuration: a whole run (real worker
process, plan review by update, one failed model call and one failed search
that are retried, so error text reaches the history) is dumped, and nothing
in it holds the keys:

- the history JSON (``fetch_history().to_json()``), and every payload and
  every other bytes field in it decoded from base64 (as ``temporal workflow
  show`` prints them), searched for the keys;
- the result, the ``status`` query and the progress stream, as JSON;
- the worker's log (stdout and stderr);
- every file under the data dir (external payloads, conversation blobs);
- the dev server's database files (all the server persisted).

Each text is searched for the key itself and for its base64 forms (standard
and URL-safe, at each of the three byte alignments), so a key inside any
base64-encoded text is found too.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import uuid
from pathlib import Path

import pytest
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from client.runs import start_research
from infra.connection import Connection
from testkit.llm_server import ScriptedLLM
from testkit.pages import PageServer, article
from testkit.research_script import EXPECTED_SUM, ResearchScript
from testkit.search_server import ScriptedTavily
from testkit.worker_process import WorkerProcess
from workflows.models import ProgressEvent, ResearchInput, RunStatus

OPENAI_SECRET = "sk-proj-Zq7SECRETopenaiKEY-4f1d9c2b7e8a6031"
TAVILY_SECRET = "tvly-dev-SECRETtavilyKEY-a93e5b0c71d4f268"
SECRETS = {"OPENAI_API_KEY": OPENAI_SECRET, "TAVILY_API_KEY": TAVILY_SECRET}
FACT = "FACT: the Lantern Rock lighthouse keeper logged 4417 ships in 1911"


def secret_forms(secret: str) -> list[str]:
    """The key and the substrings every base64 encoding of a text holding it
    must contain: for each byte alignment, the characters made of the key's
    bits alone (standard and URL-safe alphabets)."""
    data = secret.encode()
    forms = {secret}
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode()
        core = encoded[-(-8 * shift // 6) : 8 * (shift + len(data)) // 6]
        forms |= {core, core.replace("+", "-").replace("/", "_")}
    return sorted(forms, key=len, reverse=True)


def decoded_strings(obj: object) -> list[str]:
    """Every string in a JSON value, plus the text of each one that is
    base64 (payload data, metadata and other bytes fields), recursively."""
    found: list[str] = []

    def visit(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)
        elif isinstance(value, str):
            found.append(value)
            if len(value) >= 4:
                for decode in (base64.b64decode, base64.urlsafe_b64decode):
                    try:
                        raw = decode(value + "=" * (-len(value) % 4))
                    except (binascii.Error, ValueError):
                        continue
                    text = raw.decode("utf-8", errors="replace")
                    found.append(text)
                    try:  # JSON inside a payload: look inside it too
                        visit(json.loads(text))
                    except ValueError:
                        pass

    visit(obj)
    return found


def leaks(name: str, text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [
        f"{name} holds {var} ({'as is' if form == key else 'base64: ' + form})"
        for var, key in SECRETS.items()
        for form in secret_forms(key)
        if form.encode() in data
    ]


def test_the_search_finds_a_key_in_any_encoding():
    for key in SECRETS.values():
        for prefix in ("", "x", "xy", "xyz"):
            text = f'{prefix}{{"authorization": "Bearer {key}"}}'.encode()
            assert leaks("t", text)
            assert leaks("t", base64.b64encode(text))
            assert leaks("t", base64.urlsafe_b64encode(text))
            nested = json.dumps({"data": base64.b64encode(text).decode()})
            assert any(SECRETS[v] in s for v in SECRETS for s in decoded_strings(json.loads(nested)))
    assert leaks("t", "nothing secret here, sk-proj-Zq7SECRET only half a key") == []


@pytest.fixture
def llm():
    with ScriptedLLM(api_key=OPENAI_SECRET) as server:
        yield server


@pytest.fixture
def tavily():
    with ScriptedTavily(api_key=TAVILY_SECRET) as server:
        yield server


@pytest.fixture
def pages():
    with PageServer() as server:
        server.add("/lighthouse", article("Lantern Rock history", ["Some history.", FACT + ".", "More."]))
        yield server


async def test_no_api_key_in_history_results_logs_or_storage(
    temporal_client, dev_server, worker_env, task_queue, data_dir, tmp_path, llm, tavily, pages
):
    assert worker_env["OPENAI_API_KEY"] == OPENAI_SECRET and worker_env["TAVILY_API_KEY"] == TAVILY_SECRET
    llm.handler = ResearchScript()
    tavily.handler = lambda query, n: [
        {"title": "Lantern Rock history", "url": pages.url("/lighthouse"), "content": "A lighthouse.", "score": 0.9}
    ]
    llm.fail_next(1, 500)  # retried: error text goes into the history
    tavily.fail_next(1, 500)
    log_file = tmp_path / "worker.log"
    with WorkerProcess(worker_env, log_file) as worker:
        await worker.ready(temporal_client)
        conn = Connection(address=dev_server.address, task_queue=task_queue, data_dir=data_dir)
        request = ResearchInput(question="Tell me about Lantern Rock")
        handle = await start_research(temporal_client, conn, request, f"secrets-{uuid.uuid4().hex[:8]}")
        while (await handle.query("status", result_type=RunStatus)).phase != "awaiting_review":
            await asyncio.sleep(0.1)
        assert await handle.execute_update("submit_review", "[ACCEPTED]", result_type=str) == "plan accepted"
        result = await handle.result()
        status = await handle.query("status")  # as JSON, untyped
        history = await handle.fetch_history()
        stream = WorkflowStreamClient.create(temporal_client, handle.id)
        events = [e.data.model_dump() async for e in stream.subscribe("progress", result_type=ProgressEvent)]

    # The run was real and the keys were in use: every request was authorised.
    assert result.status == "completed" and FACT in result.final_report
    assert f"SUM_OF_SQUARES={EXPECTED_SUM}" in result.final_report
    assert [r["_status"] for r in llm.requests][:2] == [500, 200] and len(llm.requests) == 9
    # background (refused once), the step's evidence and its lead, the researcher's
    assert [r["_status"] for r in tavily.requests] == [500, 200, 200, 200, 200]
    assert all(r["_status"] in (200, 500) for r in llm.requests + tavily.requests)

    history_json = history.to_json()
    decoded = decoded_strings(json.loads(history_json))
    # The payloads were decoded (the question is only inside base64 data), and
    # the retried failures left their error text in the history.
    assert "Tell me about Lantern Rock" not in history_json
    assert "Tell me about Lantern Rock" in "\n".join(decoded)
    assert "injected failure (500)" in "\n".join(decoded)
    dumps: dict[str, str | bytes] = {
        "history JSON": history_json,
        "decoded history": "\n".join(decoded),
        "result": result.model_dump_json(),
        "status query": json.dumps(status),
        "progress stream": json.dumps(events),
        "worker log": log_file.read_text(errors="replace"),
    }
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        dumps[f"data dir {path.relative_to(data_dir)}"] = path.read_bytes()
    for path in sorted(Path(dev_server.db_file).parent.glob(Path(dev_server.db_file).name + "*")):
        dumps[f"server database {path.name}"] = path.read_bytes()
    assert len(dumps) > 6 and len(history.events) > 40
    found = [line for name, text in dumps.items() for line in leaks(name, text)]
    assert found == [], "\n".join(found)
