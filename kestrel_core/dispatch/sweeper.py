"""Sweeper: leaderless and idempotent, run by every worker.

It re-enqueues executions whose lease lapsed (their worker died or froze), and wakes waits that
are due: sleeps whose ``wake_at`` passed and approvals, child and event waits whose deadline
passed (``timed_out``); about once a minute it folds the counters of finished executions.
Workflow deadlines are swept by ``deadlines.sweep_deadlines``. Decided approvals need no sweep:
the decision re-enqueues at once.
SKIP LOCKED lets many workers sweep at once without blocking each other.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

import psycopg

from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import notify_channel, one_row, render

SQL = statements_beside(__file__)

log = logging.getLogger("kestrel.sweeper")

FOLD_KEEP_BLOCKS = 64
FOLD_EVERY_S = 60.0


def fold_counts(conn: psycopg.Connection, schema: str, keep: int = FOLD_KEEP_BLOCKS) -> int:
    """Fold the counter rows of old id blocks; returns how many rows were folded."""
    row = conn.execute(render(SQL.fold_counts, schema), {"keep": keep}).fetchone()
    return int(one_row(row, "fold_counts")[0])


ACTIVITY_SETTLE_S = 60
ACTIVITY_LOOKBACK_MIN = 60
ACTIVITY_KEEP_MIN = 24 * 60


def fold_activity(
    conn: psycopg.Connection,
    schema: str,
    settle_s: int = ACTIVITY_SETTLE_S,
    lookback_min: int = ACTIVITY_LOOKBACK_MIN,
    keep_min: int = ACTIVITY_KEEP_MIN,
) -> int:
    """Record the activity counts of the minutes closed since the last call; returns how many."""
    params = {"settle": settle_s, "lookback": lookback_min, "keep": keep_min}
    row = conn.execute(render(SQL.fold_activity, schema), params).fetchone()
    return int(one_row(row, "fold_activity")[0])


def sweep_leases(conn: psycopg.Connection, schema: str, batch: int = 500, owner: str | None = None) -> list[int]:
    """Re-enqueue running executions whose lease lapsed (of ``owner`` alone, if given); returns
    their ids."""
    params = {"batch": batch, "channel": notify_channel(schema), "owner": owner}
    rows = conn.execute(render(SQL.sweep_leases, schema), params)
    return [row[0] for row in rows]


FULL_RETRY_S = 5.0
FULL_RETRY_MAX_S = 60.0
LOOK_BACK = timedelta(days=1)


@dataclass
class LeaseSweep:
    """One worker's lease sweep: full while the server lets it finish, else by dead owner
    (above). ``run(conn, schema)`` sweeps once and returns the ids it re-enqueued."""

    batch: int = 500
    failed_full: int = 0
    full_again_at: float = float("-inf")  # time.monotonic()
    next_owner: int = 0  # where the round of dead owners is
    by_owner: bool = False  # full sweeps cancelled: sweeping by owner

    def run(self, conn: psycopg.Connection, schema: str, budget_s: float = 0.05) -> list[int]:
        """Sweep: a full walk, or dead owners one by one for up to ``budget_s``."""
        now = time.monotonic()
        if now >= self.full_again_at:
            try:
                full = sweep_leases(conn, schema, self.batch)
            except psycopg.errors.QueryCanceled:
                self.failed_full += 1
                self.full_again_at = time.monotonic() + min(
                    FULL_RETRY_MAX_S, FULL_RETRY_S * 2 ** (self.failed_full - 1)
                )
                if not self.by_owner:
                    log.warning(
                        "event=lease_sweep_cancelled took_s=%.3f (sweeping the workers that stopped beating,"
                        " one by one)",
                        time.monotonic() - now,
                    )
                self.by_owner = True
                return []
            self.failed_full, self.by_owner = 0, False
            return full
        owners = [row[0] for row in conn.execute(render(SQL.dead_owners, schema), {"look_back": LOOK_BACK})]
        swept: list[int] = []
        deadline = now + budget_s
        for _ in range(len(owners)):
            if time.monotonic() >= deadline:
                break
            owner = owners[self.next_owner % len(owners)]
            self.next_owner += 1
            try:
                with conn.transaction():
                    conn.execute(SQL.by_owner_plan)
                    swept += sweep_leases(conn, schema, self.batch, owner)
            except psycopg.errors.QueryCanceled:
                log.warning("event=lease_sweep_cancelled owner=%s (the next owner)", owner)
        return swept


def sweep_waits(conn: psycopg.Connection, schema: str, batch: int = 500) -> list[int]:
    """Resolve due sleeps and timed-out approvals and re-enqueue them; returns execution ids."""
    rows = conn.execute(render(SQL.sweep_waits, schema), {"batch": batch})
    return [row[0] for row in rows]


def drop_stale_ready(conn: psycopg.Connection, schema: str) -> int:
    """Delete the ready rows whose execution is no longer enqueued as they say; returns how many."""
    return conn.execute(render(SQL.drop_stale_ready, schema)).rowcount


def ensure_partitions(conn: psycopg.Connection, schema: str) -> int:
    """Create the id ranges missing ahead; returns how many were created."""
    row = conn.execute(render(SQL.ensure_partitions, schema)).fetchone()
    return int(one_row(row, "ensure_partitions")[0])
