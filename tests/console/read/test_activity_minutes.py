"""The dashboard's activity chart reads closed minutes from activity_minutes (recorded once by
the workers' fold_activity, migration 0019) and only the minutes after them live; the chart
is the same as when every bucket is read live (issue 22)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from kestrel_console.read import Reader
from kestrel_core import Kestrel
from kestrel_core.db.statements import render
from kestrel_core.dispatch import sweeper

S = "kestrel"

# Finished executions spread over the last 14 minutes (created 20 s and started 10 s before
# they finished; 1 in 7 failed), and live ones created (and started) within the last 10.
SEED_FINISHED = """
INSERT INTO workflow_executions
    (workflow_name, status, claims, claim_epoch, run_at, created_at, updated_at, started_at, finished_at)
SELECT 'w', CASE WHEN i %% 7 = 0 THEN 'error' ELSE 'success' END, 1, 1,
       t - interval '20 s', t - interval '20 s', t, t - interval '10 s', t
  FROM generate_series(1, %(n)s) AS i,
       LATERAL (SELECT now() - interval '14 minutes' * i / %(n)s AS t) AS x
"""
SEED_LIVE = """
INSERT INTO workflow_executions
    (workflow_name, status, claims, claim_epoch, run_at, created_at, updated_at, started_at)
SELECT 'w', kind, 1, 1, t, t, t, CASE WHEN kind <> 'enqueued' THEN t + interval '5 s' END
  FROM generate_series(1, %(n)s) AS i,
       LATERAL (SELECT now() - interval '1 second' * (i %% 600) AS t,
                       (ARRAY['enqueued', 'running', 'waiting'])[1 + i %% 3] AS kind) AS x
"""
ROWS = "SELECT created_at, started_at, finished_at, status FROM workflow_executions"
FINISH = "UPDATE workflow_executions SET status = %s, finished_at = now() WHERE id = %s"
BUMP_LAST_MINUTE = """
UPDATE activity_minutes SET completed = completed + 1000 WHERE minute = (SELECT max(minute) FROM activity_minutes)
"""
BUMP_ENQUEUED = "UPDATE activity_minutes SET enqueued = enqueued + 1000"
DROP_MINUTE = "DELETE FROM activity_minutes WHERE minute = %s"


def truth(db: psycopg.Connection, buckets: list[dict[str, Any]], bucket_s: int) -> list[tuple[int, int, int, int]]:
    """Per bucket (as the chart returned them): created, started, finished, failed, counted
    from the rows themselves."""
    rows = db.execute(ROWS).fetchall()
    width = timedelta(seconds=bucket_s)

    def count(times: list[datetime | None], start: datetime) -> int:
        return sum(1 for t in times if t is not None and start <= t < start + width)

    return [
        (
            count([r[0] for r in rows], b["start"]),
            count([r[1] for r in rows], b["start"]),
            count([r[2] for r in rows], b["start"]),
            count([r[2] for r in rows if r[3] == "error"], b["start"]),
        )
        for b in buckets
    ]


def chart(buckets: list[dict[str, Any]]) -> list[tuple[int, int, int, int]]:
    return [(b["enqueued"], b["started"], b["completed"], b["failed"]) for b in buckets]


def test_recorded_minutes_give_the_same_chart_and_what_follows_is_read_live(
    reader: Reader, db: psycopg.Connection, app: Kestrel
) -> None:
    db.execute(SEED_FINISHED, {"n": 900})
    db.execute(SEED_LIVE, {"n": 300})
    live = reader.activity(15, 60)
    assert chart(live) == truth(db, live, 60)

    recorded = sweeper.fold_activity(db, S, settle_s=0)
    assert recorded >= 15  # the last hour's closed minutes
    assert sweeper.fold_activity(db, S, settle_s=0) in (0, 1)  # nothing new (1: a minute closed meanwhile)
    folded = reader.activity(15, 60)
    assert chart(folded) == truth(db, folded, 60)
    five = reader.activity(60, 300)  # whole minutes: the table serves 5-minute buckets too
    assert chart(five) == truth(db, five, 300)

    # What happens after the fold is read live: new executions, a completion, a failure.
    new = app.enqueue_many("w", [1, 2, 3])
    db.execute(FINISH, ("success", new[0]))
    db.execute(FINISH, ("error", new[1]))
    after = reader.activity(15, 60)
    assert chart(after) == truth(db, after, 60)
    assert sum(b["enqueued"] for b in after) == sum(b["enqueued"] for b in folded) + 3

    # The chart does read the recorded rows (not the executions again): a recorded minute
    # that says more shows more.
    db.execute(BUMP_LAST_MINUTE)
    bumped = reader.activity(15, 60)
    assert sum(b["completed"] for b in bumped) == sum(b["completed"] for b in after) + 1000


def test_a_gap_in_the_recorded_minutes_or_a_partial_minute_bucket_reads_all_live(
    reader: Reader, db: psycopg.Connection
) -> None:
    db.execute(SEED_FINISHED, {"n": 900})
    db.execute(SEED_LIVE, {"n": 300})
    sweeper.fold_activity(db, S, settle_s=0)
    db.execute(BUMP_ENQUEUED)  # would show if read
    odd = reader.activity(15, 90)  # 90 s buckets: minutes do not fit them
    assert chart(odd) == truth(db, odd, 90)
    # A gap (no worker for a while) at the window's start: every bucket is read live.
    first = reader.activity(15, 60)[0]["start"]
    db.execute(DROP_MINUTE, (first + timedelta(minutes=1),))
    gap = reader.activity(15, 60)
    if gap[0]["start"] == first:  # (a minute closing between the two reads moves the window)
        assert chart(gap) == truth(db, gap, 60)


def test_a_refresh_reads_the_executions_of_the_unrecorded_minutes_only(dsn: str, db: psycopg.Connection) -> None:
    """3,000 finishes over the last 14 minutes: once the closed minutes are recorded, the
    refresh reads from workflow_executions the few of the current minute, not the window's
    (before migration 0019 it read all of them, 40-60 ms at 10M finished executions)."""
    db.execute(SEED_FINISHED, {"n": 3000})
    db.execute("ANALYZE workflow_executions")
    sweeper.fold_activity(db, S, settle_s=0)
    with Reader(dsn) as reader:
        statement, params = reader.refresh_statements()["activity"]
    plan = db.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + render(statement, S), params).fetchone()[0]  # type: ignore[index]

    def rows_read(node: dict[str, Any]) -> int:
        own = node["Actual Rows"] if node.get("Relation Name") == "workflow_executions" else 0
        return own + sum(rows_read(child) for child in node.get("Plans", []))

    # The current minute holds ~3000/14 = 215 finishes; a minute closing meanwhile, ~430.
    assert rows_read(plan[0]["Plan"]) < 3000 / 5
