"""Retention: prune deletes finished executions older than a cutoff, in batches, with their
steps, waits and attempts; never a live execution; never waiting on a lock; audited."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from kestrel_core import Kestrel
from kestrel_core.admin.prune import connection_runner, parse_age, prune, prune_batch
from tests.core.conftest import feeding
from tests.waiting import wait_for

S = "kestrel"

# n finished executions per status, finished `age` ago, each with 2 checkpoints, 2 attempts and
# a decided approval gate.
SEED_FINISHED = """
WITH e AS (
    INSERT INTO workflow_executions (workflow_name, status, input, output, claims, created_at,
                                     updated_at, started_at, finished_at)
    SELECT 'old', s.status, to_jsonb(g), '1', 1, now() - %(age)s::interval - interval '1 hour',
           now() - %(age)s::interval, now() - %(age)s::interval, now() - %(age)s::interval
      FROM generate_series(1, %(n)s) g, unnest(ARRAY['success', 'error', 'cancelled']) s(status)
    RETURNING id
), o AS (
    INSERT INTO operation_outputs (execution_id, step_id, output)
    SELECT id, step, '1' FROM e, unnest(ARRAY['a', 'b']) step
), a AS (
    INSERT INTO step_attempts (execution_id, step_id, attempt, outcome)
    SELECT id, step, 1, 'success' FROM e, unnest(ARRAY['a', 'b']) step
), w AS (
    INSERT INTO workflow_waits (execution_id, step_id, kind, resolved_at, decision)
    SELECT id, 'gate', 'approval', now(), 'approved' FROM e
)
SELECT count(*) FROM e
"""


def seed_finished(db: psycopg.Connection, n: int, age: str) -> int:
    return db.execute(SEED_FINISHED, {"n": n, "age": age}).fetchone()[0]


def count(db: psycopg.Connection, table: str, where: str = "true") -> int:
    return db.execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchone()[0]


def run_prune(app: Kestrel, older_than: timedelta, **options):
    return prune(connection_runner(app.connection), S, older_than=older_than, by="tester", **options)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("90m", timedelta(minutes=90)),
        ("45s", timedelta(seconds=45)),
        ("2w", timedelta(weeks=2)),
        (" 7D ", timedelta(days=7)),
    ],
)
def test_parse_age(text: str, expected: timedelta) -> None:
    assert parse_age(text) == expected


@pytest.mark.parametrize("text", ["", "30", "d", "30 days", "1.5h", "-3d", "0d", "30y"])
def test_parse_age_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError, match="age"):
        parse_age(text)


def test_prunes_old_finished_executions_with_everything_they_own(app: Kestrel, db: psycopg.Connection) -> None:
    seed_finished(db, 4, "40 days")  # 12 old finished: go
    seed_finished(db, 1, "10 days")  # 3 recent finished: stay
    live = [app.enqueue("live", i) for i in range(3)]
    # Live rows stay however old, even one whose finished_at is (wrongly) set.
    db.execute(
        "UPDATE workflow_executions SET created_at = now() - interval '400 days',"
        " updated_at = now() - interval '400 days' WHERE id = ANY(%s)",
        (live,),
    )
    db.execute(
        "UPDATE workflow_executions SET status = 'waiting', finished_at = now() - interval '400 days' WHERE id = %s",
        (live[0],),
    )
    db.execute(
        "UPDATE workflow_executions SET status = 'running', owner_id = 'w', lease_expires = now() WHERE id = %s",
        (live[1],),
    )

    result = run_prune(app, timedelta(days=30))

    assert result.deleted == 12 and result.complete
    assert count(db, "workflow_executions", "workflow_name = 'old'") == 3
    assert (
        count(
            db,
            "workflow_executions",
            "finished_at < now() - interval '30 days' AND status IN ('success', 'error', 'cancelled')",
        )
        == 0
    )
    assert sorted(r[0] for r in db.execute("SELECT id FROM workflow_executions WHERE workflow_name = 'live'")) == live
    for table in ("operation_outputs", "step_attempts", "workflow_waits"):  # nothing orphaned
        assert count(db, table) == 3 * 2 if table != "workflow_waits" else count(db, table) == 3
        assert count(db, table, "execution_id NOT IN (SELECT id FROM workflow_executions)") == 0
    (audit,) = db.execute("SELECT actor, action, execution_id, details FROM operator_actions").fetchall()
    assert audit[:3] == ("tester", "prune", None)
    assert audit[3]["deleted"] == 12 and audit[3]["by_status"] == {"success": 4, "error": 4, "cancelled": 4}
    assert run_prune(app, timedelta(days=30)).deleted == 0  # idempotent


def test_prunes_in_batches_and_reports_progress(app: Kestrel, db: psycopg.Connection) -> None:
    seed_finished(db, 4, "2 days")  # 12 rows
    seen: list[int] = []
    result = run_prune(app, timedelta(days=1), batch_size=5, progress=lambda r: seen.append(r.deleted))
    assert result.history == [5, 5, 2, 0] and seen == [5, 10, 12, 12]
    assert [r[0] for r in db.execute("SELECT (details->>'deleted')::int FROM operator_actions ORDER BY id")] == [
        5,
        5,
        2,
    ]

    seed_finished(db, 4, "2 days")
    partial = run_prune(app, timedelta(days=1), batch_size=5, max_batches=1)
    assert (partial.deleted, partial.complete) == (5, False)


def test_never_waits_for_a_locked_row(app: Kestrel, dsn: str, db: psycopg.Connection) -> None:
    """A row locked by someone else (say, a requeue in progress) is skipped, not waited for."""
    seed_finished(db, 2, "2 days")
    locked = db.execute("SELECT min(id) FROM workflow_executions").fetchone()[0]
    with psycopg.connect(dsn) as holder:  # a transaction holding the row lock
        holder.execute("SELECT 1 FROM kestrel.workflow_executions WHERE id = %s FOR UPDATE", (locked,))
        # The holder keeps its lock until the block ends: a prune that waited for it would end
        # in LockNotAvailable, however fast or slow the machine.
        with psycopg.connect(dsn, autocommit=True, options="-c lock_timeout=5000") as conn:
            cutoff = conn.execute("SELECT now() - interval '1 day'").fetchone()[0]
            assert prune_batch(conn, S, cutoff, by="tester") == 5
        assert count(db, "workflow_executions") == 1
    assert run_prune(app, timedelta(days=1)).deleted == 1


def test_pruning_during_a_load_loses_no_live_execution(
    app: Kestrel,
    db: psycopg.Connection,
    start_worker,
) -> None:
    @app.workflow("busy")
    def busy(ctx, i):
        first = ctx.step("one", lambda: i)
        if i % 3 == 0:
            ctx.sleep("nap", timedelta(milliseconds=100))
        return ctx.step("two", lambda: first + 1)

    old = seed_finished(db, 1000, "40 days")  # 3000 old finished executions
    start_worker(app, concurrency=4)
    with feeding(app, "busy") as enqueued:
        wait_for(lambda: len(enqueued) >= 50, what="the load to start")
        result = run_prune(app, timedelta(days=30), batch_size=200)
        after_prune = len(enqueued)
        wait_for(lambda: len(enqueued) >= after_prune + 50, what="the load to go on after the prune")

    assert result.deleted == old and result.batches >= old // 200
    assert count(db, "workflow_executions", "workflow_name = 'old'") == 0
    wait_for(
        lambda: count(db, "workflow_executions", "status <> 'success'") == 0,
        timeout=60,
        what="every enqueued execution to finish",
    )
    rows = dict(db.execute("SELECT id, output FROM workflow_executions").fetchall())
    assert sorted(rows) == sorted(enqueued)  # none lost, none extra
    inputs = dict(db.execute("SELECT id, input FROM workflow_executions").fetchall())
    assert all(rows[eid] == inputs[eid] + 1 for eid in enqueued)
    assert count(db, "operation_outputs", "execution_id NOT IN (SELECT id FROM workflow_executions)") == 0
    # The console's counters (migration 3) followed the deletes.
    assert db.execute("SELECT coalesce(sum(n), 0) FROM execution_counts").fetchone()[0] == len(enqueued)


def test_worker_prunes_on_a_schedule(app, db, start_worker) -> None:
    """A worker started with prune_older_than deletes old finished executions by itself."""
    from datetime import timedelta

    from tests.waiting import wait_for

    @app.workflow
    def quick(ctx, _):
        return 1

    old = app.enqueue("quick")
    db.execute(
        "UPDATE workflow_executions SET status = 'success', finished_at = now() - interval '40 days' WHERE id = %s",
        (old,),
    )
    live = app.enqueue("nobody-runs-this")
    start_worker(app, prune_older_than=timedelta(days=30), prune_every=0.2)
    wait_for(
        lambda: db.execute("SELECT count(*) = 0 FROM workflow_executions WHERE id = %s", (old,)).fetchone()[0],
        what="the scheduled prune",
    )
    assert app.get(live).status == "enqueued"
    actor = db.execute("SELECT actor FROM operator_actions WHERE action = 'prune'").fetchone()[0]
    assert actor.startswith("worker:")
