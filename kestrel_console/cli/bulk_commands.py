"""Bulk actions by filter: ``cancel|requeue|pause|resume|fork --where FILTER
--dry-run`` freezes the ids the filter selects now and prints them (as ranges), their count, a
sample and a token; the same command with ``--token T`` acts on exactly those ids, chunk by
chunk, resumable; ``bulk status T`` / ``bulk list`` show batches. The filter is read here (the console's language); the
freezing and acting are kestrel_core's (``kestrel_core.admin.bulk_*``): this module only reads,
parses and prints.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import typer

from kestrel_core.admin import (
    BULK_ACTIONS,
    BULK_MAX_ROWS,
    Progress,
    bulk_apply,
    bulk_batches,
    bulk_freeze,
    bulk_items,
    bulk_reasons,
    bulk_status,
)

from .. import render
from ..read.search import ExecutionFilter, parse_filter
from ..safe_text import visible
from .errors import fail, handles_errors
from .options import settings, unset_option
from .read_session import format_option, open_reader

SAMPLE = 10
SAMPLE_COLUMNS = ["id", "workflow_name", "status", "created_at"]
ITEM_COLUMNS = ["execution_id", "outcome", "reason", "result", "acted_at", "acted_by"]
BATCH_COLUMNS = [
    "id",
    "token",
    "action",
    "total",
    "created_by",
    "created_at",
    "expires_at",
    "started_at",
    "finished_at",
]

WHERE_HELP = (
    "Act on every execution this filter selects (the console's filter language: id: key: status: "
    "workflow: input.FIELD= since: from: until:, free text). With --dry-run: freeze them and print "
    "the token to act with."
)
DRY_RUN_HELP = "With --where: print the exact ids selected now, their count, a sample and a token; change nothing."
TOKEN_HELP = "Act on exactly the ids a --dry-run froze under this token (resumes a batch cut short)."
RATE_HELP = "With --token: at most this many rows a second (default: as fast as the database goes)."


def where_option() -> Any:
    return unset_option("--where", metavar="FILTER", help=WHERE_HELP)


def dry_run_option() -> Any:
    return typer.Option(False, "--dry-run", help=DRY_RUN_HELP)


def token_option() -> Any:
    return unset_option("--token", metavar="TOKEN", help=TOKEN_HELP)


def rate_option() -> Any:
    return unset_option("--rate", min=0.1, help=RATE_HELP)


def is_bulk(where: str | None, dry_run: bool, token: str | None) -> bool:
    """Whether a command's options ask for the bulk form."""
    return where is not None or dry_run or token is not None


def check_form(action: str, execution_id: int | None, where: str | None, dry_run: bool, token: str | None) -> None:
    """Exactly one of: ID; --where with --dry-run; --token. Else bad usage (exit 2), saying how."""
    if execution_id is not None and is_bulk(where, dry_run, token):
        fail(f"{action}: give an ID, or --where with --dry-run, or --token, not both", code=2)
    if execution_id is None and not is_bulk(where, dry_run, token):
        fail(f"{action}: give an execution ID, or --where FILTER --dry-run to act on many", code=2)
    if token is not None and (where is not None or dry_run):
        fail(f"{action}: --token acts on what its preview froze; give no --where or --dry-run with it", code=2)
    if where is not None and not dry_run:
        fail(
            f"{action} --where acts only through a preview: run it with --dry-run, check the ids, "
            f"then `kestrel-console {action} --token TOKEN`",
            code=2,
        )
    if dry_run and where is None:
        fail(f"{action} --dry-run: give --where FILTER (the executions to preview)", code=2)


def id_ranges(ids: Iterable[int]) -> str:
    """``1-3, 7, 9-10``: sorted ids as ranges (exact, and short for the usual runs of ids)."""
    parts: list[str] = []
    ordered = sorted(set(ids))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts)


def by_status(rows: Iterable[Mapping[str, Any]]) -> str:
    """``running 1,200, enqueued 800``: how many selected rows are in each status now."""
    counts = Counter(r["status"] for r in rows)
    return ", ".join(f"{status} {n:,}" for status, n in counts.most_common())


def _parse(where: str) -> ExecutionFilter:
    try:
        return parse_filter(where)
    except ValueError as exc:
        fail(f"--where: {exc}", code=2)


def preview(ctx: typer.Context, action: str, where: str, params: dict[str, Any], fmt: str) -> None:
    """Read what ``where`` selects now, freeze the ids under a token, print them."""
    s = settings(ctx)
    f = _parse(where)
    if f.empty:
        fail(f"{action} --where: the filter is empty (it would select every execution); name what to act on", code=2)
    with open_reader(s) as reader:
        rows = handles_errors(reader.selected)(f, limit=BULK_MAX_ROWS + 1)
        unknown = handles_errors(reader.unknown_workflow)(f.workflow) if f.workflow and not rows else None
    if unknown:
        fail(unknown)
    if not rows:
        typer.echo(f"no execution matches {visible(f.describe())}: nothing to {action}")
        return
    if len(rows) > BULK_MAX_ROWS:
        fail(f"the filter selects more than {BULK_MAX_ROWS:,} executions: narrow it (add since:, from:/until:)")
    with s.kestrel() as app, app.connection() as conn:
        frozen = handles_errors(bulk_freeze)(
            conn, s.schema, action, [r["id"] for r in rows], by=s.operator, params=params, filter_text=str(f)
        )
    command = f"kestrel-console {action} --token {frozen.token}"
    if fmt == "json":
        out = {
            "token": frozen.token,
            "action": action,
            "params": params,
            "total": frozen.total,
            "expires_at": frozen.expires_at.isoformat(),
            "filter": str(f),
            "by_status": dict(Counter(r["status"] for r in rows)),
            "ids": sorted(r["id"] for r in rows),
            "command": command,
        }
        typer.echo(json.dumps(out, indent=2))
        return
    kind = BULK_ACTIONS[action]
    typer.echo(f"{action}: {frozen.total:,} executions selected by {visible(f.describe())}")
    typer.echo(f"now: {by_status(rows)}")
    typer.echo(f"{action} acts on {kind.acts_on}; any other is refused and reported, one by one.")
    render.emit(rows[:SAMPLE], SAMPLE_COLUMNS, "table", title=f"sample (newest {min(SAMPLE, len(rows))})")
    typer.echo(f"ids: {id_ranges(r['id'] for r in rows)}")
    expires = frozen.expires_at.strftime("%Y-%m-%d %H:%M:%S %Z")
    typer.echo(f"token: {frozen.token} (acts on exactly these {frozen.total:,} ids; expires {expires})")
    typer.echo(f"to act: {command}")


def act(ctx: typer.Context, action: str, token: str, rate: float | None, comment: str | None) -> None:
    """Apply ``token``'s batch (or resume it), printing progress on stderr and the result."""
    s = settings(ctx)
    kind = BULK_ACTIONS[action]

    def progress(p: Progress) -> None:
        typer.echo(
            f"{action} {p.token}: {p.total - p.left:,} of {p.total:,} ({kind.past} {p.done:,}, refused {p.refused:,})",
            err=True,
        )

    def run(conn: Any) -> Progress:
        try:
            return bulk_apply(
                conn, s.schema, token, action=action, by=s.operator, comment=comment, rate=rate, progress=progress
            )
        except KeyboardInterrupt:
            typer.echo(f"resume with: kestrel-console {action} --token {token}", err=True)
            raise

    with s.kestrel() as app, app.connection() as conn:
        result = handles_errors(run)(conn)
        reasons = handles_errors(bulk_reasons)(conn, s.schema, result.batch_id)
    typer.echo(
        f"{action} {result.token}: {result.done:,} {kind.past}, {result.refused:,} refused, "
        f"{result.left:,} left (of {result.total:,})"
    )
    _print_reasons(reasons)


def _print_reasons(reasons: list[dict[str, Any]]) -> None:
    if not reasons:
        return
    typer.echo("refused:")
    for r in reasons:
        examples = ", ".join(str(i) for i in r["examples"])
        typer.echo(f"  {r['n']:>5,}  {visible(r['reason'])}  (e.g. {examples})")


# -- bulk status / bulk list ---------------------------------------------------------------------

bulk_app = typer.Typer(
    help="Bulk actions: see a batch's progress and refusals (`cancel|requeue|pause|resume|fork --where ... "
    "--dry-run` previews one, `--token` acts on it).",
    no_args_is_help=True,
)


@bulk_app.command("status")
def status(
    ctx: typer.Context,
    token: str = typer.Argument(..., metavar="TOKEN", help="The token a --dry-run printed."),
    rows: str | None = unset_option(
        "--rows", metavar="WHICH", help="List the batch's rows: all, done, refused or pending."
    ),
    fmt: str = format_option(),
) -> None:
    """A batch's action, filter, counts (done, refused, left) and refusals by reason."""
    if rows not in (None, "all", "done", "refused", "pending"):
        fail(f"--rows {rows}: use all, done, refused or pending", code=2)
    s = settings(ctx)
    with s.kestrel() as app, app.connection() as conn:
        batch = handles_errors(bulk_status)(conn, s.schema, token)
        if rows is not None:
            listed = handles_errors(bulk_items)(conn, s.schema, batch["id"], None if rows == "all" else rows)
            render.emit(listed, ITEM_COLUMNS, fmt, empty="no such rows")
            return
        reasons = handles_errors(bulk_reasons)(conn, s.schema, batch["id"])
    if fmt != "table":
        render.emit([{**batch, "refusals": reasons}], None, fmt)
        return
    state = "finished" if batch["finished_at"] else "started" if batch["started_at"] else "previewed"
    params = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in batch["params"].items())
    typer.echo(f"batch {batch['id']} ({batch['token']}): {batch['action']}{' ' + params if params else ''}, {state}")
    typer.echo(f"filter: {visible(batch['filter_text'] or '')}")
    typer.echo(f"previewed by {visible(batch['created_by'])} at {batch['created_at']:%Y-%m-%d %H:%M:%S %Z}")
    typer.echo(
        f"{batch['total']:,} rows: {batch['done']:,} {BULK_ACTIONS[batch['action']].past}, "
        f"{batch['refused']:,} refused, {batch['left']:,} left"
    )
    _print_reasons(reasons)


@bulk_app.command("list")
def list_batches(
    ctx: typer.Context,
    limit: int = typer.Option(20, "--limit", min=1, max=10_000, help="At most this many batches."),
    fmt: str = format_option(),
) -> None:
    """The newest bulk batches (previews and runs)."""
    s = settings(ctx)
    with s.kestrel() as app, app.connection() as conn:
        found = handles_errors(bulk_batches)(conn, s.schema, limit)
    render.emit(found, BATCH_COLUMNS, fmt, empty="no bulk batch yet")


def register(app: typer.Typer) -> None:
    app.add_typer(bulk_app, name="bulk")
