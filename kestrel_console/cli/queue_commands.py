"""``kestrel-console queue list|pause|resume``: the queues workers declared, and the
operator's pause switch (through kestrel_core's audited functions)."""

from __future__ import annotations

from typing import Any

import typer

from .. import render
from ..read.queue_view import limit_text, rate_text
from .audited import by_name_command
from .errors import handles_errors
from .options import settings
from .read_session import format_option, open_reader

queue_app = typer.Typer(
    name="queue",
    no_args_is_help=True,
    help="Queues: list them (depth, running vs limit, rate, paused), pause or resume one.",
)

QUEUE_COLUMNS = [
    "name",
    "paused",
    "paused_by",
    "paused_at",
    "enqueued",
    "running",
    "concurrency",
    "per_worker",
    "rate_limit",
    "rate_period_s",
    "rate_used",
    "per_key",
    "priority",
    "workflows",
    "live_workers",
]
TABLE_COLUMNS = [
    "name",
    "state",
    "enqueued",
    "running",
    "per_worker",
    "rate",
    "per_key",
    "priority",
    "live_workers",
    "workflows",
]
HEADERS = {"live_workers": "workers", "per_worker": "per worker", "per_key": "per key", "running": "running/limit"}


def table_rows(queues: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            **q,
            "state": f"paused by {q['paused_by'] or '?'}" if q["paused"] else "active",
            "running": limit_text(q["running"], q["concurrency"]),
            "per_worker": q["per_worker"] if q["per_worker"] is not None else "-",
            "rate": rate_text(q),
            "workflows": ", ".join(q["workflows"] or []),
        }
        for q in queues
    ]


@queue_app.command("list")
def list_queues(ctx: typer.Context, fmt: str = format_option()) -> None:
    """Every queue: paused or not, enqueued (depth), running (vs its concurrency limit),
    per-worker limit, rate window use, per-key limit, priority, live workers serving it.

    json/csv: one row per queue with the raw columns (limits null when not set).
    """
    s = settings(ctx)
    with open_reader(s) as reader:
        queues = handles_errors(reader.queues)()
    if fmt == "table":
        render.emit(
            table_rows(queues),
            TABLE_COLUMNS,
            "table",
            headers=HEADERS,
            empty="no queues yet (a worker declares them when it starts)",
        )
    else:
        render.emit(queues, QUEUE_COLUMNS, fmt)


def _paused(name: str, _: None, who: str) -> None:
    typer.echo(f"paused queue {name!r} as {who}: nothing more is claimed from it (running executions finish)")


def _resumed(name: str, _: None, who: str) -> None:
    typer.echo(f"resumed queue {name!r} as {who}")


pause = by_name_command(
    queue_app,
    "queue",
    "pause",
    _paused,
    "Stop claiming from queue NAME, for every worker (audited). Running executions finish.",
)
resume = by_name_command(queue_app, "queue", "resume", _resumed, "Claim from the paused queue NAME again (audited).")


def register(app: typer.Typer) -> None:
    app.add_typer(queue_app, name="queue")
