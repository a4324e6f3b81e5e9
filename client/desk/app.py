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
| POST /runs/{id}/steer | ``{"note": …, "urls": […]}`` through the ``steer`` update (``steer.py``) |
| GET  /runs/{id}/report.{md,html,json,pdf,docx} | downloads |
| POST /runs/{id}/{podcast,slides} | make them; GET downloads them when made |

Safe by default: it binds to loopback; on another address it needs to know
who is asking (client/desk/users.py): a trusted proxy's user header, users'
own tokens, or the shared ``DEEPRESEARCH_UI_TOKEN`` (an admin's; the page
gets a cookie from ``/?token=…``). Each user sees their own runs and those
shared with them, and acts only on their own (client/desk/access.py: 404 for
a run they may not see, 403 for one they may only read). It answers only to its own host names (loopback
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
from temporalio.service import RPCError

from client.desk import access, files
from client.desk.guard import AllowedHosts, Guard
from client.desk.inputs import InputProblem, run_input
from client.desk.problem import Problem
from client.desk.statements import traced
from client.desk.steer import steer_run
from client.desk.users import TOKEN_COOKIE, User, Who
from client.errors import CliError, failure_message, rejection_reason
from client.export import report_html, sources_html
from client.follow import progress_events
from client.runs import WORKFLOW_TYPE, new_workflow_id, start_research
from client.talk import QUERY_TIMEOUT
from client.updates import execute_update
from client.wording import usage_text
from infra.connection import Connection
from infra.temporal import connect
from workflows.changes import split_changes
from workflows.failures import partial_report
from workflows.models import (
    OWNER_ATTRIBUTE,
    PHASE_ATTRIBUTE,
    TITLE_ATTRIBUTE,
    ResearchResult,
    RunStatus,
)

SIDE = ("podcast", "slides")  # the side outputs the desk makes
MAX_BODY = 1 << 20  # bytes of a request's JSON body (a question is at most 20,000 characters)
PHASES = ("coordinating", "clarifying", "investigating", "planning", "awaiting_review", "researching", "reporting")


def create_app(
    conn: Connection,
    *,
    who: Who,
    temporal_ui: str | None = None,
    hosts: AllowedHosts | None = None,
    resource_dirs: Sequence[Path] = (),
    demo: str | None = None,
) -> Starlette:
    """``who``: who is asking (client/desk/users.py); ``hosts``: the names it answers to (loopback by default);
    ``resource_dirs``: the only folders a run's local documents come from;
    ``demo``: the note the page shows when its runs go to the demo's
    scripted model (`ui --demo`)."""
    desk = Desk(conn, temporal_ui)
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
        Route("/api/runs/{run_id:path}/steer", desk.steer, methods=["POST"]),
        Route("/api/runs/{run_id:path}/report.{fmt}", desk.download),
        Route("/api/runs/{run_id:path}/ask", desk.ask, methods=["POST"]),
        *(Route(f"/api/runs/{{run_id:path}}/{kind}", desk.side_output, methods=["GET", "POST"]) for kind in SIDE),
        Route("/api/runs/{run_id:path}", desk.run),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(Guard, who=who, hosts=hosts)
    return app


class Desk:
    def __init__(self, conn: Connection, temporal_ui: str | None) -> None:
        self.conn = conn
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
        signed_in = _user(request).token
        if signed_in and request.query_params.get("token") == signed_in:  # the token that let it in
            response.set_cookie(TOKEN_COOKIE, signed_in, httponly=True, samesite="strict")
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
        return await self._answer(lambda: self._health(_user(request)))

    async def _health(self, user: User) -> dict:
        await self.client()
        return {
            "temporal": self.conn.address,
            "namespace": self.conn.namespace,
            "temporal_ui": self.temporal_ui,
            "demo": self.demo,
            "user": user.name,
            "role": user.role,
        }

    async def list_runs(self, request: Request) -> Response:
        phase = request.query_params.get("phase") or ""
        return await self._answer(lambda: self._list(phase, _user(request)))

    async def _list(self, phase: str, user: User) -> dict:
        if phase and phase not in PHASES:
            raise Problem(f"unknown phase {phase!r}; use one of: {', '.join(PHASES)}")
        query = f'WorkflowType="{WORKFLOW_TYPE}"' + access.list_filter(user)  # the user's runs and those shared
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
                    "owner": run.typed_search_attributes.get(OWNER_ATTRIBUTE),
                    "started": run.start_time.isoformat(),
                }
            )
        runs.sort(key=lambda r: r["started"], reverse=True)
        return {"runs": runs}

    async def start(self, request: Request) -> Response:
        user = _user(request)
        if refused := access.start_problem(user):
            return JSONResponse({"error": str(refused)}, refused.status)
        return await self._answer(lambda: self._with_body(request, lambda body: self._start(body, user)))

    async def _start(self, body: Any, user: User) -> dict:
        try:  # only the allowed fields; local documents only from the resources folders
            research = await asyncio.to_thread(run_input, body, self.resource_dirs)
            research = research.model_copy(update={"owner": user.name})  # the asker's run
        except InputProblem as problem:
            raise Problem(str(problem)) from None
        handle = await start_research(await self.client(), self.conn, research, new_workflow_id())
        return {"id": handle.id}

    async def run(self, request: Request) -> Response:
        return await self._answer(lambda: self._run(request.path_params["run_id"], _user(request)))

    async def _run(self, run_id: str, user: User) -> dict:
        client = await self.client()
        handle = client.get_workflow_handle(run_id, result_type=ResearchResult)
        described = await access.check(client, run_id, user)
        if described.workflow_type != WORKFLOW_TYPE:
            raise Problem(f"{run_id} is a {described.workflow_type} workflow, not a research run", 404)
        owner, shared = access.owner_of(described)
        out: dict[str, Any] = {
            "id": run_id,
            "owner": owner,
            "shared_with": shared,
            "may_act": access.level(user, described) == "act",  # the page offers review, cancel, ask…
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
                "statements": traced(result.statements),  # how each statement is supported, for the page
                "plan_accepted_by": result.plan_accepted_by,
            }
            out["files"] = await files.side_files(client, run_id)
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

    async def events(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            await access.check(await self.client(), run_id, _user(request))
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
        run_id, user = request.path_params["run_id"], _user(request)
        return await self._answer(
            lambda: self._with_body(request, lambda b: self._update(run_id, "submit_review", b, user))
        )

    async def answer(self, request: Request) -> Response:
        run_id, user = request.path_params["run_id"], _user(request)
        update = "answer_clarification"
        return await self._answer(lambda: self._with_body(request, lambda b: self._update(run_id, update, b, user)))

    async def _update(self, run_id: str, update: str, body: Any, user: User) -> dict:
        if not isinstance(body, dict):
            raise Problem("send a JSON object")
        if update == "submit_review":
            feedback = str(body.get("feedback") or "").strip()
            if not feedback:
                raise Problem("the review is empty")
            args: list[Any] = [{"feedback": feedback, "by": user.name}]  # the history names who reviewed
            if isinstance(body.get("plan_version"), int):
                args.append(body["plan_version"])
        else:
            answer = str(body.get("answer") or "").strip()
            if not answer:
                raise Problem("the answer is empty")
            args = [answer]
        await access.check(await self.client(), run_id, user, "review" if update == "submit_review" else "answer")
        try:  # bounded: with no worker on the run's task queue, one line says so (client/updates.py)
            reply = await execute_update(await self.client(), run_id, update, args)
        except WorkflowUpdateFailedError as err:
            raise Problem(rejection_reason(err), 409) from None
        return {"message": reply}

    async def cancel(self, request: Request) -> Response:
        async def cancel() -> dict:
            from client.commands.cancel import request_cancel

            run_id, user = request.path_params["run_id"], _user(request)
            client = await self.client()
            described = await access.check(client, run_id, user, "cancel")
            # the history names who cancelled; a second cancel ends the partial report at once
            if await request_cancel(
                client, client.get_workflow_handle(run_id), described, user.name, "the research desk"
            ):
                return {"message": "cancelled again: the run ends now with its findings and sources as the report"}
            return {"message": "cancel requested: the run writes a partial report"}

        return await self._answer(cancel)

    async def steer(self, request: Request) -> Response:
        run_id, user = request.path_params["run_id"], _user(request)
        return await self._answer(lambda: self._with_body(request, lambda body: self._steer(run_id, body, user)))

    async def _steer(self, run_id: str, body: Any, user: User) -> dict:
        await access.check(await self.client(), run_id, user, "steer")  # not visible: 404; only readable: 403
        return await steer_run(await self.client(), run_id, body, user.name)

    async def download(self, request: Request) -> Response:
        return await files.download(self, request, _user(request))

    async def side_output(self, request: Request) -> Response:
        return await files.side_output(self, request, _user(request))

    async def ask(self, request: Request) -> Response:
        run_id, user = request.path_params["run_id"], _user(request)
        return await self._answer(lambda: self._with_body(request, lambda body: self._ask(run_id, body, user)))

    async def _ask(self, run_id: str, body: Any, user: User) -> dict:
        from client import threads

        if not isinstance(body, dict) or not isinstance(body.get("question"), str):
            raise Problem('send {"question": "…"}')
        await access.check(await self.client(), run_id, user, "ask")
        answer = await (await threads.ask(await self.client(), self.conn, run_id, body["question"]))
        return answer.model_dump(mode="json") | {"answer_html": report_html(answer.answer)[1]}

    async def schedules(self, request: Request) -> Response:
        from client.commands.schedule import schedule_rows

        user = _user(request)
        return await self._answer(lambda: self._schedules(schedule_rows, user))

    async def _schedules(self, rows, user: User) -> dict:
        return {"schedules": [row for row in await rows(await self.client()) if access.may_see_schedule(user, row)]}

    async def _with_body(self, request: Request, work):
        return await work(await _json(request))

    async def _answer(self, work) -> Response:
        """JSON (or the response ``work`` made); every failure one clear line."""
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


def _user(request: Request) -> User:
    """Who is asking (set by the guard, client/desk/users.py)."""
    return request.state.user


# The page's own script and styles only; reports are HTML without scripts.
_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
