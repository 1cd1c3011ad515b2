"""Bulk operator actions on a frozen set of executions.

Two steps, so that the rows acted on are exactly the rows an operator saw:

1. ``freeze``: the caller (the console, from its filter language) passes the ids it selected;
   they are stored under a new random token with the action and its parameters
   (``bulk_freeze()``, migration 0031), valid for ``DEFAULT_TTL``. The exact count comes back.
2. ``apply``: with that token, acts on those ids and no other, chunk by chunk
   (``bulk_apply_chunk()``), each row through its single-row operator function, whose own state
   rule holds: a row it refuses is recorded as refused with the refusal's message. A row's
   outcome commits with its action, so a run cut short anywhere (a console killed) is resumed
   by applying the same token again; rows done are never done twice. Each row's audit row
   carries the batch's id (``operator_actions.batch_id``).

``ACTIONS`` is the registry: one entry per bulk action (its name is also a branch of
``bulk_apply_chunk()`` in schema/functions/bulk_apply_chunk.sql, which calls the action's
single-row function).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from kestrel_core.base.errors import InvalidArgument, NotFound, from_database
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import render

SQL = statements_beside(__file__)


@dataclass(frozen=True)
class BulkAction:
    """One action that may be applied in bulk: its name (the single-row command's), what its
    rule lets it act on (for help and previews), and its parameters."""

    name: str
    past: str  # "cancelled": how a done row is reported
    acts_on: str
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()


ACTIONS: dict[str, BulkAction] = {
    a.name: a
    for a in (
        BulkAction("cancel", "cancelled", "enqueued, running or waiting executions"),
        BulkAction("requeue", "re-enqueued", "errored or cancelled executions, and running ones whose lease expired"),
        BulkAction("fork", "forked", "finished or waiting executions that reached the step", ("from_step",),
                   ("version",)),
        BulkAction("pause", "paused", "enqueued, running or waiting executions"),
        BulkAction("resume", "resumed", "paused executions"),
    )
}  # fmt: skip

DEFAULT_TTL = timedelta(hours=1)
CHUNK = 200  # rows per transaction
MAX_ROWS = 100_000  # a preview freezes at most this many ids
BUSY_PAUSE_S = 0.2  # when the rows left are another session's for now


@dataclass(frozen=True)
class Preview:
    """A frozen set: act on it with ``apply(token)`` before ``expires_at``."""

    batch_id: int
    token: str
    action: str
    total: int
    expires_at: datetime


@dataclass(frozen=True)
class Progress:
    """Where a batch is: its rows done, refused and left (all runs so far), and this run's."""

    batch_id: int
    token: str
    action: str
    total: int
    done: int
    refused: int
    left: int
    done_now: int = 0
    refused_now: int = 0


def action_for(name: str) -> BulkAction:
    """The registered action ``name``, else InvalidArgument naming those there are."""
    try:
        return ACTIONS[name]
    except KeyError:
        raise InvalidArgument(f"no bulk action {name!r}: use one of {', '.join(ACTIONS)}") from None


def check_params(action: BulkAction, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` without None values, refused (InvalidArgument) when one required is missing
    or one is unknown to the action."""
    given = {k: v for k, v in params.items() if v is not None}
    for name in action.required:
        if not isinstance(given.get(name), str) or not given[name]:
            raise InvalidArgument(f"bulk {action.name} needs {name}")
    unknown = set(given) - set(action.required) - set(action.optional)
    if unknown:
        raise InvalidArgument(f"bulk {action.name} takes no {', '.join(sorted(unknown))}")
    return given


def _one(conn: psycopg.Connection, schema: str, statement: str, params: tuple[Any, ...]) -> Any:
    try:
        row = conn.execute(render(statement, schema), params).fetchone()
    except psycopg.Error as exc:
        raise from_database(exc) from None
    return row[0] if row else None


def freeze(
    conn: psycopg.Connection,
    schema: str,
    action: str,
    ids: Iterable[int],
    *,
    by: str,
    params: Mapping[str, Any] | None = None,
    filter_text: str | None = None,
    ttl: timedelta = DEFAULT_TTL,
) -> Preview:
    """Freeze ``ids`` (duplicates counted once) for ``action`` under a new token (audited)."""
    kind = action_for(action)
    values = check_params(kind, params or {})
    frozen = sorted({int(i) for i in ids})
    if not frozen:
        raise InvalidArgument(f"nothing to {action}: no execution selected")
    if len(frozen) > MAX_ROWS:
        raise InvalidArgument(f"{len(frozen):,} executions selected: a bulk {action} takes at most {MAX_ROWS:,}")
    from psycopg.types.json import Jsonb

    out = _one(conn, schema, SQL.freeze, (action, Jsonb(values), frozen, filter_text, by, ttl))
    return Preview(out["batch_id"], out["token"], action, out["total"], datetime.fromisoformat(out["expires_at"]))


def status(conn: psycopg.Connection, schema: str, token: str) -> dict[str, Any]:
    """The batch of ``token`` with its counts (done, refused, left), NotFound if none."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(render(SQL.status, schema), (token,)).fetchone()
    if row is None:
        raise NotFound(f"unknown bulk token {token!r}")
    return row


def reasons(conn: psycopg.Connection, schema: str, batch_id: int, limit: int = 20) -> list[dict[str, Any]]:
    """The batch's refusals grouped by reason, most frequent first, with example ids."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(render(SQL.reasons, schema), (batch_id, limit)).fetchall()


def items(
    conn: psycopg.Connection, schema: str, batch_id: int, outcome: str | None = None, limit: int = 100_000
) -> list[dict[str, Any]]:
    """The batch's rows by id: all, or those 'done', 'refused' or 'pending'."""
    if outcome not in (None, "done", "refused", "pending"):
        raise InvalidArgument(f"outcome {outcome!r}: use done, refused or pending")
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(render(SQL.items, schema), (batch_id, outcome, outcome, limit)).fetchall()


def batches(conn: psycopg.Connection, schema: str, limit: int = 20) -> list[dict[str, Any]]:
    """The newest batches."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(render(SQL.batches, schema), (limit,)).fetchall()


def apply(
    conn: psycopg.Connection,
    schema: str,
    token: str,
    *,
    action: str,
    by: str,
    comment: str | None = None,
    rate: float | None = None,
    chunk: int = CHUNK,
    progress: Callable[[Progress], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Progress:
    """Act on the rows frozen under ``token`` that have no outcome yet (all of them the first
    time; the rest when resuming), ``chunk`` rows per transaction, at most ``rate`` rows a
    second; ``progress`` is called after each chunk. Refused (ActionRefused, NotFound) for an
    unknown token, one previewed for another action, used up, or expired before first use."""
    action_for(action)
    if rate is not None and not rate > 0:
        raise InvalidArgument(f"rate {rate!r}: give rows per second, more than 0")
    if chunk < 1:
        raise InvalidArgument("chunk: at least one row")
    size = min(chunk, max(1, int(rate))) if rate else chunk
    batch = _one(conn, schema, SQL.begin, (token, action, by))
    state = status(conn, schema, token)
    done_now = refused_now = 0
    left = int(state["left"])
    started = time.monotonic()
    while left:
        out = _one(conn, schema, SQL.apply_chunk, (batch["id"], by, comment, size))
        done_now += out["done"]
        refused_now += out["refused"]
        left = out["left"]
        acted = out["done"] + out["refused"]
        if progress is not None:
            progress(_progress(batch, state, done_now, refused_now, left))
        if left and not acted:
            sleep(BUSY_PAUSE_S)  # the rows left are being acted on by another session (or a dead one's, until it ends)
        elif left and rate:
            sleep(max(0.0, started + (done_now + refused_now) / rate - time.monotonic()))
    final = status(conn, schema, token)  # counts by every session that acted on it
    return _progress(batch, {"done": final["done"] - done_now, "refused": final["refused"] - refused_now},
                     done_now, refused_now, int(final["left"]))  # fmt: skip


def _progress(
    batch: Mapping[str, Any], before: Mapping[str, Any], done_now: int, refused_now: int, left: int
) -> Progress:
    return Progress(
        batch_id=batch["id"],
        token=batch["token"],
        action=batch["action"],
        total=batch["total"],
        done=int(before["done"]) + done_now,
        refused=int(before["refused"]) + refused_now,
        left=left,
        done_now=done_now,
        refused_now=refused_now,
    )
