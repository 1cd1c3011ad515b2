"""Commands that change things: migrate, worker (its own module), enqueue, approve/reject,
requeue/cancel/fork/pause/resume (one execution, or many through a frozen preview: bulk_commands).

Every write goes through the kestrel_core API; these functions only parse and print.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import typer

from kestrel_core import MAX_DELAY
from kestrel_core.db import DEFAULT_OPERATOR_ROLE, DEFAULT_WORKER_ROLE, RoleNames, describe_target

from ..safe_text import visible
from . import bulk_commands as bulk
from .audited import act, comment_option
from .bulk_commands import is_bulk
from .errors import fail, handles_errors
from .options import (
    acting,
    bulk_format_option,
    execution_id_argument,
    operator_option,
    optional_execution_id_argument,
    parse_json_option,
    settings,
    unset_option,
)
from .worker_command import worker


def _delay(value: float | None) -> float | None:
    longest = int(MAX_DELAY.total_seconds())
    if value is not None and not (math.isfinite(value) and 0 <= value <= longest):
        fail(f"--delay {value:g}: give seconds from 0 to {longest} ({MAX_DELAY.days} days)", code=2)
    return value


def migrate(
    ctx: typer.Context,
    roles: bool | None = unset_option(
        "--roles/--no-roles",
        help="Create/re-grant the least-privilege roles (default: when this user may create roles).",
    ),
    worker_role: str = typer.Option(DEFAULT_WORKER_ROLE, "--worker-role", help="Name of the worker role."),
    operator_role: str = typer.Option(DEFAULT_OPERATOR_ROLE, "--operator-role", help="Name of the operator role."),
) -> None:
    """Create or upgrade the Kestrel schema (idempotent; safe from many processes at once),
    and the NOLOGIN roles kestrel_worker / kestrel_operator to grant to login users."""
    s = settings(ctx)
    names: RoleNames | bool | None = roles
    if roles is not False and (worker_role, operator_role) != (
        DEFAULT_WORKER_ROLE,
        DEFAULT_OPERATOR_ROLE,
    ):
        names = RoleNames(worker=worker_role, operator=operator_role)
    elif roles:
        names = RoleNames()
    with s.kestrel() as app:
        applied = handles_errors(app.migrate)(roles=names)
    target = describe_target(s.dsn)
    if applied:
        typer.echo(f"schema {s.schema!r} on {target}: applied migration(s) {', '.join(map(str, applied))}")
    else:
        typer.echo(f"schema {s.schema!r} on {target}: already up to date")


def enqueue(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Workflow name."),
    input: str | None = unset_option("--input", help="Input as JSON (default null)."),
    idempotency_key: str | None = unset_option(
        "--idempotency-key", help="Enqueue at most once per key: a repeat prints the first id."
    ),
    delay: float | None = unset_option(
        "--delay", callback=_delay, help="Seconds before it may start (at most ten years)."
    ),
    priority: int | None = unset_option(
        "--priority", help="Higher runs first (default: the queue's priority, else 0)."
    ),
    queue: str | None = unset_option(
        "--queue", help="Queue (default: the one the workers' code binds NAME to, else 'default')."
    ),
    concurrency_key: str | None = unset_option(
        "--concurrency-key", help="At most the queue's per_key (default 1) executions with this key run at once."
    ),
) -> None:
    """Enqueue workflow NAME and print the new execution id.

    This process does not have the workflow's code, so the execution may run on a worker with
    any version of it (its version is recorded when a worker first claims it). When no live
    worker has registered NAME, it is enqueued all the same and a warning says so on stderr.
    """
    value = parse_json_option(input, "--input") if input is not None else None
    s = settings(ctx)
    with s.kestrel() as app:
        eid = handles_errors(app.enqueue)(
            name,
            value,
            idempotency_key=idempotency_key,
            priority=priority,
            delay=timedelta(seconds=delay) if delay else None,
            queue=queue,
            concurrency_key=concurrency_key,
        )
    typer.echo(eid)
    warning = _unserved_warning(s, name, eid)
    if warning:
        typer.echo(warning, err=True)


def _unserved_warning(s: Any, name: str, eid: int) -> str | None:
    """What ``schedule add`` says of a name no worker runs, said of the execution just
    enqueued (a typo would otherwise wait in the queue, silently, for ever)."""
    import difflib

    from .read_session import open_reader

    with open_reader(s) as reader:
        unserved = {u["workflow_name"] for u in handles_errors(reader.unserved_workflows)()}
        if name not in unserved:
            return None
        served = sorted(
            {
                w
                for r in handles_errors(reader.workers)()
                if r["alive"] and r["stopped_at"] is None
                for w in (r["workflows"] or [])
            }
        )
    close = difflib.get_close_matches(name, served, n=3, cutoff=0.5)
    hint = f" (did you mean {' or '.join(visible(c) for c in close)}?)" if close else ""
    return (
        f"warning: no live worker has registered workflow {visible(repr(name))}{hint}; execution {eid} "
        "waits in the queue until a worker with its code starts"
    )


def _decision_command(action: str, verb: str) -> Callable[..., None]:
    """``approve`` or ``reject``: decide the pending approval gate STEP of execution ID."""

    def command(
        ctx: typer.Context,
        execution_id: int = execution_id_argument(),
        step: str = typer.Argument(..., metavar="STEP", help="Approval gate id."),
        comment: str | None = comment_option(),
        operator: str | None = operator_option(),
    ) -> None:
        _, who = act(ctx, operator, action, execution_id, step, comment=comment)
        typer.echo(f"{verb} {step!r} of execution {execution_id} as {who}; it is enqueued to resume")

    command.__name__ = command.__qualname__ = action  # the command's name on the command line
    command.__doc__ = f"{action.capitalize()} the pending approval gate STEP of execution ID."
    return command


approve = _decision_command("approve", "approved")
reject = _decision_command("reject", "rejected")


def _state_command(action: str, said: Callable[[int, str], str], doc: str) -> Callable[..., None]:
    """The command for one of the execution's state actions (requeue, cancel, pause, resume):
    one execution by ID, or many through a frozen preview (bulk_commands). ``said`` is what it
    prints, given the id and what the API returned (the status before, or after for resume)."""

    def command(
        ctx: typer.Context,
        execution_id: int | None = optional_execution_id_argument(),
        comment: str | None = comment_option(),
        operator: str | None = operator_option(),
        where: str | None = bulk.where_option(),
        dry_run: bool = bulk.dry_run_option(),
        token: str | None = bulk.token_option(),
        rate: float | None = bulk.rate_option(),
        fmt: str = bulk_format_option(),
    ) -> None:
        if _bulk(ctx, action, execution_id, where, dry_run, token, rate, comment, operator, {}, fmt):
            return
        assert execution_id is not None
        status, _ = act(ctx, operator, action, execution_id, comment=comment)
        typer.echo(said(execution_id, status))

    command.__name__ = command.__qualname__ = action  # the command's name on the command line
    command.__doc__ = doc
    return command


requeue = _state_command(
    "requeue",
    lambda eid, was: f"re-enqueued execution {eid} (was {was})",
    """Re-enqueue an execution that errored, was cancelled, or holds an expired lease.

    It replays from its checkpoints: completed steps are not run again. Many at once: preview
    with --where FILTER --dry-run (prints the ids and a token), then act with --token TOKEN.
    """,
)
cancel = _state_command(
    "cancel",
    lambda eid, was: f"cancelled execution {eid} (was {was})",
    """Cancel an enqueued, running, waiting or paused execution (a running one stops at its next step).

    Many at once: preview with --where FILTER --dry-run (prints the exact ids, their count, a
    sample and a token; changes nothing), then act with --token TOKEN on exactly those ids,
    never on the filter evaluated again. Rows whose state no longer allows a cancel are
    refused one by one and reported with the reason. A run cut short (Ctrl-C, a killed
    console) resumes with the same --token.
    """,
)
pause = _state_command(
    "pause",
    lambda eid, was: f"paused execution {eid} (was {was}); resume with: kestrel-console resume {eid}",
    """Hold an enqueued, running or waiting execution until `resume`: no worker runs it.

    A running one stops at its next step boundary (a step it was running when the pause
    committed runs again after the resume); its sleeps and approval gates keep their deadlines.
    Many at once: preview with --where FILTER --dry-run (prints the ids and a token), then act
    with --token TOKEN on exactly those ids.
    """,
)
resume = _state_command(
    "resume",
    lambda eid, now: f"resumed execution {eid} (now {now})",
    """Let a paused execution go on from its checkpoints: completed steps are not run again.

    It is enqueued, or waits again while one of its sleeps or gates is still open. Many at
    once: preview with --where FILTER --dry-run (e.g. status:paused workflow:W), then act with
    --token TOKEN on exactly those ids.
    """,
)


def fork(
    ctx: typer.Context,
    execution_id: int | None = optional_execution_id_argument(),
    from_step: str | None = unset_option(
        "--from-step",
        metavar="STEP",
        help="The step to run again: it and every step after it run, those before keep their checkpoints.",
    ),
    input: str | None = unset_option("--input", help="New input for the fork, as JSON (default: the origin's)."),
    version: str | None = unset_option(
        "--version",
        help="Run the fork only on workers of this code version (default: the origin's); "
        "refused when no live worker has it.",
    ),
    comment: str | None = comment_option(),
    operator: str | None = operator_option(),
    where: str | None = bulk.where_option(),
    dry_run: bool = bulk.dry_run_option(),
    token: str | None = bulk.token_option(),
    rate: float | None = bulk.rate_option(),
    fmt: str = bulk_format_option(),
) -> None:
    """Start a new execution from step STEP of a finished or waiting execution ID (after a code
    fix, or with corrected input); prints the new id. Linked to its origin both ways (`show`).

    Many at once: `fork --where FILTER --from-step STEP [--version V] --dry-run` freezes the
    ids and the step, then `fork --token TOKEN` forks each (each keeps its own input).
    """
    if token is not None and (from_step is not None or version is not None):
        fail("fork --token: the step and version were frozen by the preview; give neither", code=2)
    if is_bulk(where, dry_run, token) and input is not None:
        fail("fork --where: each fork keeps its origin's input; --input is for one execution", code=2)
    if dry_run and from_step is None:
        fail("fork --dry-run: give --from-step STEP (frozen with the ids)", code=2)
    params = {"from_step": from_step, "version": version} if dry_run else {}
    if _bulk(ctx, "fork", execution_id, where, dry_run, token, rate, comment, operator, params, fmt):
        return
    assert execution_id is not None
    if from_step is None:
        fail("fork: give --from-step STEP (the step to run again)", code=2)
    s = acting(ctx, operator)
    options = {"input": parse_json_option(input, "--input")} if input is not None else {}
    with s.kestrel() as app:
        new_id = handles_errors(app.fork)(
            execution_id, from_step=from_step, version=version, by=s.operator, comment=comment, **options
        )
    typer.echo(new_id)


def _bulk(
    ctx: typer.Context,
    action: str,
    execution_id: int | None,
    where: str | None,
    dry_run: bool,
    token: str | None,
    rate: float | None,
    comment: str | None,
    operator: str | None,
    params: dict[str, Any],
    fmt: str,
) -> bool:
    """Run the bulk form of ``action`` if its options ask for it (True), after checking that
    exactly one form is asked for (bad usage, exit 2, otherwise)."""
    bulk.check_form(action, execution_id, where, dry_run, token)
    if not is_bulk(where, dry_run, token):
        if rate is not None:
            fail(f"{action} --rate: only with --token", code=2)
        return False
    acting(ctx, operator)
    if token is not None:
        bulk.act(ctx, action, token, rate, comment)
    else:
        assert where is not None
        if rate is not None or comment is not None:
            fail(f"{action} --dry-run: --rate and --comment go with --token, when acting", code=2)
        bulk.preview(ctx, action, where, {k: v for k, v in params.items() if v is not None}, fmt)
    return True


def register(app: typer.Typer) -> None:
    for command in (migrate, worker, enqueue, approve, reject, requeue, cancel, fork, pause, resume):
        app.command()(command)
