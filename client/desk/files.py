"""The desk's downloads: a run's report (md, html, json, pdf, docx) and its
podcast and slides, and making those two. Reading needs the run to be
visible to the asker; making a podcast or slides is acting on the run
(client/desk/access.py)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from client.desk import access
from client.desk.problem import Problem
from client.desk.users import User
from client.errors import CliError
from client.export_child import render_document_async
from client.export_pdf import PdfUnavailable
from client.ids import attachment, side_id
from client.report_files import DOCUMENTS, render
from client.side_outputs import RESULT_TYPES, SIDE_TYPES, finished_report, start_once
from infra.blobs import blob_store
from workflows.models import ResearchResult

if TYPE_CHECKING:
    from temporalio.client import Client

Desk = Any  # client/desk/app.py's Desk (imported by it: no import back)

MEDIA = {
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "json": "application/json",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}


async def side_files(client: Client, run_id: str) -> dict:
    """What the run offers: its report's formats, and its podcast's and slides' state."""
    files: dict = {"md": True, "html": True, "json": True}
    for kind in ("podcast", "slides"):
        try:
            described = await client.get_workflow_handle(side_id(run_id, kind)).describe()
            files[kind] = described.status.name.lower() if described.status else "unknown"
        except RPCError:
            files[kind] = None
    return files


async def download(desk: Desk, request: Request, user: User) -> Response:
    run_id, fmt = request.path_params["run_id"], request.path_params["fmt"]
    if fmt not in MEDIA:
        return JSONResponse({"error": f"unknown format {fmt!r}: use {', '.join(MEDIA)}"}, 404)

    async def fetch() -> Response:
        client = await desk.client()
        described = await access.check(client, run_id, user)
        if described.status != WorkflowExecutionStatus.COMPLETED:
            raise Problem(f"run {run_id} has no report yet", 409)
        result = await client.get_workflow_handle(run_id, result_type=ResearchResult).result()
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

    return await desk._answer(fetch)


async def side_output(desk: Desk, request: Request, user: User) -> Response:
    run_id, kind = request.path_params["run_id"], request.url.path.rsplit("/", 1)[1]

    async def make() -> dict:
        client = await desk.client()
        await access.check(client, run_id, user, kind)
        source = await finished_report(client, run_id, desk.conn.namespace)
        handle = await start_once(client, desk.conn, kind, source, side_id(run_id, kind))
        return {"id": handle.id, "message": f"making the {kind}; it appears here when done"}

    async def fetch() -> Response:
        client = await desk.client()
        await access.check(client, run_id, user)
        workflow_id = side_id(run_id, kind)
        described = await access.describe(client, workflow_id)
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
        data = await blob_store(desk.conn.data_dir).get_bytes(ref)
        return Response(data, media_type=media, headers={"Content-Disposition": name})

    return await desk._answer(make if request.method == "POST" else fetch)


async def _client_left(request: Request) -> None:
    """Returns when the client has closed the connection."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
