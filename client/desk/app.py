"""The research desk: a small Starlette app that talks to Temporal through
the same client code as the CLI, and serves one page (``static/``).

JSON API (all under ``/api``):

| method and path | does |
|---|---|
| GET  /runs?phase=P | recent runs (phase filter through the search attribute) |
| POST /runs | start a run: ``{"question": …, options of ResearchInput}`` |
| GET  /runs/{id} | status (the workflow's query) and, once finished, the result |
| GET  /runs/{id}/events | the run's progress stream as server-sent events; ``Last-Event-ID`` resumes |
| POST /runs/{id}/review | ``{"feedback": …, "plan_version": n}`` through the ``submit_review`` update |
| POST /runs/{id}/answer | ``{"answer": …}`` through ``answer_clarification`` |
| POST /runs/{id}/cancel | cancel: the run ends with a partial report |
| GET  /runs/{id}/report.{md,html,json,pdf,docx} | downloads |
| POST /runs/{id}/{podcast,slides} | make them; GET downloads them when made |

Safe by default: it binds to loopback; on another address it needs
``DEEPRESEARCH_UI_TOKEN`` and every request must carry it (the page gets a
cookie from ``/?token=…``). It answers only to its own host names (loopback
and ``DEEPRESEARCH_UI_HOSTS``: no DNS rebinding). Changes need a JSON body and
a same-origin request, so another site cannot drive the desk from a visitor's
browser. A request sets only the run settings in ``inputs.DESK_FIELDS``, and
local documents only by names inside the operator's resources folders.
Reports are rendered without raw HTML (as the HTML export is).

A request body is read only up to ``MAX_BODY`` bytes (a longer one is
refused with 413 as soon as it passes the limit, a declared one before it is
read); a body that is not JSON, or nests too deeply to parse, is a 400 with
one line. PDF and Word downloads are made in a child process with a time and
memory limit (``client/export_child.py``), killed as soon as the client
leaves: no thread is tied up by a download.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from client.desk.guard import TOKEN_COOKIE, AllowedHosts, Guard
from client.desk.inputs import InputProblem, run_input
from client.errors import CliError, failure_message, rejection_reason
from client.export import report_html, sources_html
from client.export_child import render_document_async
from client.export_pdf import PdfUnavailable
from client.follow import progress_events
from client.ids import attachment, side_id
from client.report_files import DOCUMENTS, render
from client.runs import WORKFLOW_TYPE, new_workflow_id, start_research
from client.side_outputs import RESULT_TYPES, SIDE_TYPES, finished_report, start_once
from client.talk import QUERY_TIMEOUT
from client.updates import execute_update
from client.wording import usage_text
from infra.blobs import blob_store
from infra.connection import Connection
from infra.temporal import connect
from workflows.changes import split_changes
from workflows.failures import partial_report
from workflows.models import (
    PHASE_ATTRIBUTE,
    TITLE_ATTRIBUTE,
    ResearchResult,
    RunStatus,
)

SIDE = ("podcast", "slides")  # the side outputs the desk makes
MAX_BODY = 1 << 20  # bytes of a request's JSON body (a question is at most 20,000 characters)
PHASES = ("coordinating", "clarifying", "investigating", "planning", "awaiting_review", "researching", "reporting")
MEDIA = {
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "json": "application/json",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}


class Problem(Exception):
    """One clear message for the page, with an HTTP status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def create_app(
    conn: Connection,
    *,
    token: str | None = None,
    temporal_ui: str | None = None,
    hosts: AllowedHosts | None = None,
    resource_dirs: Sequence[Path] = (),
    demo: str | None = None,
) -> Starlette:
    """``hosts``: the names it answers to (loopback by default);
    ``resource_dirs``: the only folders a run's local documents come from;
    ``demo``: the note the page shows when its runs go to the demo's
    scripted model (`ui --demo`)."""
    desk = Desk(conn, token, temporal_ui)
    desk.resource_dirs = list(resource_dirs)
    desk.demo = demo
    routes = [
        Route("/", desk.page),
        # A run id may hold "/" (sent as %2F, which the server decodes): ids match as
        # paths, the routes with a fixed ending first, the run itself last.
        Route("/runs/{run_id:path}", desk.page),
        Route("/static/{name}", desk.static),
        Route("/api/health", desk.health),
        Route("/api/runs", desk.list_runs, methods=["GET"]),
        Route("/api/runs", desk.start, methods=["POST"]),
        Route("/api/schedules", desk.schedules),
        Route("/api/runs/{run_id:path}/events", desk.events),
        Route("/api/runs/{run_id:path}/review", desk.review, methods=["POST"]),
        Route("/api/runs/{run_id:path}/answer", desk.answer, methods=["POST"]),
        Route("/api/runs/{run_id:path}/cancel", desk.cancel, methods=["POST"]),
        Route("/api/runs/{run_id:path}/report.{fmt}", desk.download),
        Route("/api/runs/{run_id:path}/ask", desk.ask, methods=["POST"]),
        *(Route(f"/api/runs/{{run_id:path}}/{kind}", desk.side_output, methods=["GET", "POST"]) for kind in SIDE),
        Route("/api/runs/{run_id:path}", desk.run),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(Guard, token=desk.token, hosts=hosts)
    return app


class Desk:
    def __init__(self, conn: Connection, token: str | None, temporal_ui: str | None) -> None:
        self.conn = conn
        self.token = token
        self.temporal_ui = temporal_ui
        self.demo: str | None = None  # `ui --demo`: the page says the model is scripted
        self.resource_dirs: list[Path] = []
        self._client: Client | None = None
        self._lock = asyncio.Lock()

    async def client(self) -> Client:
        async with self._lock:
            if self._client is None:
                self._client = await connect(self.conn)  # ConnectionFailed: one line, shown on the page
            return self._client

    # --- the page -----------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        html = (resources.files("client.desk") / "static" / "index.html").read_text(encoding="utf-8")
        response = HTMLResponse(html, headers=_PAGE_HEADERS)
        if self.token and request.query_params.get("token"):
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
        return response

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        kinds = {"desk.js": "text/javascript", "desk.css": "text/css"}
        if name not in kinds:
            return JSONResponse({"error": "not found"}, 404)
        text = (resources.files("client.desk") / "static" / name).read_text(encoding="utf-8")
        return Response(text, media_type=kinds[name], headers={"Cache-Control": "no-cache"})

    # --- the API --------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        return await self._answer(self._health)

    async def _health(self) -> dict:
        await self.client()
        return {
            "temporal": self.conn.address,
            "namespace": self.conn.namespace,
            "temporal_ui": self.temporal_ui,
            "demo": self.demo,
        }

    async def list_runs(self, request: Request) -> Response:
        phase = request.query_params.get("phase") or ""
        return await self._answer(lambda: self._list(phase))

    async def _list(self, phase: str) -> dict:
        if phase and phase not in PHASES:
            raise Problem(f"unknown phase {phase!r}; use one of: {', '.join(PHASES)}")
        query = f'WorkflowType="{WORKFLOW_TYPE}"'
        if phase:
            query += f' AND ResearchPhase="{phase}" AND ExecutionStatus="Running"'
        client = await self.client()
        runs = []
        async for run in client.list_workflows(query, limit=50):
            runs.append(
                {
                    "id": run.id,
                    "status": run.status.name.lower() if run.status else "unknown",
                    "phase": run.typed_search_attributes.get(PHASE_ATTRIBUTE),
                    "title": run.typed_search_attributes.get(TITLE_ATTRIBUTE) or "",
                    "started": run.start_time.isoformat(),
                }
            )
        runs.sort(key=lambda r: r["started"], reverse=True)
        return {"runs": runs}

    async def start(self, request: Request) -> Response:
        return await self._answer(lambda: self._with_body(request, self._start))

    async def _start(self, body: Any) -> dict:
        try:  # only the allowed fields; local documents only from the resources folders
            research = await asyncio.to_thread(run_input, body, self.resource_dirs)
        except InputProblem as problem:
            raise Problem(str(problem)) from None
        handle = await start_research(await self.client(), self.conn, research, new_workflow_id())
        return {"id": handle.id}

    async def run(self, request: Request) -> Response:
        return await self._answer(lambda: self._run(request.path_params["run_id"]))

    async def _run(self, run_id: str) -> dict:
        client = await self.client()
        handle = client.get_workflow_handle(run_id, result_type=ResearchResult)
        described = await self._describe(run_id)
        if described.workflow_type != WORKFLOW_TYPE:
            raise Problem(f"{run_id} is a {described.workflow_type} workflow, not a research run", 404)
        out: dict[str, Any] = {
            "id": run_id,
            "workflow_status": described.status.name.lower() if described.status else "unknown",
            "temporal_ui": f"{self.temporal_ui}/namespaces/{self.conn.namespace}/workflows/{quote(run_id, safe='')}"
            if self.temporal_ui
            else None,
        }
        try:
            status = await handle.query("status", result_type=RunStatus, rpc_timeout=QUERY_TIMEOUT)
            out["status"] = status.model_dump(mode="json")
        except Exception as err:  # no worker, or the workflow task is failing
            out["status"] = None
            out["status_problem"] = f"the run does not answer its status query: {str(err).splitlines()[0][:200]}"
        if described.status == WorkflowExecutionStatus.COMPLETED:
            result = await handle.result()
            # A run that re-checked an earlier one's sources shows what changed first, on its own.
            changes, rest = split_changes(result.final_report) if result.recheck else ("", "")
            title, body = report_html(rest if changes else result.final_report)
            out["result"] = {
                "status": result.status,
                "changes_html": report_html(changes)[1] if changes else "",
                "report_html": body + sources_html(result.citations),
                "title": title or result.question,
                "citations": [c.model_dump() for c in result.citations],
                "usage": result.usage.model_dump(),
                "usage_text": usage_text(result.usage),  # the CLI's wording
                "warnings": list(result.warnings),
                "sources": len(result.citations),
            }
            out["files"] = await self._files(run_id)
        elif described.status and described.status != WorkflowExecutionStatus.RUNNING:
            try:
                await handle.result()
            except WorkflowFailureError as err:
                out["failure"] = failure_message(err)
                if partial := partial_report(err):  # what the run found before it failed
                    out["partial_report_html"] = report_html(partial)[1]
            except Exception as err:  # terminated, timed out
                out["failure"] = str(err).splitlines()[0][:300]
        return out

    async def _describe(self, workflow_id: str):
        client = await self.client()
        try:
            return await client.get_workflow_handle(workflow_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise Problem(f"there is no run with id {workflow_id!r}", 404) from None
            raise

    async def _files(self, run_id: str) -> dict:
        files = {"md": True, "html": True, "json": True}
        for kind in ("podcast", "slides"):
            try:
                described = await (await self.client()).get_workflow_handle(side_id(run_id, kind)).describe()
                files[kind] = described.status.name.lower() if described.status else "unknown"
            except RPCError:
                files[kind] = None
        return files

    async def events(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            await self._describe(run_id)
        except Problem as problem:
            return JSONResponse({"error": str(problem)}, problem.status)
        start = request.headers.get("last-event-id") or request.query_params.get("from") or "-1"
        if start != "-1" and not (start.isascii() and start.isdigit() and len(start) <= 18):
            message = f"Last-Event-ID (or ?from=) must be the id of an event this stream sent, not {start[:40]!r}"
            return JSONResponse({"error": message}, 400)
        offset = int(start) + 1
        client = await self.client()

        async def stream():
            yield "retry: 1000\n\n"
            try:  # read by query (client/follow.py): following adds nothing to the run's history
                async for at, event in progress_events(client, run_id, max(offset, 0)):
                    if await request.is_disconnected():
                        break
                    data = json.dumps(event.model_dump(mode="json"))
                    yield f"id: {at}\nevent: progress\ndata: {data}\n\n"
            except Exception as err:  # the run is gone, or Temporal is: say so and end
                yield f"event: problem\ndata: {json.dumps(str(err).splitlines()[0][:300])}\n\n"
            yield "event: end\ndata: {}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    async def review(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return await self._answer(lambda: self._with_body(request, lambda b: self._update(run_id, "submit_review", b)))

    async def answer(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        update = "answer_clarification"
        return await self._answer(lambda: self._with_body(request, lambda b: self._update(run_id, update, b)))

    async def _update(self, run_id: str, update: str, body: Any) -> dict:
        if not isinstance(body, dict):
            raise Problem("send a JSON object")
        if update == "submit_review":
            feedback = str(body.get("feedback") or "").strip()
            if not feedback:
                raise Problem("the review is empty")
            args: list[Any] = [feedback]
            if isinstance(body.get("plan_version"), int):
                args.append(body["plan_version"])
        else:
            answer = str(body.get("answer") or "").strip()
            if not answer:
                raise Problem("the answer is empty")
            args = [answer]
        await self._describe(run_id)
        try:  # bounded: with no worker on the run's task queue, one line says so (client/updates.py)
            reply = await execute_update(await self.client(), run_id, update, args)
        except WorkflowUpdateFailedError as err:
            raise Problem(rejection_reason(err), 409) from None
        return {"message": reply}

    async def cancel(self, request: Request) -> Response:
        async def cancel() -> dict:
            from client.commands.cancel import request_cancel

            run_id = request.path_params["run_id"]
            described = await self._describe(run_id)
            if await request_cancel((await self.client()).get_workflow_handle(run_id), described):
                return {"message": "cancelled again: the run ends now with its findings and sources as the report"}
            return {"message": "cancel requested: the run writes a partial report"}

        return await self._answer(cancel)

    async def download(self, request: Request) -> Response:
        run_id, fmt = request.path_params["run_id"], request.path_params["fmt"]
        if fmt not in MEDIA:
            return JSONResponse({"error": f"unknown format {fmt!r}: use {', '.join(MEDIA)}"}, 404)

        async def fetch() -> Response:
            described = await self._describe(run_id)
            if described.status != WorkflowExecutionStatus.COMPLETED:
                raise Problem(f"run {run_id} has no report yet", 409)
            result = await (await self.client()).get_workflow_handle(run_id, result_type=ResearchResult).result()
            if fmt not in DOCUMENTS:
                body = await asyncio.to_thread(render, result, fmt)
            else:  # in a child, with limits, abandoned when the client leaves
                try:
                    body = await render_document_async(result, fmt, _client_left(request))
                except PdfUnavailable as err:
                    raise Problem(str(err), 501) from None
                except CliError as err:
                    raise Problem(str(err), 422) from None
                if body is None:
                    return Response(status_code=499)  # nobody is there to read it
            return Response(body, media_type=MEDIA[fmt], headers={"Content-Disposition": attachment(run_id, fmt)})

        return await self._answer(fetch)

    async def side_output(self, request: Request) -> Response:
        run_id, kind = request.path_params["run_id"], request.url.path.rsplit("/", 1)[1]

        async def make() -> dict:
            client = await self.client()
            source = await finished_report(client, run_id, self.conn.namespace)
            handle = await start_once(client, self.conn, kind, source, side_id(run_id, kind))
            return {"id": handle.id, "message": f"making the {kind}; it appears here when done"}

        async def fetch() -> Response:
            client = await self.client()
            workflow_id = side_id(run_id, kind)
            described = await self._describe(workflow_id)
            if described.status != WorkflowExecutionStatus.COMPLETED:
                raise Problem(f"the {kind} is not ready ({described.status.name.lower()})", 409)
            result = await client.get_workflow_handle(workflow_id, result_type=RESULT_TYPES[SIDE_TYPES[kind]]).result()
            ref, name, media = (
                (
                    result.audio.blob,
                    attachment(run_id, result.audio.format),
                    f"audio/{'mpeg' if result.audio.format == 'mp3' else 'wav'}",
                )
                if kind == "podcast"
                else (
                    result.deck.blob,
                    attachment(run_id, "pptx"),
                    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
                )
            )
            data = await blob_store(self.conn.data_dir).get_bytes(ref)
            return Response(data, media_type=media, headers={"Content-Disposition": name})

        return await self._answer(make if request.method == "POST" else fetch)

    async def ask(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return await self._answer(lambda: self._with_body(request, lambda body: self._ask(run_id, body)))

    async def _ask(self, run_id: str, body: Any) -> dict:
        from client import threads

        if not isinstance(body, dict) or not isinstance(body.get("question"), str):
            raise Problem('send {"question": "…"}')
        answer = await (await threads.ask(await self.client(), self.conn, run_id, body["question"]))
        return answer.model_dump(mode="json") | {"answer_html": report_html(answer.answer)[1]}

    async def schedules(self, request: Request) -> Response:
        from client.commands.schedule import schedule_rows

        return await self._answer(lambda: self._schedules(schedule_rows))

    async def _schedules(self, rows) -> dict:
        return {"schedules": await rows(await self.client())}

    async def _with_body(self, request: Request, work):
        return await work(await _json(request))

    async def _answer(self, work) -> Response:
        """JSON (or the response ``work`` made); every failure one clear line."""
        from client.errors import CliError
        from infra.errors import ConfigError, ConnectionFailed

        try:
            value = await work()
        except Problem as problem:
            return JSONResponse({"error": str(problem)}, problem.status)
        except (CliError, ConfigError) as err:
            return JSONResponse({"error": str(err)}, 409)
        except ConnectionFailed as err:
            return JSONResponse({"error": str(err)}, 503)
        except RPCError as err:
            return JSONResponse({"error": f"Temporal: {err.message}"}, 502)
        return value if isinstance(value, Response) else JSONResponse(value)


async def _json(request: Request) -> Any:
    """The request's JSON body, read up to ``MAX_BODY`` bytes; a Problem
    (413, 400) the moment it cannot be one."""
    declared = request.headers.get("content-length", "")
    too_big = Problem(f"the request body is larger than {MAX_BODY:,} bytes", 413)
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise too_big
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                raise too_big
    except ClientDisconnect:
        raise Problem("the client left before its request body ended", 400) from None
    try:
        return json.loads(body)
    except RecursionError:
        raise Problem("the request body's JSON is nested too deeply", 400) from None
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise Problem(f"the request body is not JSON: {str(err)[:200]}", 400) from None


async def _client_left(request: Request) -> None:
    """Returns when the client has closed the connection."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


# The page's own script and styles only; reports are HTML without scripts.
_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
