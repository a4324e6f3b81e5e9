"""`deepresearch schedule create|list|pause|unpause|trigger|delete`: research
that repeats, on a Temporal Schedule (it shows on the Temporal UI's Schedules
page and survives restarts of the server and the workers).

Each scheduled run is an ordinary ``DeepResearch`` run whose input names the
schedule: it builds on the schedule's last completed run and its report opens
with "What changed since <date>" (workflows/continuation.py). Plans are
auto-accepted unless the schedule was created with ``--review``.

Policy: one run at a time (a run still going, e.g. waiting for review, makes
the next start be skipped), and a start missed while the Temporal server was
down is made up once if the server is back within ``CATCHUP_WINDOW``, else
skipped.
"""

from __future__ import annotations

import argparse
import re
from datetime import timedelta

from client.errors import CliError
from client.options import connection, research_input
from client.runs import run_details, run_memo, run_summary
from infra.errors import cli_name
from infra.temporal import connect

CATCHUP_WINDOW = timedelta(minutes=10)
_DURATION = re.compile(r"(\d{1,6})([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def parse_every(text: str) -> timedelta:
    """``1w``, ``1d12h``, ``90m``, ``30s`` as a duration; one clear line otherwise."""
    compact = text.strip().lower().replace(" ", "")
    parts = _DURATION.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        raise CliError(f"--every {text!r}: give a duration such as 1w, 1d, 12h, 30m or 1h30m")
    seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds < 1:
        raise CliError("--every must be at least one second")
    return timedelta(seconds=seconds)


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise CliError(f"schedule name {name!r}: use letters, digits, '.', '_' and '-' (at most 100)")
    return name


async def main(args: argparse.Namespace) -> int:
    if getattr(args, "demo", False) and not getattr(args, "task_queue", None):
        from client.talk import DEMO_TASK_QUEUE

        args.task_queue = DEMO_TASK_QUEUE  # the demo's scripted model: `worker --demo` serves it
    conn = connection(args)
    if args.action == "create":
        spec = timing(args)  # bad input: one line before anything connects
        return await create(await connect(conn), conn, args, spec)
    client = await connect(conn)
    if args.action == "list":
        return await list_schedules(client)
    handle = client.get_schedule_handle(check_name(args.name))
    try:
        await handle.describe()
    except Exception as err:  # noqa: BLE001 - RPCError NOT_FOUND, in any wording
        raise CliError(f"no schedule named {args.name!r} (see `{cli_name()} schedule list`)") from err
    if args.action == "pause":
        await handle.pause(note=f"paused with `{cli_name()} schedule pause`")
        print(f"schedule {args.name} paused; `{cli_name()} schedule unpause {args.name}` resumes it")
    elif args.action == "unpause":
        await handle.unpause(note=f"resumed with `{cli_name()} schedule unpause`")
        print(f"schedule {args.name} resumed")
    elif args.action == "trigger":
        await handle.trigger()
        print(f"schedule {args.name}: a run starts now")
    else:
        await handle.delete()
        print(f"schedule {args.name} deleted (its runs stay; `{cli_name()} list` shows them)")
    return 0


def timing(args: argparse.Namespace):
    """The schedule's spec from ``--every`` or ``--cron`` (the server checks a
    cron expression's fields); one clear line when it cannot be one."""
    from temporalio.client import ScheduleIntervalSpec, ScheduleSpec

    check_name(args.name)
    if args.every is not None:
        return ScheduleSpec(intervals=[ScheduleIntervalSpec(every=parse_every(args.every))])
    cron = (args.cron or "").strip()
    if not cron:
        raise CliError("--cron: give a cron expression such as '0 8 * * MON-FRI'")
    return ScheduleSpec(cron_expressions=[cron])


async def create(client, conn, args: argparse.Namespace, spec) -> int:
    from temporalio.client import (
        Schedule,
        ScheduleActionStartWorkflow,
        ScheduleAlreadyRunningError,
        ScheduleOverlapPolicy,
        SchedulePolicy,
    )
    from temporalio.service import RPCError, RPCStatusCode

    from client.runs import run_attributes

    name = args.name
    request = research_input(args).model_copy(update={"schedule": name, "auto_accept_plan": not args.review})
    # Each run shows its phase and title in `list` and the Temporal UI, as a run `start`ed does,
    # and belongs to the schedule's creator (shared as the schedule says).
    attributes = await run_attributes(client, conn, request)
    memo = run_memo(request) | {"schedule": name}
    action = ScheduleActionStartWorkflow(
        "DeepResearch",
        request,
        id=args.id or name,  # Temporal appends the start time to each run's id
        task_queue=conn.task_queue,
        memo=memo,
        static_summary=run_summary(request),
        static_details=run_details(request),
        typed_search_attributes=attributes,
    )
    policy = SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP, catchup_window=CATCHUP_WINDOW)
    try:
        await client.create_schedule(name, Schedule(action=action, spec=spec, policy=policy))
    except ScheduleAlreadyRunningError:
        raise CliError(f"a schedule named {name!r} already exists (delete it first, or choose another name)") from None
    except RPCError as err:
        if err.status != RPCStatusCode.INVALID_ARGUMENT or not args.cron:
            raise
        raise CliError(f"--cron {args.cron!r}: {err.message}") from None
    if args.cron and not (await client.get_schedule_handle(name).describe()).info.next_action_times:
        await client.get_schedule_handle(name).delete()  # it could never start a run
        raise CliError(f"--cron {args.cron!r} never fires (no date matches it): no schedule created")
    when = f"every {args.every}" if args.every else f"on cron {args.cron!r}"
    print(
        f"schedule {name} created: {when}, each run builds on the last completed one and opens with what changed; "
        f"plans {'wait for review' if args.review else 'are accepted automatically'}. "
        f"See `{cli_name()} schedule list` and the Temporal UI's Schedules page."
    )
    if getattr(args, "demo", False):
        print(f"its runs go to the demo's scripted model: they run while `{cli_name()} worker --demo` runs")
    return 0


async def schedule_rows(client) -> list[dict]:
    """Each schedule: name, when, state, runs started, the last run, the next
    time, and what the last run's re-check found."""
    rows = []
    async for listed in await client.list_schedules():
        described = await client.get_schedule_handle(listed.id).describe()
        info, spec = described.info, described.schedule.spec
        every = (
            ", ".join(_human(i.every) for i in spec.intervals)
            or ", ".join(spec.cron_expressions)
            or ", ".join(cron_text(c) for c in spec.calendars)  # the server keeps a cron expression so
            or "?"
        )
        last = info.recent_actions[-1].action.workflow_id if info.recent_actions else None
        owner, shared = schedule_owner(described.schedule.action)
        rows.append(
            {
                "name": listed.id,
                "owner": owner,  # whose runs it starts (the desk shows a schedule to who may see them)
                "shared_with": shared,
                "every": every,
                "state": "paused" if described.schedule.state.paused else "active",
                "runs": info.num_actions,
                "last": last or "-",
                "changes": await last_changes(client, last) if last else "-",
                "next": info.next_action_times[0].isoformat(timespec="seconds")
                if info.next_action_times and not described.schedule.state.paused
                else "-",
            }
        )
    return rows


def schedule_owner(action) -> tuple[str | None, list[str]]:
    """Whose runs a schedule starts, and who they are shared with (its action's search attributes)."""
    from workflows.models import OWNER_ATTRIBUTE, SHARED_ATTRIBUTE

    attributes = getattr(action, "typed_search_attributes", None)
    if attributes is None:
        return None, []
    return attributes.get(OWNER_ATTRIBUTE), list(attributes.get(SHARED_ATTRIBUTE) or [])


async def last_changes(client, workflow_id: str) -> str:
    """What a scheduled run's re-check found (its memo, workflows/recheck.py),
    or how far it is: running, the first run (nothing to compare with), failed."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    try:
        described = await client.get_workflow_handle(workflow_id).describe()
        found = await described.memo_value("recheck", "")
    except RPCError:
        return "-"  # gone from the server (retention)
    if found:
        return str(found) + (" (still running)" if described.status == WorkflowExecutionStatus.RUNNING else "")
    if described.status == WorkflowExecutionStatus.RUNNING:
        return "running"
    if described.status == WorkflowExecutionStatus.COMPLETED:
        return "first run: nothing to compare with"
    return (described.status.name if described.status else "-").lower().replace("_", " ")


async def list_schedules(client) -> int:
    keys = ("name", "every", "state", "runs", "last", "changes", "next", "owner")
    rows = [tuple("-" if row[k] is None else str(row[k]) for k in keys) for row in await schedule_rows(client)]
    if not rows:
        print(f"no schedules (create one with `{cli_name()} schedule create NAME QUESTION --every 1w`)")
        return 0
    header = ("NAME", "EVERY", "STATE", "RUNS", "LAST RUN", "IT FOUND", "NEXT", "OWNER")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
    return 0


def _human(every: timedelta) -> str:
    seconds = int(every.total_seconds())
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# A calendar's fields in cron's order, with each field's full range (what reads as "*").
_CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day_of_month", 1, 31), ("month", 1, 12), ("day_of_week", 0, 6))
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


def cron_text(calendar) -> str:
    """A ``ScheduleCalendarSpec`` (the form the server keeps a cron expression
    in) as a cron expression again: ``0 8 * * MON-FRI``."""
    fields = []
    for name, low, high in _CRON_FIELDS:
        parts = []
        for r in getattr(calendar, name):
            end = max(r.end, r.start)
            step = f"/{r.step}" if r.step > 1 else ""
            if (r.start, end) == (low, high):
                parts.append("*" + step)
                continue
            show = (lambda n: _DAYS[n % 7]) if name == "day_of_week" else str
            parts.append((show(r.start) if end == r.start else f"{show(r.start)}-{show(end)}") + step)
        fields.append(",".join(parts) or "*")
    return " ".join(fields)
