"""What the desk spends on one request is bounded: a body is read only up to
its limit, JSON that is not JSON (or nests too deeply to parse) is a clear
400, and a PDF or Word download is made in a child process that is killed
when the client leaves, so abandoned downloads tie up nothing. Against
`deepresearch ui` in its own process (uvicorn), over raw sockets and httpx."""

from __future__ import annotations

import asyncio
import json
import select
import socket
import time
from pathlib import Path

import httpx

from client.desk.app import MAX_BODY
from tests.test_desk_guard import QUESTION, desk_process

CHUNK = 64 << 10


def status_line(sock: socket.socket) -> tuple[int, bytes]:
    """The response's status and the rest of what arrived before the server closed or went quiet."""
    sock.settimeout(10)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data and data.endswith(b"}"):
                break
    except (ConnectionResetError, TimeoutError):
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]) if head else 0, body


def post_head(port: int, headers: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        f"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n{headers}\r\n".encode()
    )
    return sock


def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(worker_env, tmp_path):
    with desk_process(worker_env, tmp_path) as (_, port):
        sock = post_head(port, f"Content-Length: {50 << 20}\r\n")  # and not one byte of it
        with sock:
            status, body = status_line(sock)
        assert status == 413, body
        assert f"{MAX_BODY:,} bytes" in json.loads(body)["error"]


def test_a_streamed_body_is_refused_as_soon_as_it_passes_the_limit(worker_env, tmp_path):
    whole = 50 << 20
    with desk_process(worker_env, tmp_path) as (_, port):
        sock = post_head(port, "Transfer-Encoding: chunked\r\n")  # no length said
        sent = 0
        with sock:
            while sent < whole and not select.select([sock], [], [], 0.01)[0]:  # until the desk answers
                try:
                    sock.sendall(b"%x\r\n" % CHUNK + b"[" * CHUNK + b"\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    break
                sent += CHUNK
            status, body = status_line(sock)
        assert status == 413, body
        assert sent < whole, "the desk read the whole 50 MB before it answered"


async def test_bad_or_too_deeply_nested_json_is_a_clear_400(worker_env, tmp_path):
    with desk_process(worker_env, tmp_path) as (base, _):
        async with httpx.AsyncClient(timeout=30, trust_env=False) as http:
            headers = {"Content-Type": "application/json"}
            cases = {
                "[" * 100_000: "nested too deeply",
                '{"question": ': "not JSON",
                b"\xff\xfe{": "not JSON",
                "": "not JSON",
            }
            for body, said in cases.items():
                for path in ("/api/runs", "/api/runs/some-run/review", "/api/runs/some-run/ask"):
                    reply = await http.post(base + path, content=body, headers=headers)
                    assert reply.status_code == 400, (path, reply.text[:300])
                    assert said in reply.json()["error"], reply.text[:300]
            good = await http.post(base + "/api/runs", json={"question": QUESTION, "no such option": 1})
            assert good.status_code == 400 and "no such option" in good.json()["error"]  # a JSON body is read
        log = next(tmp_path.glob("desk-*.log")).read_text()
        assert "Traceback" not in log and "RecursionError" not in log, log[-2000:]


def big_table(rows: int, cols: int) -> str:
    head = "| " + " | ".join(f"col {c}" for c in range(cols)) + " |\n|" + "---|" * cols + "\n"
    return "\n" + head + "".join("| " + " | ".join(f"r{r}c{c}" for c in range(cols)) + " |\n" for r in range(rows))


def export_children(port: int) -> list[int]:
    """The export children of the desk listening on ``port``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or b"client.export_child" not in (proc / "cmdline").read_bytes():
                continue
            parent = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
            if str(port).encode() in Path(f"/proc/{parent}/cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:  # it ended while we looked
            continue
    return found


async def until(check, seconds: float = 60.0):
    deadline = time.monotonic() + seconds
    while not (value := check()) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return value


async def test_a_download_whose_client_left_is_abandoned(worker_env, worker, script, tmp_path):
    script.report_extra = big_table(1000, 20)  # a PDF that takes many seconds to lay out
    with desk_process(worker_env, tmp_path) as (base, port):
        async with httpx.AsyncClient(timeout=120, trust_env=False) as http:
            reply = await http.post(base + "/api/runs", json={"question": QUESTION, "auto_accept_plan": True})
            run_id = reply.json()["id"]
            for _ in range(600):
                run = (await http.get(f"{base}/api/runs/{run_id}")).json()
                if run["workflow_status"] != "running":
                    break
                await asyncio.sleep(0.2)
            assert run["workflow_status"] == "completed", run
            download = asyncio.create_task(http.get(f"{base}/api/runs/{run_id}/report.pdf"))
            assert await until(lambda: export_children(port)), "the PDF is made in a child process"
            # Meanwhile the desk answers, and serves other downloads.
            markdown = await http.get(f"{base}/api/runs/{run_id}/report.md")
            assert markdown.status_code == 200 and "r999c19" in markdown.text
            assert not download.done()
            download.cancel()  # the client leaves
            await asyncio.gather(download, return_exceptions=True)
            assert await until(lambda: not export_children(port), 30), "the PDF is still being made for no one"
            # A download that is waited for arrives whole.
            word = await http.get(f"{base}/api/runs/{run_id}/report.docx")
            assert word.status_code == 200 and word.content.startswith(b"PK")
