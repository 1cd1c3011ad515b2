"""Leases: the heartbeat renews every lease a worker holds that it can lock, never waiting for
another session's lock; a stopping worker hands its executions back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg

from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import notify_channel, render

SQL = statements_beside(__file__)


@dataclass(frozen=True)
class Beat:
    """What one heartbeat found: the claims it renewed, and those still held but locked by
    another session (not renewed this time; not lost)."""

    renewed: set[tuple[int, int]]
    busy: set[tuple[int, int]]

    @property
    def held(self) -> set[tuple[int, int]]:
        return self.renewed | self.busy


def heartbeat(
    conn: psycopg.Connection,
    schema: str,
    worker_id: str,
    lease: timedelta,
    execution_ids: Sequence[int],
    *,
    free_slots: int | None = None,
    lock_timeout_ms: int | None = None,
) -> Beat:
    """Renew the leases ``worker_id`` holds on ``execution_ids`` that no other session has
    locked; says which (execution_id, claim_epoch) it renewed and which it still holds but
    could not lock. ``lock_timeout_ms``: set the lock bound in the beat's own transaction (the
    session has none: through PgBouncer); None, one statement (the session's bound holds).
    ``free_slots``: how many more executions the worker could run now (its row says so to the
    fleet: engine/fleet.py)."""
    params = {"worker_id": worker_id, "lease": lease, "ids": list(execution_ids), "free_slots": free_slots}
    rows = run_bounded(conn, render(SQL.heartbeat, schema), params, lock_timeout_ms)
    return Beat(
        renewed={(row[0], row[1]) for row in rows if row[2]},
        busy={(row[0], row[1]) for row in rows if not row[2]},
    )


def release_all(
    conn: psycopg.Connection, schema: str, worker_id: str, *, lock_timeout_ms: int | None = None
) -> list[int]:
    """Re-enqueue every execution ``worker_id`` still runs; returns their ids. ``lock_timeout_ms``:
    give up (psycopg.errors.LockNotAvailable) on a lock held that long."""
    params = {"worker_id": worker_id, "channel": notify_channel(schema)}
    return [row[0] for row in run_bounded(conn, render(SQL.release, schema), params, lock_timeout_ms)]


def run_bounded(
    conn: psycopg.Connection, statement: Any, params: dict[str, Any], lock_timeout_ms: int | None
) -> list[tuple[Any, ...]]:
    """``statement``'s rows (none for one that returns none): alone (the session's bounds
    hold), or in a transaction that sets ``lock_timeout_ms`` for itself."""
    if lock_timeout_ms is None:
        cur = conn.execute(statement, params)
    else:
        with conn.transaction():
            conn.execute(SQL.in_bounded_transaction, {"ms": str(lock_timeout_ms)})
            cur = conn.execute(statement, params)
    return cur.fetchall() if cur.description is not None else []


def let_go(conn: psycopg.Connection, schema: str, worker_id: str, execution_id: int, claim_epoch: int) -> None:
    """Say that this claim stopped running ``execution_id``, if an operator paused it (let_go)."""
    conn.execute(render(SQL.let_go, schema), {"eid": execution_id, "worker_id": worker_id, "claim_epoch": claim_epoch})
