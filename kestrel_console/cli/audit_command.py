"""``kestrel-console audit [FILTER]``: the operator actions taken, newest first.

The same trail the TUI's Audit screen (key 8) shows, read through ``Reader.audit``: who
acted (the name given and the database role Postgres authenticated), on what, and why.
"""

from __future__ import annotations

import typer

from .. import render
from ..read.audit import parse_audit_filter
from .errors import handles_errors
from .options import parsed, settings, unset_option
from .read_session import format_option, open_reader

AUDIT_COLUMNS = ["id", "at", "actor", "db_user", "action", "execution_id", "step_id", "from_status", "comment"]
AUDIT_JSON_COLUMNS = [*AUDIT_COLUMNS, "details"]


def audit(
    ctx: typer.Context,
    where: str | None = typer.Argument(
        None,
        metavar="FILTER",
        help="action:NAME by:OPERATOR id:EXECUTION since:2h and free text (matched in the comment, the "
        'name given, the step and the database role), e.g. "action:cancel since:1d deploy".',
        show_default=False,
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="At most this many rows."),
    before: int | None = unset_option("--before", min=1, help="Only actions with an id below this (the next page)."),
    fmt: str = format_option(),
) -> None:
    """Operator actions (approve, reject, cancel, requeue, fork, pause, resume, prune, queue and
    schedule switches), newest first: the name each operator gave and the database role that
    acted. For the next page, pass the smallest id shown as --before."""
    f = parsed(parse_audit_filter, where, "FILTER") if where else None
    s = settings(ctx)
    with open_reader(s) as reader:
        rows = handles_errors(reader.audit)(f, limit=limit, before_id=before)
    if fmt == "json":
        render.emit(rows, AUDIT_JSON_COLUMNS, fmt)
    else:
        render.emit(rows, AUDIT_COLUMNS, fmt, empty="no operator action matches")


def register(app: typer.Typer) -> None:
    app.command("audit")(audit)
