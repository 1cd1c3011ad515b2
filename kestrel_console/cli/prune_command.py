"""The ``prune`` command: retention, deleting executions that finished long enough ago."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timedelta

import typer

from kestrel_core import Kestrel
from kestrel_core.admin import (
    PRUNE_BATCH_SIZE,
    HistoryRange,
    PrunableGroup,
    PruneResult,
    connection_runner,
    cutoff_for,
    droppable_ranges,
    parse_age,
    prunable,
    prune_finished,
)

from ..safe_text import visible
from .errors import fail, handles_errors
from .options import acting, operator_option

PROGRESS_EVERY_S = 2.0


def _age(text: str) -> str:
    try:
        parse_age(text)
    except ValueError as exc:
        fail(f"--older-than: {exc}", code=2)
    return text


def prune(
    ctx: typer.Context,
    older_than: str = typer.Option(
        ...,
        "--older-than",
        callback=_age,
        metavar="AGE",
        help="Delete executions that finished more than AGE ago: 30d, 12h, 90m, 45s or 2w.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only print what would be deleted."),
    batch_size: int = typer.Option(
        PRUNE_BATCH_SIZE,
        "--batch-size",
        min=1,
        max=100_000,
        help="Executions deleted per transaction (each batch is short and skips locked rows).",
    ),
    pause: float = typer.Option(0.0, "--pause", min=0.0, help="Seconds to wait between batches."),
    operator: str | None = operator_option(),
) -> None:
    """Delete finished executions older than AGE, in short batches.

    Executions that ended (success, error, cancelled) more than AGE ago go, with their
    checkpoints, waits and attempts. Live ones are never touched, however old. Whole id ranges
    whose executions all finished before the cutoff are dropped as partitions (--dry-run names
    them); the rest goes in batches. The audit table is kept and gets one 'prune' row per
    dropped range and per batch. Nothing is archived: export first if needed.
    """
    s = acting(ctx, operator)
    age = parse_age(older_than)
    with s.kestrel() as app:
        if dry_run:
            _dry_run(app, s.schema, age, older_than)
        else:
            _prune(app, s.schema, age, older_than, s.operator, batch_size, pause)


def _dry_run(app: Kestrel, schema: str, age: timedelta, label: str) -> None:
    def look() -> tuple[datetime, list[HistoryRange], list[PrunableGroup]]:
        with app.connection() as conn:
            cutoff = cutoff_for(conn, age)
            ranges = droppable_ranges(conn, schema, cutoff)
            return cutoff, ranges, prunable(conn, schema, cutoff)

    cutoff, ranges, groups = handles_errors(look)()
    total = sum(g.count for g in groups) + sum(r.executions for r in ranges)
    typer.echo(
        f"dry run: {total} finished execution(s) finished more than {label} ago "
        f"(before {cutoff:%Y-%m-%d %H:%M:%S %Z}) would be deleted"
    )
    for r in ranges:
        typer.echo(
            f"  drop partition {r.partition} (and its step tables' partitions): "
            f"ids {r.lo} .. {r.hi - 1}, {r.executions} execution(s)"
        )
    if ranges and groups:
        typer.echo("  then in batches:")
    for g in groups:
        typer.echo(
            f"  {visible(g.workflow_name):<30} {g.status:<9} {g.count:>10}  "
            f"finished {g.oldest:%Y-%m-%d %H:%M} .. {g.newest:%Y-%m-%d %H:%M}"
        )


def _prune(app: Kestrel, schema: str, age: timedelta, label: str, by: str, batch_size: int, pause: float) -> None:
    last = [time.monotonic()]

    def progress(result: PruneResult) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            typer.echo(f"... {result.deleted} deleted in {result.batches} batch(es), {result.seconds:.0f} s", err=True)

    run = connection_runner(app.connection)
    try:
        result = handles_errors(prune_finished)(
            run, schema, older_than=age, by=by, batch_size=batch_size, pause=pause, progress=progress
        )
    except KeyboardInterrupt:
        typer.echo("interrupted: the batches already done stay deleted; run it again to go on", err=True)
        sys.exit(130)
    typer.echo(
        f"pruned {result.deleted} finished execution(s) that finished more than {label} ago "
        f"(before {result.cutoff:%Y-%m-%d %H:%M:%S %Z}) in {result.seconds:.1f} s"
    )
    for r in result.dropped:
        typer.echo(f"  dropped partition {r.partition} (ids {r.lo} .. {r.hi - 1}): {r.executions} execution(s)")
    if result.busy_ranges:
        typer.echo(f"  {result.busy_ranges} id range(s) were busy (a lock not had in time): the next prune retries")


def register(app: typer.Typer) -> None:
    app.command()(prune)
