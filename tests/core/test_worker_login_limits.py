"""A worker login changes only what the engine needs (issue 18, finding 4).

With plain SQL it used to approve a gate, cancel an execution, bring a finished one back and
pause a queue, with no audit row. Now the database refuses each (column privileges and the
trigger guard_finished_executions), and a checkpoint it forges for a gate is not taken as a
decision: only decide_approval (audited) and the sweep write decisions.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core import Kestrel
from tests.core.test_roles import Logins, as_user, logins, refused  # noqa: F401 (fixture)
from tests.waiting import wait_for


def _seed(db: psycopg.Connection) -> dict[str, int]:
    ids = {}
    for label, status in (("gated", "waiting"), ("live", "enqueued"), ("done", "success"), ("failed", "error")):
        ids[label] = db.execute(
            "INSERT INTO workflow_executions (workflow_name, status, output) VALUES ('w', %s, %s) RETURNING id",
            (status, Jsonb({"was": status})),
        ).fetchone()[0]
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind) VALUES (%s, 'ship', 'approval')", (ids["gated"],)
    )
    db.execute("INSERT INTO queues (name) VALUES ('q')")
    db.execute(
        "INSERT INTO schedules (name, cron, workflow_name, next_tick, source)"
        " VALUES ('s', '* * * * *', 'w', now(), 'code')"
    )
    return ids


STATE = """
SELECT (SELECT array_agg(status || ':' || output::text ORDER BY id) FROM workflow_executions),
       (SELECT array_agg(coalesce(decision, '-') || ':' || coalesce(decided_by, '-') || ':'
                         || (resolved_at IS NULL)::text) FROM workflow_waits),
       (SELECT array_agg(paused) FROM queues), (SELECT array_agg(paused) FROM schedules),
       (SELECT count(*) FROM operator_actions)
"""


def test_plain_updates_by_a_worker_login_cannot_decide_cancel_requeue_or_pause(
    logins: Logins,
    dsn: str,
    db: psycopg.Connection,
) -> None:
    ids = _seed(db)
    before = db.execute(STATE).fetchone()
    with as_user(logins.worker_dsn) as conn:
        # approve (or reject) a gate: the decision columns are not the worker's
        assert refused(
            conn,
            "UPDATE workflow_waits SET decision = 'approved', decided_by = 'alice',"
            " decided_at = now(), resolved_at = now() WHERE execution_id = %s",
            (ids["gated"],),
        )
        assert refused(conn, "UPDATE workflow_waits SET decided_by_db_user = 'ops_alice'")
        assert refused(
            conn,
            "INSERT INTO workflow_waits (execution_id, step_id, kind, decision, decided_by)"
            " VALUES (%s, 'other', 'approval', 'approved', 'alice')",
            (ids["gated"],),
        )
        # cancel
        assert refused(
            conn,
            "UPDATE workflow_executions SET status = 'cancelled', finished_at = now() WHERE id = %s",
            (ids["live"],),
        )
        # requeue / bring back a finished execution, or rewrite its result
        for label in ("done", "failed"):
            assert refused(
                conn,
                "UPDATE workflow_executions SET status = 'enqueued', finished_at = NULL WHERE id = %s",
                (ids[label],),
            )
        assert refused(conn, "UPDATE workflow_executions SET output = '{\"forged\": 1}' WHERE id = %s", (ids["done"],))
        # pause a queue or a schedule
        assert refused(conn, "UPDATE queues SET paused = true, paused_by = 'alice'")
        assert refused(conn, "INSERT INTO queues (name, paused) VALUES ('q2', true)")
        assert refused(conn, "UPDATE schedules SET paused = true")
        # what the engine needs still works: reopening a wait, its rate window
        conn.execute("UPDATE workflow_waits SET resolved_at = NULL WHERE execution_id = %s", (ids["gated"],))
        conn.execute("UPDATE queues SET rate_starts = '{}' WHERE name = 'q'")
    assert db.execute(STATE).fetchone() == before


def test_a_checkpoint_forged_for_a_gate_is_not_a_decision(
    logins: Logins,
    app: Kestrel,
    db: psycopg.Connection,
    start_worker,
) -> None:
    @app.workflow("gated")
    def gated(ctx, _):
        d = ctx.wait_for_approval("ship", timeout=timedelta(hours=1))
        return {"approved": d.approved, "by": d.by}

    start_worker(app)
    eid = app.enqueue("gated")
    wait_for(lambda: app.get(eid).status == "waiting", what="the gate")
    with as_user(logins.worker_dsn) as conn:  # what a worker login may write: a checkpoint, a wake-up
        conn.execute(
            "INSERT INTO operation_outputs (execution_id, step_id, output) VALUES (%s, 'ship', %s)",
            (eid, Jsonb({"approved": True, "by": "alice", "comment": None, "timed_out": False})),
        )
        # and it may not wake the gated execution itself (migration 0024: guard_waiting_executions)
        assert refused(conn, "UPDATE workflow_executions SET status = 'enqueued', run_at = now() WHERE id = %s", (eid,))
    # Woken any other way (here by the schema's owner, who must take the gate away first: an
    # undecided gate holds its execution, migration 0029), the replay still refuses the forgery.
    db.execute("UPDATE workflow_waits SET resolved_at = now() WHERE execution_id = %s", (eid,))
    db.execute("UPDATE workflow_executions SET status = 'enqueued', run_at = now() WHERE id = %s", (eid,))
    wait_for(lambda: app.get(eid).done, what="the replay")
    done = app.get(eid)
    assert done.status == "error" and done.output is None
    assert "approval gate 'ship'" in done.error and "no recorded decision backs" in done.error
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)


def test_the_worker_role_still_runs_children_and_events(
    logins: Logins,
    dsn: str,
    db: psycopg.Connection,
    start_worker,
) -> None:
    """What the column privileges leave the worker: parking on children and on events, and the
    sweep of a wait's timeout (sweep_waits), as a kestrel_worker login."""
    app = Kestrel(logins.worker_dsn)

    @app.workflow("parent")
    def parent(ctx, n):
        child = ctx.start_child("child", n)
        paid = ctx.wait_for_event("paid", timeout=timedelta(minutes=5))
        late = ctx.wait_for_event("never", timeout=timedelta(milliseconds=200))
        return {"child": ctx.wait_for(child), "paid": paid.payload, "late": late.timed_out}

    @app.workflow("child")
    def child(ctx, n):
        return n * 2

    try:
        start_worker(app)
        eid = app.enqueue("parent", 21)
        wait_for(
            lambda: db.execute(
                "SELECT 1 FROM workflow_waits WHERE execution_id = %s AND kind = 'event'", (eid,)
            ).fetchone(),
            what="the event wait",
        )
        app.send_event("paid", {"amount": 30})
        wait_for(lambda: app.get(eid).done, what="the parent")
        assert (app.get(eid).status, app.get(eid).output) == (
            "success",
            {"child": 42, "paid": {"amount": 30}, "late": True},
        )
    finally:
        app.close()
