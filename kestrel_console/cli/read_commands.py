"""Commands that only read the engine's tables: status, list, show (reports and ad-hoc SQL: query_commands).

Canned reads go through ``kestrel_console.read.Reader``; saved reports and ad-hoc SQL run
through the read-only guard (``adhoc.run_read_only``, three layers). Every command takes
``--format table|json|csv``; ``json`` and ``csv`` go to stdout untouched by notes, which go to
stderr.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.text import Text

from kestrel_core import STATUSES
from kestrel_core.db import describe_target

from .. import render
from ..humanize import duration
from ..read import Reader
from ..read import schedules as schedule_queries
from ..read.operations import OperationsReader
from ..read.operations import summary as operations_summary
from ..read.replica import describe_reads
from ..read.search import ExecutionFilter, parse_filter
from ..read.workers import live_versions_text
from ..safe_text import visible
from ..settings import Settings
from .errors import fail, handles_errors
from .options import execution_id_argument, parsed, settings, unset_option
from .read_session import CLI_TIMEOUT_MS, format_option, note, one_of, open_reader
from .summaries import print_decisions, print_pending_approvals, print_workers
from .timeline_view import render_timeline

STATUS_COLUMNS = [
    "workflow_name",
    *STATUSES,
    "total",
    "stuck_leases",
    "pending_approvals",
    "live_workers",
    "cannot_run",
]
LIST_COLUMNS = [
    "id",
    "workflow_name",
    "status",
    "created_at",
    "started_at",
    "finished_at",
    "age_s",
    "duration_s",
    "owner_id",
    "current_step",
    "error",
]
LIST_TABLE_COLUMNS = ["id", "workflow_name", "status", "age_s", "duration_s", "owner_id", "current_step", "error"]
TIMELINE_COLUMNS = [
    "execution_id",
    "kind",
    "step_id",
    "attempt",
    "started_at",
    "finished_at",
    "duration_s",
    "outcome",
    "error",
    "owner_id",
    "wake_at",
    "decision",
    "decided_by",
    "decided_by_db_user",
    "comment",
    "audited",
]
REPORT_LIST_COLUMNS = ["name", "description", "params", "path", "shipped", "overrides"]
# Shorter labels for the status table (json/csv keep the column names).
STATUS_HEADERS = {
    "workflow_name": "workflow",
    "stuck_leases": "stuck",
    "pending_approvals": "approvals",
    "live_workers": "workers",
    "cancelled": "cancel",
    "cannot_run": "no version",
}


# -- status ----------------------------------------------------------------------------------


def status_rows(overview: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per workflow: executions per status, stuck leases, pending approvals, and how
    many live workers registered it (0 with enqueued rows: nothing will run them)."""
    rows: dict[str, dict[str, Any]] = {}

    def row(name: str) -> dict[str, Any]:
        if name not in rows:
            rows[name] = {c: 0 for c in STATUS_COLUMNS}
            rows[name]["workflow_name"] = name
        return rows[name]

    for d in overview["queue_depth"]:
        row(d["workflow_name"])[d["status"]] = int(d["count"])
    for s in overview["stuck_leases"]:
        row(s["workflow_name"])["stuck_leases"] += 1
    for a in overview["pending_approvals"]:
        row(a["workflow_name"])["pending_approvals"] += 1
    for w in overview["workers"]:
        if w["alive"]:
            for name in w["workflows"] or []:
                row(name)["live_workers"] += 1
    for u in overview.get("unrunnable", []):
        row(u["workflow_name"])["cannot_run"] += int(u["enqueued"])
    for r in rows.values():
        r["total"] = sum(r[s] for s in STATUSES)
    return [rows[name] for name in sorted(rows)]


def _status_table(overview: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    con = render.console_for()
    if rows:
        totals = {c: sum(r[c] for r in rows) for c in STATUS_COLUMNS if c != "workflow_name"}
        totals["live_workers"] = sum(1 for w in overview["workers"] if w["alive"])
        render.emit(
            [*rows, {"workflow_name": "(all)", **totals}],
            STATUS_COLUMNS,
            "table",
            title="Queue depth by workflow and status",
            console=con,
            headers=STATUS_HEADERS,
        )
    else:
        render.emit(
            [],
            STATUS_COLUMNS,
            "table",
            title="Queue depth by workflow and status",
            empty="no executions yet",
            console=con,
        )
    for u in overview["unserved_workflows"]:
        con.print(
            Text("no worker registered: ", style="bold yellow")
            + Text(
                f"workflow {u['workflow_name']!r} has {u['enqueued']} enqueued (oldest "
                f"{duration(u['oldest_age_s'], clamp=True)} ago) but no live worker runs it"
            )
        )
    for line in cannot_run_lines(overview):
        con.print(Text("cannot run: ", style="bold yellow") + Text(line))
    con.print()
    render.emit(
        overview["stuck_leases"],
        ["id", "workflow_name", "owner_id", "expired_for_s", "owner_heartbeat_age_s"],
        "table",
        title="Stuck leases (running, lease expired)",
        empty="none",
        console=con,
        headers={
            "workflow_name": "workflow",
            "owner_id": "owner",
            "expired_for_s": "lease expired",
            "owner_heartbeat_age_s": "owner's last heartbeat",
        },
    )
    con.print()
    summary = (overview.get("approvals_summary") or [{}])[0]
    print_pending_approvals(
        con, overview["pending_approvals"], int(summary.get("count") or 0), summary.get("oldest_age_s")
    )
    con.print()
    print_workers(con, overview["workers"])


def cannot_run_lines(overview: dict[str, Any]) -> list[str]:
    """Enqueued executions no live worker can run now: wrong version, or a paused queue."""
    lines = [
        f"{u['enqueued']} enqueued {u['workflow_name']!r} {'needs' if u['enqueued'] == 1 else 'need'} version "
        f"{visible(str(u['version']))}, "
        f"live workers have {visible(live_versions_text(u['live_versions']))}"
        for u in overview.get("unrunnable", [])
    ]
    lines += [
        f"queue {q['name']!r} is paused (by {visible(q['paused_by'] or '?')}) with {q['enqueued']} "
        f"enqueued: kestrel-console queue resume {visible(q['name'])}"
        for q in overview.get("queues", [])
        if q["paused"] and q["enqueued"]
    ]
    return lines


def _schedule_notes(stalled: list[tuple[dict[str, Any], str]]) -> None:
    """Why a schedule is not producing runs: paused, no worker ticking, no worker for its workflow."""
    con = render.console_for()
    for row, reason in stalled:
        label = "paused schedule: " if row["paused"] else "schedule not running: "
        con.print(
            Text(label, style="bold yellow")
            + Text(
                f"{row['name']!r} ({visible(row['workflow_name'])}, '{visible(row['cron'])}' "
                f"{visible(row['timezone'])}) {reason}"
            )
        )


def status(
    ctx: typer.Context,
    fmt: str = format_option(),
    everything: bool = typer.Option(
        False,
        "--all",
        help="With --format json: one object with every part (queues, paused queues, enqueued "
        "per queue, running, stuck leases, pending approvals, workers), the numbers "
        "`kestrel-console metrics` exports.",
    ),
) -> None:
    """Queue depth by status and workflow, stuck leases, pending approvals, workflows
    enqueued that no live worker registered, and schedules paused or not ticking.

    Also: executions no live worker can run (they need a code version no live worker has, or
    their queue is paused), with the reason.

    json/csv: one row per workflow with its counts per status, stuck_leases,
    pending_approvals, live_workers and cannot_run (enqueued that need a version no live
    worker has). --format json --all: one object with every part (docs/metrics.md).
    """
    s = settings(ctx)
    if everything:
        if fmt != "json":
            fail("--all goes with --format json (one object with every part)", code=2)
        _status_everything(s)
        return
    with open_reader(s) as reader:
        overview = handles_errors(reader.overview)()
        stalled_schedules = handles_errors(schedule_queries.stalled)(reader)
    rows = status_rows(overview)
    if fmt == "table":
        _status_table(overview, rows)
        _schedule_notes(stalled_schedules)
    else:
        render.emit(rows, STATUS_COLUMNS, fmt)


def _status_everything(s: Settings) -> None:
    """``status --format json --all``: the on-call snapshot the metrics endpoint reads."""
    import json

    reader = OperationsReader(s.reads_dsn, schema=s.schema, statement_timeout_ms=CLI_TIMEOUT_MS)
    try:
        ops = handles_errors(reader.operations)()
        if s.read_dsn:
            note(describe_reads(describe_target(s.read_dsn), ops["replica"]))
    finally:
        reader.close()
    typer.echo(json.dumps(operations_summary(ops), indent=2, default=str))


# -- list ------------------------------------------------------------------------------------


def _filter(text: str) -> ExecutionFilter:
    return parsed(parse_filter, text, "--where")


def list_(
    ctx: typer.Context,
    status: str | None = unset_option(
        "--status",
        callback=one_of(STATUSES, "--status"),
        help=f"Only executions in this status ({', '.join(STATUSES)}).",
    ),
    workflow: str | None = unset_option(
        "--workflow", metavar="PREFIX", help="Only workflows whose name starts with this (case-sensitive)."
    ),
    where: ExecutionFilter | None = unset_option(
        "--where",
        metavar="FILTER",
        parser=_filter,
        help="The console's filter language, e.g. 'status:error input.pod=api-1 since:2h' "
        "(keys id: key: status: workflow: input.FIELD= since: from: until:, and free text; "
        "see docs/console.md).",
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="At most this many rows."),
    fmt: str = format_option(),
) -> None:
    """Executions, newest first. A --workflow no name starts with is refused (exit 1) with
    the closest names."""
    s = settings(ctx)
    f = where or ExecutionFilter()
    if status and f.status and f.status != status:
        raise typer.BadParameter(f"--where says status:{f.status}, --status {status}: give one", param_hint="--status")
    if workflow and f.workflow:
        raise typer.BadParameter("--where names a workflow already: give one", param_hint="--workflow")
    if status:
        f = f.merged(status=status)
    if workflow:
        f = f.merged(workflow=workflow, exact=False)
    with open_reader(s) as reader:
        rows = handles_errors(reader.list_executions)(where=f, limit=limit)
        unknown = handles_errors(reader.unknown_workflow)(f.workflow) if f.workflow and not rows else None
    if unknown:
        fail(unknown)
    if fmt == "table":
        render.emit(rows, LIST_TABLE_COLUMNS, fmt, empty="no executions match")
    else:
        render.emit(rows, LIST_COLUMNS, fmt)


# -- show ------------------------------------------------------------------------------------


def _show_data(
    reader: Reader, execution_id: int
) -> tuple[dict[str, Any], list[dict], list[dict], str | None, list[dict]]:
    execution = reader.execution(execution_id)
    if execution is None:
        fail(f"no execution with id {execution_id}\nList executions with: kestrel-console list")
    return (
        execution,
        reader.timeline(execution_id),
        reader.steps(execution_id),
        reader.blocker(execution_id, cli=True),
        reader.actions(execution_id),
    )


def show(
    ctx: typer.Context,
    execution_id: int = execution_id_argument(),
    fmt: str = format_option(),
) -> None:
    """One execution and its per-step timeline (every attempt and wait, with a bar scaled to
    the execution's span).

    json: one object with the execution's columns, its blocker (why it is not moving, or
    null), its checkpoints (steps), its timeline and the operator actions taken on it (actor:
    the name the operator gave; db_user: the database role that acted). csv: the timeline, one
    row per attempt or wait.
    """
    s = settings(ctx)
    with open_reader(s) as reader:
        execution, timeline, steps, blocker, actions = handles_errors(_show_data)(reader, execution_id)
        now = handles_errors(reader.now)()
    if fmt == "table":
        con = render.console_for()
        render_timeline(execution, timeline, now=now, blocker=blocker, console=con)
        print_decisions(con, timeline)
        render.render_actions(actions, console=con)
    elif fmt == "json":
        render.emit(
            [{**execution, "blocker": blocker, "steps": steps, "timeline": timeline, "actions": actions}], None, "json"
        )
    else:
        render.emit([{"execution_id": execution["id"], **t} for t in timeline], TIMELINE_COLUMNS, "csv")


def register(app: typer.Typer) -> None:
    app.command()(status)
    app.command("list")(list_)
    app.command()(show)
