"""`deepresearch ui`: the research desk in the browser. It talks to Temporal
through the same client code as the CLI and starts nothing else."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os

from client.errors import CliError
from client.options import connection
from client.users import cli_user
from infra.errors import ConnectionFailed
from infra.temporal import connect

TOKEN_ENV = "DEEPRESEARCH_UI_TOKEN"
USERS_ENV = "DEEPRESEARCH_UI_USERS"


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def temporal_ui_url(address: str) -> str:
    """The Temporal UI for runs' links: DEEPRESEARCH_TEMPORAL_UI_URL, else the
    dev server's UI port next to the address."""
    configured = (os.environ.get("DEEPRESEARCH_TEMPORAL_UI_URL") or "").strip().rstrip("/")
    if configured:
        return configured
    host, _, port = address.rpartition(":")
    ui_port = int(port) + 1000 if port.isdigit() else 8233
    return f"http://{host or 'localhost'}:{ui_port}"


async def main(args: argparse.Namespace) -> int:
    from client.desk.app import create_app
    from client.desk.guard import HOSTS_ENV, AllowedHosts
    from client.desk.inputs import RESOURCES_ENV, InputProblem, resource_dirs
    from client.desk.users import HEADER_ENV, PROXIES_ENV, Who

    if getattr(args, "new_user", None):
        return make_user(args)
    token = (os.environ.get(TOKEN_ENV) or "").strip() or None
    try:
        who = Who.from_env(os.environ, cli_user(), token)
        hosts = AllowedHosts.from_setting(args.host, os.environ.get(HOSTS_ENV))
        folders = resource_dirs(getattr(args, "resources_dir", None) or (), os.environ.get(RESOURCES_ENV))
    except (ValueError, InputProblem) as err:
        raise CliError(str(err)) from None
    if not is_loopback(args.host) and who.open:
        raise CliError(
            f"the desk would be reachable from other machines on {args.host}: say who may use it: "
            f"set {TOKEN_ENV} to a secret (then open the page with ?token=…), {USERS_ENV} to a users file, or "
            f"{HEADER_ENV} and {PROXIES_ENV} for a signing-in proxy (docs/deploy.md); or bind to 127.0.0.1"
        )
    desk = {"who": who, "hosts": hosts, "resource_dirs": folders}
    if getattr(args, "demo", False):
        return await demo_desk(args, desk)
    conn = connection(args)
    try:
        client = await connect(conn)
        where = f"Temporal at {conn.address} (namespace {conn.namespace})"
        await check_owner_attributes(client, conn, who)
    except ConnectionFailed as err:
        where = f"{err} — the desk shows this until Temporal is reachable"
    await serve(args, create_app(conn, temporal_ui=temporal_ui_url(conn.address), **desk), where, desk)
    return 0


async def check_owner_attributes(client, conn, who) -> None:
    """A desk with users needs the server to know runs' owners: one line when it cannot."""
    from infra.search_attributes import OWNER_ATTRIBUTES, search_attributes_ready

    if (who.users or who.header) and not OWNER_ATTRIBUTES <= await search_attributes_ready(
        client.service_client, conn.namespace
    ):
        raise CliError(
            f"the desk's users see only their own runs, which needs the search attributes "
            f"{' and '.join(sorted(OWNER_ATTRIBUTES))} on the Temporal server: register them "
            "(docs/deploy.md) or give this desk operator rights once"
        )


def make_user(args: argparse.Namespace) -> int:
    """`ui --new-user NAME [--role R] [--team T]`: a token and its users-file line."""
    from client.desk.users import new_user

    path = (os.environ.get(USERS_ENV) or "").strip() or None
    try:
        token, line = new_user(args.new_user, args.role, tuple(args.team), path)
    except (ValueError, OSError) as err:
        raise CliError(f"--new-user: {err}") from None
    if path:
        print(f"added {args.new_user} ({args.role}) to {path}")
    else:
        print(f"add this line to the users file ({USERS_ENV}):\n{line}")
    print(f"{args.new_user}'s token (give it to them; it is not stored anywhere): {token}")
    return 0


async def serve(args: argparse.Namespace, app, where: str, desk: dict) -> None:
    import uvicorn

    from client.desk.guard import HOSTS_ENV

    who, hosts, folders = desk["who"], desk["hosts"], desk["resource_dirs"]
    shown = f"http://{args.host}:{args.port}/" + ("?token=…" if who.shared_token or who.users else "")
    print(f"research desk at {shown}; {where}; Ctrl-C to stop", flush=True)
    print(f"users: {users_text(who)}", flush=True)
    if not hosts.named and not is_loopback(args.host):
        print(f"it answers only to {hosts.describe(args.port)}: list its other names in {HOSTS_ENV}", flush=True)
    if folders:
        print(f"local documents from: {', '.join(map(str, folders))}", flush=True)
    # proxy_headers off: the peer address decides whether a user header is trusted
    # (client/desk/users.py), so nothing may rewrite it from X-Forwarded-For.
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
        proxy_headers=False,
    )
    await uvicorn.Server(config).serve()


def users_text(who) -> str:
    """Who may use the desk, in one line (printed at start)."""
    ways = []
    if who.header:
        ways.append(f"the {who.header} header from {', '.join(map(str, who.proxies))}")
    if who.users:
        ways.append(f"tokens of {who.users.path} ({len(who.users.users)} users)")
    if who.shared_token:
        ways.append(f"the shared {TOKEN_ENV} (an admin, as {who.local_user})")
    return "; ".join(ways) if ways else f"only {who.local_user} (an admin): nothing else is configured"


async def demo_desk(args: argparse.Namespace, desk: dict) -> int:
    """The desk with a worker of the demo's scripted model in this process,
    on the demo's task queue (and the embedded server when none runs): runs
    started on the page, their follow-up questions and schedules need no key."""
    from client.commands.run import in_process_worker, own_server
    from client.demo.backend import DEMO_TASK_QUEUE, SCRIPTED, demo_backend, ignored_pace
    from client.desk.app import create_app
    from client.display import make_console
    from infra.settings import Settings

    ignored = ignored_pace()  # not a rate: refused before anything starts
    console = make_console()
    args.task_queue = getattr(args, "task_queue", None) or DEMO_TASK_QUEUE
    notice = f"DEMO: {SCRIPTED}"
    console.print(notice, style="bold yellow", markup=False)
    if ignored:
        console.print(ignored, markup=False)
    with demo_backend(), own_server(connection(args), console) as (conn, ui_url):
        async with in_process_worker(conn, Settings.from_env()) as worker:
            app = create_app(conn, temporal_ui=ui_url or temporal_ui_url(conn.address), demo=notice, **desk)
            where = f"Temporal at {conn.address}; runs go to task queue {conn.task_queue!r}, served here"
            serving = asyncio.ensure_future(serve(args, app, where, desk))
            await asyncio.wait({serving, worker}, return_when=asyncio.FIRST_COMPLETED)
            if worker.done() and not serving.done():  # the worker could not start (one line, as `worker` says it)
                serving.cancel()
                worker.result()
            await serving
    return 0
