"""``kestrel-console schedule list/add/pause/resume/trigger/remove``: cron schedules from the CLI.

Every change goes through the kestrel_core API (audited, as the --operator); a bad cron
expression, timezone or input is bad usage (exit 2) and writes nothing.
"""

from __future__ import annotations

import difflib
from datetime import datetime
from typing import Any

import typer
from rich.text import Text

from kestrel_core import NotSerializable
from kestrel_core.admin import check_cron, check_schedule, check_timezone

from .. import formatting, render
from ..humanize import duration
from ..read.schedules import COLUMNS as SCHEDULE_COLUMNS
from ..read.schedules import schedules as read_schedules
from ..safe_text import visible
from .audited import by_name_command, comment_option
from .errors import handles_errors
from .options import acting, operator_option, parse_json_option, settings, unset_option
from .read_session import format_option, open_reader

app = typer.Typer(
    name="schedule",
    help="Cron schedules: list, add, pause, resume, trigger (run once now), remove.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# What ``schedule list --format json|csv`` gives: the read's columns but who created each and
# when, when it was paused and whether a worker serves it (the table's "state" says that).
LIST_COLUMNS = [c for c in SCHEDULE_COLUMNS if c not in ("paused_at", "created_by", "created_at", "served")]
TABLE_COLUMNS = ["name", "cron", "timezone", "workflow_name", "next", "last_run", "state", "source"]
TABLE_HEADERS = {"workflow_name": "workflow", "next": "next tick", "last_run": "last run"}


@app.command("list")
def list_(ctx: typer.Context, fmt: str = format_option()) -> None:
    """Every schedule: cron, timezone, workflow, next tick, last run and its status, paused."""
    s = settings(ctx)
    with open_reader(s) as reader:
        rows = handles_errors(read_schedules)(reader)
    if fmt != "table":
        render.emit(rows, LIST_COLUMNS, fmt)
        return
    render.emit(
        [_table_row(r) for r in rows],
        TABLE_COLUMNS,
        "table",
        headers=TABLE_HEADERS,
        empty="no schedules (add one: kestrel-console schedule add NAME CRON WORKFLOW)",
    )


def _table_row(r: dict[str, Any]) -> dict[str, Any]:
    last = "never"
    if r["last_tick"] is not None:
        last = f"{formatting.short_time(r['last_tick'])} #{r['last_execution_id']} {r['last_status'] or 'pruned'}"
    state = Text("paused by " + (r["paused_by"] or "?"), style="bold yellow") if r["paused"] else "active"
    nxt = "—" if r["paused"] else f"{formatting.short_time(r['next_tick'])} (in {duration(r['next_in_s'], clamp=True)})"
    return {**r, "next": nxt, "last_run": last, "state": state}


@app.command("add")
def add(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="Schedule name (letters, digits, _ . : -)."),
    cron: str = typer.Argument(..., metavar="CRON", help="Cron expression, 5 fields (or 6 with seconds last), quoted."),
    workflow: str = typer.Argument(..., metavar="WORKFLOW", help="Workflow name to enqueue at every tick."),
    input: str | None = unset_option("--input", help="A JSON object passed to every run (beside scheduled_at)."),
    timezone: str = typer.Option("UTC", "--timezone", help="IANA timezone the cron is read in (Europe/Paris, ...)."),
    catch_up: bool = typer.Option(
        False, "--catch-up", help="After an outage, enqueue every missed tick (default: only the latest)."
    ),
    comment: str | None = comment_option(),
    operator: str | None = operator_option(),
) -> None:
    """Add a schedule that enqueues WORKFLOW at every tick of CRON (any worker ticks it)."""
    value = _parse_input(input)
    checks = (
        (lambda: check_schedule(name, "* * * * *", "w", "UTC", None), "NAME"),
        (lambda: check_cron(cron), "CRON"),
        (lambda: check_timezone(timezone), "--timezone"),
        (lambda: check_schedule(name, "* * * * *", workflow, "UTC", None), "WORKFLOW"),
        (lambda: check_schedule(name, cron, workflow, timezone, value), "--input"),
    )
    for check, hint in checks:
        try:
            check()
        except (ValueError, NotSerializable) as exc:  # an input too deep, or not valid Unicode
            raise typer.BadParameter(str(exc), param_hint=hint) from None
    s = acting(ctx, operator)
    with s.kestrel() as kestrel:
        first = handles_errors(kestrel.add_schedule)(
            name, cron, workflow, input=value, timezone=timezone, catch_up=catch_up, by=s.operator, comment=comment
        )
    typer.echo(
        f"added schedule {name!r}: workflow {workflow!r} at {cron!r} ({timezone}) as {visible(s.operator)}; "
        f"first tick {first.isoformat()}"
    )
    with open_reader(s) as reader:
        warning = unknown_workflow_warning(workflow, handles_errors(reader.workflow_names)())
    if warning:
        typer.echo(warning, err=True)


def unknown_workflow_warning(workflow: str, known: list[str]) -> str | None:
    """The schedule is added either way (a worker with the code may start later, and any
    worker ticks it), but a typo would enqueue a run nobody claims at every tick: say so."""
    if workflow in known:
        return None
    close = difflib.get_close_matches(workflow, known, n=3, cutoff=0.5)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return (
        f"warning: no worker has registered workflow {workflow!r} and it has no executions{hint}; "
        "its runs wait in the queue until a worker with its code starts (remove the schedule "
        "if the name is wrong)"
    )


def _parse_input(text: str | None) -> Any:
    """--input as the engine will store it: one clear line and exit 2 for JSON that is not
    valid, too deep, or not storable (enqueue --input's checks)."""
    return None if text is None else parse_json_option(text, "--input")


def _paused(name: str, _: None, who: str) -> None:
    typer.echo(f"paused schedule {name!r} as {who}; resume it with: kestrel-console schedule resume {visible(name)}")


def _resumed(name: str, next_tick: datetime, who: str) -> None:
    typer.echo(f"resumed schedule {name!r} as {who}; next tick {next_tick.isoformat()}")


def _triggered(name: str, execution_id: int, who: str) -> None:
    typer.echo(f"triggered schedule {name!r} as {who}: execution {execution_id}")


def _removed(name: str, source: str, who: str) -> None:
    typer.echo(f"removed schedule {name!r} as {who}")
    if source == "code":
        typer.echo(
            "note: it is declared in code and comes back when a worker with that code starts; pause it to keep it off",
            err=True,
        )


pause = by_name_command(
    app,
    "schedule",
    "pause",
    _paused,
    "Stop a schedule's ticks until it is resumed (runs already enqueued are left alone).",
)
resume = by_name_command(
    app,
    "schedule",
    "resume",
    _resumed,
    "Tick again, from the first tick after now (the ticks missed while paused are not run).",
)
trigger = by_name_command(
    app,
    "schedule",
    "trigger",
    _triggered,
    """Run a schedule once, now: enqueue its workflow with the input a tick gives; prints the id.

    Its ticks are left alone (the next one comes as planned) and a paused schedule stays paused.
    """,
)
remove = by_name_command(
    app, "schedule", "remove", _removed, "Delete a schedule (runs already enqueued are left alone)."
)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="schedule")
