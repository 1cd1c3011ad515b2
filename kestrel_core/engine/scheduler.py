"""The scheduler: leaderless, run by every worker's maintenance loop.

``tick_due`` takes the due schedules one at a time, each in one short transaction: lock its
row (``FOR UPDATE SKIP LOCKED``: two workers never hold the same schedule, and neither waits
for the other), enqueue its due ticks, move ``next_tick`` on, commit. Each tick's execution
carries the engine key ``schedule:<name>:<tick>`` (in ``engine_key``, a column no user key
reaches: see kestrel_core.dispatch.keys), so even a tick that were computed twice (a row edited by hand,
a schedule removed and added back) inserts one execution, and no user's execution takes its place.

Missed ticks (no worker ran, the database was down) follow the schedule's policy:

- ``catch_up=False`` (the default): a tick up to ``LATE_GRACE`` late is still enqueued (a busy
  or restarting worker is not an outage); later ticks are skipped, except the most recent due
  tick, which is always enqueued. Then the schedule goes on from the next tick.
- ``catch_up=True``: every missed tick is enqueued, oldest first, at most ``CATCH_UP_BATCH``
  per schedule per pass (a backlog drains over a few passes) and at most the ``CATCH_UP_MAX``
  most recent ones (older ticks are skipped and logged).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from kestrel_core.admin import cron
from kestrel_core.admin.schedules import run_input
from kestrel_core.base.serialization import to_json
from kestrel_core.db.sql_files import paste, statements_beside
from kestrel_core.db.statements import notify_channel, one_row, render
from kestrel_core.dispatch.enqueue import PLACE_ONE
from kestrel_core.dispatch.keys import tick_key

SQL = statements_beside(__file__)

LATE_GRACE = timedelta(seconds=10)
CATCH_UP_BATCH = 100
CATCH_UP_MAX = 1000

log = logging.getLogger("kestrel.scheduler")

ENQUEUE_TICK = paste(SQL.enqueue_tick, place_one=PLACE_ONE)


@dataclass
class Pass:
    """What one ``tick_due`` did: (schedule, tick, execution id) enqueued, ticks skipped by the
    policy per schedule, and schedules whose row could not be evaluated."""

    enqueued: list[tuple[str, datetime, int]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def plan(
    expression: str, tz: str, next_tick: datetime, now: datetime, catch_up: bool
) -> tuple[list[datetime], datetime, int]:
    """The ticks to enqueue now, the next tick to wait for, and how many missed ticks the
    policy skips (a count, or -1 when too many to count cheaply)."""
    if catch_up:
        ticks, following = cron.ticks_due(expression, tz, next_tick, now, CATCH_UP_BATCH)
        if len(ticks) == CATCH_UP_BATCH and following <= now:
            oldest_kept = cron.nth_latest(expression, tz, now, CATCH_UP_MAX)
            if next_tick < oldest_kept:
                ticks, following = cron.ticks_due(expression, tz, oldest_kept, now, CATCH_UP_BATCH)
                return ticks, following, -1
        return ticks, following, 0
    if now - next_tick <= LATE_GRACE:  # late, not missed: every tick
        ticks, following = cron.ticks_due(expression, tz, next_tick, now, CATCH_UP_BATCH)
        return ticks, following, 0
    # Missed: the ticks still within the grace, else only the latest one (which is due).
    recent = cron.next_after(expression, tz, now - LATE_GRACE - timedelta(microseconds=1))
    if recent > now:
        recent = cron.latest_at_or_before(expression, tz, now)
    ticks, following = cron.ticks_due(expression, tz, recent, now, CATCH_UP_BATCH)
    skipped, _ = cron.ticks_due(expression, tz, next_tick, min(recent - timedelta(microseconds=1), now), CATCH_UP_BATCH)
    return ticks, following, len(skipped) if len(skipped) < CATCH_UP_BATCH else -1


def tick_due(
    conn: psycopg.Connection, schema: str, now: datetime | None = None, limit: int = 100, worker: str | None = None
) -> Pass:
    """Enqueue the due ticks of up to ``limit`` schedules; ``now`` defaults to the database's
    clock (tests pass one). Safe to run from every worker at once; ``worker`` names the caller
    in the log."""
    done = Pass()
    tried: list[str] = []
    if conn.execute(render(SQL.any_due, schema), {"now": now}).fetchone() is None:
        return done
    while len(tried) < limit:
        before = len(done.enqueued)
        if not _advance_one(conn, schema, now, tried, done, worker):
            break
        for name, tick, execution_id in done.enqueued[before:]:  # committed: say so
            log.info(
                "event=scheduled worker=%s schedule=%s tick=%s execution_id=%s",
                worker,
                name,
                tick.isoformat(),
                execution_id,
            )
    for name, count in done.skipped.items():
        log.warning(
            "event=schedule_ticks_skipped worker=%s schedule=%s skipped=%s (missed while no "
            "worker ran or the database was down; skipped by the schedule's catch_up policy)",
            worker,
            name,
            "many" if count < 0 else count,
        )
    return done


def _advance_one(
    conn: psycopg.Connection, schema: str, now: datetime | None, tried: list[str], done: Pass, worker: str | None
) -> bool:
    """One due schedule in one transaction: lock, enqueue its ticks, move on. False if none is due."""
    with conn.transaction():
        row = conn.execute(render(SQL.next_due, schema), {"now": now, "tried": tried}).fetchone()
        if row is None:
            return False
        name, expression, tz, workflow, input, catch_up, next_tick, at = row
        tried.append(name)
        try:
            ticks, following, skipped = plan(expression, tz, next_tick, at, catch_up)
        except (ValueError, KeyError) as exc:  # a row edited by hand into nonsense
            done.failed[name] = str(exc)
            log.error("event=schedule_failed worker=%s schedule=%s error=%r (fix or remove it)", worker, name, str(exc))
            return True
        execution_id = None
        enqueued = []
        for tick in ticks:
            execution_id = _enqueue_tick(
                conn, schema, workflow, run_input(name, tick, _as_dict(input)), tick_key(name, tick)
            )
            enqueued.append((name, tick, execution_id))
        conn.execute(
            render(SQL.advance, schema),
            {
                "name": name,
                "next_tick": following,
                "last_tick": ticks[-1] if ticks else None,
                "execution_id": execution_id,
            },
        )
    done.enqueued.extend(enqueued)
    if skipped:
        done.skipped[name] = skipped
    return True


def _enqueue_tick(conn: psycopg.Connection, schema: str, workflow: str, input: dict[str, Any], key: str) -> int:
    """Insert a tick's execution (or find the one its key already has); returns its id."""
    row = conn.execute(
        render(ENQUEUE_TICK, schema),
        {
            "queue": None,
            "priority": None,
            "ckey": None,
            "name": workflow,
            "key": key,
            "input": to_json(input, f"the input of workflow {workflow!r}"),
            "channel": notify_channel(schema),
        },
    ).fetchone()
    if row is None:
        row = conn.execute(render(SQL.by_engine_key, schema), (key,)).fetchone()
    row = one_row(row, "ENQUEUE_TICK or by_engine_key")  # an insert or an existing key
    execution_id: int = row[0]
    return execution_id


def _as_dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None
