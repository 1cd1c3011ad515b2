"""Commands that only read: status, list, show, report, sql.

Canned reads go through ``kestrel_console.queries.Reader``; saved reports and ad-hoc SQL run
through the read-only guard (``adhoc.run_read_only``). Every command takes
``--format table|json|csv``; ``json`` and ``csv`` go to stdout untouched by notes, which go to
stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

import psycopg
import typer
from rich.text import Text

from kestrel_core.connection import connect
from kestrel_core.execution import STATUSES

from .. import render, schedule_queries
from ..queries import APPLICATION_NAME, Reader
from .errors import fail, handles_errors
from .settings import Settings, settings

# A command run by hand may wait longer than a TUI refresh, but never hangs.
CLI_TIMEOUT_MS = 10_000
DEFAULT_MAX_ROWS = 1000

STATUS_COLUMNS = ["workflow_name", *STATUSES, "total", "stuck_leases", "pending_approvals", "live_workers"]
LIST_COLUMNS = ["id", "workflow_name", "status", "created_at", "started_at", "finished_at", "age_s",
                "duration_s", "owner_id", "current_step", "error"]
LIST_TABLE_COLUMNS = ["id", "workflow_name", "status", "age_s", "duration_s", "owner_id",
                      "current_step", "error"]
TIMELINE_COLUMNS = ["execution_id", "kind", "step_id", "attempt", "started_at", "finished_at",
                    "duration_s", "outcome", "error", "owner_id", "wake_at", "decision",
                    "decided_by", "comment"]
REPORT_LIST_COLUMNS = ["name", "description", "params", "path", "shipped", "overrides"]
# Shorter labels for the status table (json/csv keep the column names).
STATUS_HEADERS = {"workflow_name": "workflow", "stuck_leases": "stuck", "pending_approvals": "approvals",
                  "live_workers": "workers", "cancelled": "cancel"}


def _choice(allowed: tuple[str, ...], option: str) -> Any:
    def check(value: str | None) -> str | None:
        if value is not None and value not in allowed:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)}", param_hint=option)
        return value
    return check


def format_option() -> Any:
    return typer.Option(
        "table", "--format", "-f", callback=_choice(render.FORMATS, "--format"),
        help="Output: table (for people), json (array of objects), csv (with a header row).",
    )


@contextmanager
def _reader(s: Settings) -> Iterator[Reader]:
    reader = Reader(s.dsn, schema=s.schema, statement_timeout_ms=CLI_TIMEOUT_MS)
    try:
        yield reader
    finally:
        reader.close()


@contextmanager
def _connection(s: Settings) -> Iterator[psycopg.Connection]:
    conn = connect(s.dsn, application_name=APPLICATION_NAME, connect_timeout=5)
    try:
        yield conn
    finally:
        conn.close()


def _note(message: str) -> None:
    typer.echo(message, err=True)


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
    for r in rows.values():
        r["total"] = sum(r[s] for s in STATUSES)
    return [rows[name] for name in sorted(rows)]


def _status_table(overview: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    con = render.console_for()
    if rows:
        totals = {c: sum(r[c] for r in rows) for c in STATUS_COLUMNS if c != "workflow_name"}
        totals["live_workers"] = sum(1 for w in overview["workers"] if w["alive"])
        render.emit([*rows, {"workflow_name": "(all)", **totals}], STATUS_COLUMNS, "table",
                    title="Queue depth by workflow and status", console=con, headers=STATUS_HEADERS)
    else:
        render.emit([], STATUS_COLUMNS, "table", title="Queue depth by workflow and status",
                    empty="no executions yet", console=con)
    for u in overview["unserved_workflows"]:
        con.print(Text("no worker registered: ", style="bold yellow") + Text(
            f"workflow {u['workflow_name']!r} has {u['enqueued']} enqueued (oldest "
            f"{render.human_duration(u['oldest_age_s'])} ago) but no live worker runs it"))
    con.print()
    render.emit(overview["stuck_leases"], ["id", "workflow_name", "owner_id", "expired_for_s", "owner_heartbeat_age_s"],
                "table", title="Stuck leases (running, lease expired)", empty="none", console=con,
                headers={"workflow_name": "workflow", "owner_id": "owner", "expired_for_s": "lease expired",
                         "owner_heartbeat_age_s": "owner's last heartbeat"})
    con.print()
    render.emit(overview["pending_approvals"],
                ["execution_id", "workflow_name", "step_id", "waiting_s", "deadline", "details"],
                "table", title="Pending approvals", empty="none", console=con,
                headers={"execution_id": "id", "workflow_name": "workflow", "step_id": "step"})
    con.print()
    render.emit(overview["workers"],
                ["worker_id", "hostname", "pid", "alive", "held", "concurrency", "heartbeat_age_s", "workflows"],
                "table", title="Workers (seen in the last hour)", empty="none", console=con,
                headers={"worker_id": "worker", "hostname": "host", "concurrency": "slots",
                         "heartbeat_age_s": "last heartbeat"})


def _schedule_notes(stalled: list[tuple[dict[str, Any], str]]) -> None:
    """Why a schedule is not producing runs: paused, no worker ticking, no worker for its workflow."""
    con = render.console_for()
    for row, reason in stalled:
        label = "paused schedule: " if row["paused"] else "schedule not running: "
        con.print(Text(label, style="bold yellow") + Text(
            f"{row['name']!r} ({row['workflow_name']}, '{row['cron']}' {row['timezone']}) {reason}"))


def status(ctx: typer.Context, fmt: str = format_option()) -> None:
    """Queue depth by status and workflow, stuck leases, pending approvals, workflows
    enqueued that no live worker registered, and schedules paused or not ticking.

    json/csv: one row per workflow with its counts per status, stuck_leases,
    pending_approvals and live_workers.
    """
    s = settings(ctx)
    with _reader(s) as reader:
        overview = handles_errors(reader.overview)()
        stalled_schedules = handles_errors(schedule_queries.stalled)(reader)
    rows = status_rows(overview)
    if fmt == "table":
        _status_table(overview, rows)
        _schedule_notes(stalled_schedules)
    else:
        render.emit(rows, STATUS_COLUMNS, fmt)


# -- list ------------------------------------------------------------------------------------


def list_(
    ctx: typer.Context,
    status: Optional[str] = typer.Option(None, "--status", callback=_choice(STATUSES, "--status"),
                                         help=f"Only executions in this status ({', '.join(STATUSES)}).",
                                         show_default=False),
    workflow: Optional[str] = typer.Option(None, "--workflow", help="Only this workflow name.",
                                           show_default=False),
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="At most this many rows."),
    fmt: str = format_option(),
) -> None:
    """Executions, newest first."""
    s = settings(ctx)
    with _reader(s) as reader:
        rows = handles_errors(reader.list_executions)(status=status, workflow=workflow, limit=limit)
    if fmt == "table":
        render.emit(rows, LIST_TABLE_COLUMNS, fmt, empty="no executions match")
    else:
        render.emit(rows, LIST_COLUMNS, fmt)


# -- show ------------------------------------------------------------------------------------


def _show_data(reader: Reader, execution_id: int) -> tuple[dict[str, Any], list[dict], list[dict], str | None]:
    execution = reader.execution(execution_id)
    if execution is None:
        fail(f"no execution with id {execution_id}\nList executions with: kestrel-console list")
    return execution, reader.timeline(execution_id), reader.steps(execution_id), reader.blocker(execution_id)


def show(
    ctx: typer.Context,
    execution_id: int = typer.Argument(..., metavar="ID", help="Execution id."),
    fmt: str = format_option(),
) -> None:
    """One execution and its per-step timeline (every attempt and wait, with a bar scaled to
    the execution's span).

    json: one object with the execution's columns, its blocker (why it is not moving, or
    null), its checkpoints (steps) and its timeline. csv: the timeline, one row per attempt or wait.
    """
    s = settings(ctx)
    with _reader(s) as reader:
        execution, timeline, steps, blocker = handles_errors(_show_data)(reader, execution_id)
        now = handles_errors(reader.now)()
    if fmt == "table":
        render.render_timeline(execution, timeline, now=now, blocker=blocker)
    elif fmt == "json":
        render.emit([{**execution, "blocker": blocker, "steps": steps, "timeline": timeline}], None, "json")
    else:
        render.emit([{"execution_id": execution["id"], **t} for t in timeline], TIMELINE_COLUMNS, "csv")


# -- report ----------------------------------------------------------------------------------


def _parse_params(values: list[str]) -> dict[str, str]:
    given: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            fail(f"bad --param {item!r}: write it as KEY=VALUE (for example --param since='2 days')")
        if key in given:
            fail(f"--param {key} is given twice")
        given[key] = value
    return given


def _report_listing(reports: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for report in reports.values():
        rows.append({
            "name": report.name,
            "description": report.description,
            "params": [{"name": p.name, "type": p.type, "default": p.default_text} for p in report.params],
            "path": str(report.path),
            "shipped": report.shipped,
            "overrides": [str(p) for p in report.overrides],
        })
    return rows


def _params_text(params: list[dict[str, Any]]) -> str:
    return ", ".join(p["name"] + " " + p["type"] + ("" if p["default"] is None else f" = {p['default']}")
                     for p in params)


def _run_report(s: Settings, name: str, given: dict[str, str], max_rows: int, timeout_s: float) -> tuple[Any, Any]:
    from ..reports import bind_params, find_report, run_report

    report = find_report(name, s.queries)
    values = bind_params(report, given)
    with _connection(s) as conn:
        result = run_report(conn, report, values, schema=s.schema, timeout_ms=int(timeout_s * 1000),
                            max_rows=max_rows)
    return report, result


def report(
    ctx: typer.Context,
    name: Optional[str] = typer.Argument(None, metavar="[NAME]", help="Report to run; none: list them."),
    param: Optional[list[str]] = typer.Option(None, "--param", "-p", metavar="KEY=VALUE",
                                              help="A report parameter (repeatable).", show_default=False),
    max_rows: int = typer.Option(DEFAULT_MAX_ROWS, "--max-rows", min=1, help="Print at most this many rows."),
    timeout: float = typer.Option(CLI_TIMEOUT_MS / 1000, "--timeout", min=0.1, help="Seconds before the query is cancelled."),
    fmt: str = format_option(),
) -> None:
    """List the saved reports, or run report NAME (says on stderr which file it ran)."""
    from ..reports import discover

    s = settings(ctx)
    if name is None:
        if param:
            fail("--param needs a report NAME: kestrel-console report NAME --param KEY=VALUE", code=2)
        rows = _report_listing(handles_errors(discover)(s.queries))
        if fmt == "table":
            table_rows = [{**r, "params": _params_text(r["params"]),
                           "path": "shipped" if r["shipped"] else
                           r["path"] + (" (overrides the shipped one)" if r["overrides"] else "")}
                          for r in rows]
            render.emit(table_rows, ["name", "description", "params", "path"], "table",
                        empty="no reports found", max_cell=400)
        else:
            render.emit(rows, REPORT_LIST_COLUMNS, fmt)
        return
    given = _parse_params(param or [])
    ran, result = handles_errors(_run_report)(s, name, given, max_rows, timeout)
    origin = "shipped" if ran.shipped else "user"
    _note(f"report {ran.name}: ran {ran.path} ({origin}); {len(result.rows)} row(s) in {result.elapsed_ms:.0f} ms")
    if result.truncated:
        _note(f"only the first {max_rows} rows are shown: raise --max-rows to see more")
    render.emit(result.rows, result.columns, fmt)


# -- sql -------------------------------------------------------------------------------------


def _run_sql(s: Settings, query: str, max_rows: int, timeout_s: float) -> Any:
    from ..adhoc import run_read_only

    with _connection(s) as conn:
        return run_read_only(conn, query, schema=s.schema, timeout_ms=int(timeout_s * 1000),
                             max_rows=max_rows)


def sql(
    ctx: typer.Context,
    query: str = typer.Argument(..., metavar="QUERY", help="One read-only statement (SELECT, WITH, VALUES, EXPLAIN); '-' reads it from stdin."),
    max_rows: int = typer.Option(DEFAULT_MAX_ROWS, "--max-rows", min=1, help="Print at most this many rows."),
    timeout: float = typer.Option(CLI_TIMEOUT_MS / 1000, "--timeout", min=0.1, help="Seconds before the query is cancelled."),
    fmt: str = format_option(),
) -> None:
    """Run one read-only query (search_path is the Kestrel schema); anything that could write
    is refused with the reason."""
    s = settings(ctx)
    if query == "-":
        query = sys.stdin.read()
    if not query.strip():
        fail("the query is empty", code=2)
    result = handles_errors(_run_sql)(s, query, max_rows, timeout)
    if fmt == "table":
        _note(f"{len(result.rows)} row(s) in {result.elapsed_ms:.0f} ms")
    if result.truncated:
        _note(f"only the first {max_rows} rows are shown: raise --max-rows to see more")
    render.emit(result.rows, result.columns, fmt)


def register(app: typer.Typer) -> None:
    app.command()(status)
    app.command("list")(list_)
    app.command()(show)
    app.command()(report)
    app.command()(sql)
