"""Who may drive the research desk, over plain HTTP (no browser needed):
`deepresearch ui` in its own process against a real dev server. A page whose
name was rebound to 127.0.0.1 (DNS rebinding), another site, or any local user
must not start runs that read files on the server; the event stream and the
token take bad input with one clear line."""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from client.devserver import free_port  # outside the ports the dev server picks for itself
from workflows.models import ResearchInput

CLI = Path(sys.executable).parent / "deepresearch"
QUESTION = "Tell me about Lantern Rock"


@contextmanager
def desk_process(env: dict[str, str], tmp_path: Path, *args: str, token: str | None = None):
    """`deepresearch ui` on a free port; yields (base URL, port)."""
    port = free_port()
    log_path = tmp_path / f"desk-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(CLI), "ui", "--port", str(port), *args], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(base + "/api/health", params={"token": token} if token else None, timeout=1, trust_env=False)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(log_path.read_text()) from None
                time.sleep(0.1)
        try:
            yield base, port
        finally:
            proc.terminate()
            proc.wait(10)


@pytest.fixture
def desk(worker_env, tmp_path):
    with desk_process(worker_env, tmp_path) as running:
        yield running


@pytest.fixture
async def http():
    async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
        yield client


async def run_ids(temporal_client) -> set[str]:
    return {run.id async for run in temporal_client.list_workflows('WorkflowType="DeepResearch"')}


async def started_input(temporal_client, run_id: str) -> ResearchInput:
    history = await temporal_client.get_workflow_handle(run_id).fetch_history()
    payloads = history.events[0].workflow_execution_started_event_attributes.input.payloads
    (research,) = await temporal_client.data_converter.decode(payloads, [ResearchInput])
    return research


async def test_a_foreign_host_name_is_refused_even_with_a_matching_origin(desk, http, temporal_client):
    base, port = desk
    before = await run_ids(temporal_client)
    # DNS rebinding: the attacker's name now points at 127.0.0.1, so the page
    # is "same origin" with it: Host and Origin both name the attacker.
    for host in (f"rebind.attacker.example:{port}", "rebind.attacker.example", f"localhost:{port + 1}"):
        reply = await http.post(
            f"{base}/api/runs",
            json={"question": QUESTION},
            headers={"Host": host, "Origin": f"http://{host}"},
        )
        assert reply.status_code == 421, (host, reply.text)
        assert "DEEPRESEARCH_UI_HOSTS" in reply.json()["error"]
        read = await http.get(f"{base}/api/runs", headers={"Host": host})
        assert read.status_code == 421
    assert await run_ids(temporal_client) == before  # nothing started
    # Its own names are served.
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"LOCALHOST:{port}"):
        assert (await http.get(f"{base}/api/runs", headers={"Host": host})).status_code == 200, host


async def test_the_origin_must_be_one_of_the_desks_own_names(desk, http, temporal_client):
    base, port = desk
    before = await run_ids(temporal_client)
    for origin in ("http://attacker.example", "null", f"http://127.0.0.1:{port + 1}", "file://"):
        reply = await http.post(f"{base}/api/runs", json={"question": QUESTION}, headers={"Origin": origin})
        assert reply.status_code == 403, origin
    assert await run_ids(temporal_client) == before
    # The page's own origin, by any of its loopback names, is fine.
    reply = await http.post(
        f"{base}/api/runs",
        json={"question": ""},
        headers={"Host": f"localhost:{port}", "Origin": f"http://127.0.0.1:{port}"},
    )
    assert reply.status_code == 400 and reply.json()["error"].startswith("the question is empty")


async def test_a_configured_public_name_is_served(worker_env, tmp_path, http):
    env = worker_env | {"DEEPRESEARCH_UI_HOSTS": "desk.example.org, other.example.org:8443"}
    with desk_process(env, tmp_path) as (base, _port):
        ok = {"Host": "desk.example.org", "Origin": "https://desk.example.org"}
        reply = await http.post(f"{base}/api/runs", json={"question": " "}, headers=ok)
        assert reply.status_code == 400 and "question is empty" in reply.json()["error"]
        assert (await http.get(f"{base}/api/runs", headers={"Host": "other.example.org:8443"})).status_code == 200
        assert (await http.get(f"{base}/api/runs", headers={"Host": "other.example.org:9999"})).status_code == 421


async def test_a_request_never_names_a_path_on_the_server(desk, http, temporal_client, tmp_path):
    base, _port = desk
    secret = tmp_path / "secret.txt"
    secret.write_text("root-only words")
    before = await run_ids(temporal_client)
    for resources in ([str(secret)], str(secret), ["notes.md"]):
        reply = await http.post(f"{base}/api/runs", json={"question": QUESTION, "resources": resources})
        assert reply.status_code == 400, resources
        assert reply.json()["error"].startswith("this desk takes no local documents: start it with --resources-dir")
    # Only the run settings a page may choose: anything else is refused, by name.
    reply = await http.post(f"{base}/api/runs", json={"question": QUESTION, "task_queue": "elsewhere"})
    assert reply.status_code == 400 and "'task_queue'" in reply.json()["error"]
    assert await run_ids(temporal_client) == before


async def test_local_documents_come_only_from_the_resources_folder(worker_env, tmp_path, http, temporal_client):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.md").write_text("# Notes\nLantern Rock.")
    (folder / "sub" / "more.md").write_text("# More")
    outside = tmp_path / "secret.txt"
    outside.write_text("root-only words")
    (folder / "link.txt").symlink_to(outside)
    (folder / "up").symlink_to(tmp_path)
    before = await run_ids(temporal_client)
    with desk_process(worker_env, tmp_path, "--resources-dir", str(folder)) as (base, _port):
        refused = {
            str(outside): "is a path on the server",
            "../secret.txt": "leads outside the resources folder",
            "sub/../../secret.txt": "leads outside the resources folder",
            "link.txt": "leads outside the resources folder",
            "up/secret.txt": "leads outside the resources folder",
            "missing.md": "there is no 'missing.md' in the resources folder",
            "~/secret.txt": "is a path on the server",
        }
        for name, why in refused.items():
            reply = await http.post(f"{base}/api/runs", json={"question": QUESTION, "resources": [name]})
            assert reply.status_code == 400 and why in reply.json()["error"], (name, reply.text)
        assert await run_ids(temporal_client) == before
        reply = await http.post(f"{base}/api/runs", json={"question": QUESTION, "resources": ["notes.md", "sub"]})
        assert reply.status_code == 200, reply.text
    research = await started_input(temporal_client, reply.json()["id"])
    assert research.resources == [str((folder / "notes.md").resolve()), str((folder / "sub").resolve())]


def test_a_missing_resources_folder_is_one_line(worker_env, tmp_path):
    done = subprocess.run(
        [str(CLI), "ui", "--port", "0", "--resources-dir", str(tmp_path / "nope")],
        env=worker_env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "is not a folder" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


async def test_a_bad_event_id_is_a_clear_400(desk, http):
    base, _port = desk
    reply = await http.post(f"{base}/api/runs", json={"question": QUESTION})
    run_id = reply.json()["id"]
    events = f"{base}/api/runs/{run_id}/events"
    for request in (
        {"headers": {"Last-Event-ID": "9" * 5000}},
        {"params": {"from": "\u00b2"}},
        {"params": {"from": "-7"}},
    ):
        reply = await http.get(events, **request)
        assert reply.status_code == 400, request
        assert reply.json()["error"].startswith("Last-Event-ID (or ?from=) must be the id of an event")
    async with http.stream("GET", events, headers={"Last-Event-ID": "0"}) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")


async def test_a_correct_bearer_token_wins_over_a_stale_cookie(worker_env, tmp_path, http):
    env = worker_env | {"DEEPRESEARCH_UI_TOKEN": "s3cret"}
    with desk_process(env, tmp_path, token="s3cret") as (base, _port):
        stale = {"Cookie": "desk_token=old-secret"}
        reply = await http.get(f"{base}/api/runs", headers=stale | {"Authorization": "Bearer s3cret"})
        assert reply.status_code == 200, reply.text
        assert (await http.get(f"{base}/api/runs", headers=stale)).status_code == 401
        wrong = stale | {"Authorization": "Bearer nope"}
        assert (await http.get(f"{base}/api/runs", headers=wrong)).status_code == 401


async def test_a_run_whose_id_holds_a_slash_opens_on_the_desk(worker_env, script, tmp_path, http):
    """Any id Temporal accepts is a run id: one with "/" (sent as %2F, which
    the server decodes) and other scripts opens, downloads, and links to the
    Temporal UI by its quoted id."""
    from urllib.parse import quote

    from testkit.worker_process import WorkerProcess

    run_id = "team/a b/研究"
    with WorkerProcess(worker_env, tmp_path / "worker.log"):
        started = subprocess.run(
            [str(CLI), "start", QUESTION, "--auto-accept", "--id", run_id],
            env=worker_env,
            capture_output=True,
            text=True,
        )
        assert started.returncode == 0, started.stderr
        done = subprocess.run([str(CLI), "result", run_id], env=worker_env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        with desk_process(worker_env, tmp_path) as (base, _port):
            quoted = quote(run_id, safe="")
            page = await http.get(f"{base}/runs/{quoted}")
            assert page.status_code == 200 and "text/html" in page.headers["content-type"]
            shown = await http.get(f"{base}/api/runs/{quoted}")
            assert shown.status_code == 200, shown.text
            data = shown.json()
            assert data["id"] == run_id and data["result"]["status"] == "completed"
            assert data["temporal_ui"].endswith(f"/workflows/{quoted}")
            report = await http.get(f"{base}/api/runs/{quoted}/report.md")
            assert report.status_code == 200 and "Lantern Rock" in report.text
            slides = await http.get(f"{base}/api/runs/{quoted}/slides")  # the run's slides, none made yet
            assert slides.status_code == 404 and slides.json()["error"].endswith(f"{run_id}-slides'")
            other = await http.get(f"{base}/api/runs/{quote('team/a b', safe='')}")
            assert other.status_code == 404 and "there is no run with id 'team/a b'" in other.json()["error"]
