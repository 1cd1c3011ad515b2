"""The gates hold against the engine's own login (issue 44, findings 6 and 7).

Each attack the red team ran with plain SQL as a login granted kestrel_worker is run here the
same way, and refused by the database (migration 0024's triggers); what the engine itself does
with the same rights (its claim, in one statement or two, the deadline sweep, reopening a wait,
closing an attempt, declaring queues and schedules) still passes. Finding 7: a decision is timed
by the clock, not by its transaction's start.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

from kestrel_core import Kestrel
from kestrel_core.dispatch.claim import ClaimMark, claim_batch
from kestrel_core.dispatch.deadlines import sweep_deadlines
from kestrel_core.dispatch.sweeper import drop_stale_ready
from tests.core.test_roles import Logins, as_user, logins, refused  # noqa: F401 (fixture)
from tests.waiting import wait_for

DETAILS = {"fix": "restart api-1"}


def parked(db: psycopg.Connection, kind: str = "approval", wake_in: str | None = None) -> int:
    """An execution waiting on one open wait of ``kind`` (step 'ship'), as the engine leaves it."""
    eid = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status) VALUES ('w', 'waiting') RETURNING id"
    ).fetchone()[0]
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, details, wake_at)"
        " VALUES (%s, 'ship', %s, %s, clock_timestamp() + %s::interval)",
        (eid, kind, Jsonb(DETAILS), wake_in),
    )
    return eid


def state(db: psycopg.Connection, eid: int) -> tuple:
    return db.execute(
        "SELECT e.status, e.output, e.deadline_at, w.resolved_at, w.details, w.decision, w.decided_by, w.comment"
        "  FROM workflow_executions e JOIN workflow_waits w ON w.execution_id = e.id WHERE e.id = %s",
        (eid,),
    ).fetchone()


def enqueued(db: psycopg.Connection, name: str = "w") -> int:
    return db.execute(
        "INSERT INTO workflow_executions (workflow_name, status) VALUES (%s, 'enqueued') RETURNING id", (name,)
    ).fetchone()[0]


def ready(db: psycopg.Connection) -> list[int]:
    return [row[0] for row in db.execute("SELECT id FROM executions_ready ORDER BY id")]


# -- finding 6: an execution on a gate -------------------------------------------------------


@pytest.mark.parametrize("kind", ["approval", "sleep", "event", "child"])
def test_a_worker_login_cannot_complete_fail_or_release_a_waiting_execution(
    logins: Logins, db: psycopg.Connection, kind: str
) -> None:
    eid = parked(db, kind, "1 hour")
    before = state(db, eid)
    with as_user(logins.worker_dsn) as conn:
        for status in ("success", "error", "enqueued", "running", "paused"):
            assert refused(
                conn,
                "UPDATE workflow_executions SET status = %s, output = '{\"forged\": true}' WHERE id = %s",
                (status, eid),
            ), status
        # a deadline moved into the past, for the deadline sweep to fail it
        assert refused(
            conn, "UPDATE workflow_executions SET deadline_at = now() - interval '1 s' WHERE id = %s", (eid,)
        )
        # the gate withdrawn: the wait resolved by hand
        assert refused(conn, "UPDATE workflow_waits SET resolved_at = now() WHERE execution_id = %s", (eid,))
        if kind == "approval":  # what an approver is shown (other waits' details are the engine's)
            assert refused(
                conn, 'UPDATE workflow_waits SET details = \'{"fix": "drop db"}\' WHERE execution_id = %s', (eid,)
            )
        # what the engine does with the same rights: reopen a wait (a replay after a requeue)
        conn.execute("UPDATE workflow_waits SET resolved_at = NULL WHERE execution_id = %s", (eid,))
    assert state(db, eid) == before


def test_the_deadline_sweep_still_fails_a_parked_execution_past_its_deadline(
    logins: Logins, db: psycopg.Connection
) -> None:
    eid = parked(db, "approval", "1 hour")
    db.execute("UPDATE workflow_executions SET deadline_at = now() - interval '1 s' WHERE id = %s", (eid,))
    with as_user(logins.worker_dsn) as conn:
        assert sweep_deadlines(conn, "kestrel") == [eid]
    assert state(db, eid)[0] == "error"
    assert db.execute(
        "SELECT resolved_at IS NOT NULL FROM workflow_waits WHERE execution_id = %s", (eid,)
    ).fetchone() == (True,)


@pytest.mark.parametrize("decide", ["approve", "reject", "timeout"])
def test_a_decided_gate_never_changes_not_even_for_the_schema_owner(
    logins: Logins, db: psycopg.Connection, decide: str
) -> None:
    eid = parked(db, "approval", "1 hour")
    if decide == "timeout":
        db.execute(
            "UPDATE workflow_waits SET wake_at = clock_timestamp() - interval '1 s' WHERE execution_id = %s", (eid,)
        )
        db.execute("SELECT kestrel.sweep_waits(10)")
    else:
        with Kestrel(logins.operator_dsn) as op:
            getattr(op, decide)(eid, "ship", by="bob", comment="looked at it")
    decided = state(db, eid)
    assert decided[5] is not None
    edits = [
        'UPDATE workflow_waits SET details = \'{"fix": "something else"}\' WHERE execution_id = %s',
        "UPDATE workflow_waits SET decision = 'approved', decided_by = 'alice' WHERE execution_id = %s",
        "UPDATE workflow_waits SET comment = 'lgtm' WHERE execution_id = %s",
        "UPDATE workflow_waits SET resolved_at = NULL WHERE execution_id = %s",
    ]
    with as_user(logins.worker_dsn) as conn:
        for edit in edits:
            assert refused(conn, edit, (eid,)), edit
    for edit in edits:  # the owner (a superuser here) too: a decision is final
        assert refused(db, edit, (eid,)), edit
    assert state(db, eid) == decided


# -- finding 6: the ready queue --------------------------------------------------------------


def test_a_worker_login_cannot_take_a_live_execution_out_of_the_ready_queue(
    logins: Logins, db: psycopg.Connection
) -> None:
    eid = enqueued(db)
    assert ready(db) == [eid]
    with as_user(logins.worker_dsn) as conn:
        assert refused(conn, "DELETE FROM executions_ready")
        assert refused(conn, "DELETE FROM executions_ready WHERE id = %s", (eid,))
        assert refused(conn, "UPDATE executions_ready SET id = -1 WHERE id = %s", (eid,))
        assert refused(conn, "UPDATE executions_ready SET run_at = 'infinity' WHERE id = %s", (eid,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="out of the ready queue"):
            with conn.transaction():  # refused when the transaction commits, not before
                conn.execute("DELETE FROM executions_ready WHERE id = %s", (eid,))
                assert conn.execute("SELECT count(*) FROM executions_ready").fetchone() == (0,)
    assert ready(db) == [eid]
    assert db.execute("SELECT status FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == ("enqueued",)


def test_the_claim_still_takes_ready_rows_in_one_statement_or_in_two(logins: Logins, db: psycopg.Connection) -> None:
    first, second, gone = enqueued(db), enqueued(db), enqueued(db)
    db.execute("UPDATE workflow_executions SET status = 'cancelled' WHERE id = %s", (gone,))
    with as_user(logins.worker_dsn) as conn:
        claims, _ = claim_batch(
            conn, "kestrel", worker_id="w1", names=["w"], n=1, lease=timedelta(seconds=30), mark=ClaimMark()
        )
        assert [c.execution_id for c in claims] == [first]
        with conn.transaction():  # a claim in two statements: the ready row first, then the execution
            conn.execute("DELETE FROM executions_ready WHERE id = %s", (second,))
            conn.execute(
                "UPDATE workflow_executions SET status = 'running', owner_id = 'w2', claim_epoch = claim_epoch + 1,"
                " lease_expires = now() + interval '30 s' WHERE id = %s",
                (second,),
            )
    assert ready(db) == []
    assert db.execute("SELECT array_agg(status ORDER BY id) FROM workflow_executions").fetchone() == (
        ["running", "running", "cancelled"],
    )


def test_a_stale_ready_row_is_still_dropped_by_the_worker(logins: Logins, db: psycopg.Connection) -> None:
    eid = enqueued(db)
    # a ready row left behind (a claim that held it rolled back during a cancel, say)
    with db.transaction():
        db.execute("SET LOCAL session_replication_role = replica")
        db.execute("UPDATE workflow_executions SET status = 'cancelled' WHERE id = %s", (eid,))
    assert ready(db) == [eid]
    with as_user(logins.worker_dsn) as conn:
        assert drop_stale_ready(conn, "kestrel") == 1
    assert ready(db) == []


# -- finding 6: queues, attempts, events, schedules, prune -----------------------------------


def test_queue_limits_change_only_audited_and_never_into_a_pause(logins: Logins, db: psycopg.Connection) -> None:
    with as_user(logins.worker_dsn) as conn:
        with pytest.raises(psycopg.errors.CheckViolation, match="rate window of 100 years .* at most a day"):
            conn.execute("INSERT INTO queues (name, rate_limit, rate_period) VALUES ('slow', 1, '100 years')")
        conn.execute("INSERT INTO queues (name) VALUES ('q')")  # bound, no limits: nothing to audit
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE queues SET rate_limit = 1, rate_period = '100 years' WHERE name = 'q'")
        assert refused(conn, "UPDATE queues SET rate_starts = ARRAY['infinity'::timestamptz] WHERE name = 'q'")
        assert refused(conn, "UPDATE queues SET rate_starts = ARRAY[now() + interval '1 day'] WHERE name = 'q'")
        conn.execute("UPDATE queues SET concurrency = 1 WHERE name = 'q'")  # a declaration: audited
        conn.execute("UPDATE queues SET rate_starts = ARRAY[now()] WHERE name = 'q'")  # the claim's window
        # a queue declared with a week's window before version 24 still runs (its claims pass)
        db.execute("INSERT INTO queues (name, rate_limit, rate_period) VALUES ('weekly', 5, '7 days')")
        conn.execute("UPDATE queues SET rate_starts = ARRAY[now()] WHERE name = 'weekly'")
    rows = db.execute("SELECT db_user, kind, name, declared, was FROM declarations ORDER BY id").fetchall()
    assert [(r[0], r[1], r[2], r[3]["concurrency"], (r[4] or {}).get("concurrency")) for r in rows] == [
        (logins.worker_user, "queue", "q", 1, None),
        (db.info.user, "queue", "weekly", None, None),
    ]
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)
    assert db.execute("SELECT paused FROM queues WHERE name = 'q'").fetchone() == (False,)


def test_attempts_of_a_finished_execution_are_history(logins: Logins, db: psycopg.Connection) -> None:
    done = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, finished_at)"
        " VALUES ('w', 'success', now()) RETURNING id"
    ).fetchone()[0]
    db.execute(
        "INSERT INTO step_attempts (execution_id, step_id, attempt, outcome, finished_at, error)"
        " VALUES (%s, 'a', 1, 'error', now(), 'boom'), (%s, 'a', 2, 'success', now(), NULL)",
        (done, done),
    )
    live = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status) VALUES ('w', 'running') RETURNING id"
    ).fetchone()[0]
    db.execute("INSERT INTO step_attempts (execution_id, step_id, attempt) VALUES (%s, 'a', 1)", (live,))
    before = db.execute("SELECT * FROM step_attempts WHERE execution_id = %s ORDER BY attempt", (done,)).fetchall()
    with as_user(logins.worker_dsn) as conn:
        assert refused(
            conn, "UPDATE step_attempts SET outcome = 'success', error = NULL WHERE execution_id = %s", (done,)
        )
        assert refused(
            conn, "UPDATE step_attempts SET error = 'forged' WHERE execution_id = %s AND attempt = 2", (done,)
        )
        assert refused(conn, "UPDATE step_attempts SET execution_id = %s WHERE execution_id = %s", (live, done))
        # an open attempt: its worker closes it (the step boundary), once
        conn.execute(
            "UPDATE step_attempts SET outcome = 'success', finished_at = clock_timestamp() WHERE execution_id = %s",
            (live,),
        )
        assert refused(conn, "UPDATE step_attempts SET outcome = 'error' WHERE execution_id = %s", (live,))
    assert (
        db.execute("SELECT * FROM step_attempts WHERE execution_id = %s ORDER BY attempt", (done,)).fetchall() == before
    )


def test_send_event_records_the_database_role_and_an_audit_row(logins: Logins, db: psycopg.Connection) -> None:
    with as_user(logins.worker_dsn) as conn:
        event_id = conn.execute("SELECT kestrel.send_event('paid', '{\"amount\": 3}', 'alice')").fetchone()[0]
    assert db.execute("SELECT id, sent_by, sent_by_db_user FROM workflow_events").fetchall() == [
        (event_id, "alice", logins.worker_user)
    ]
    assert db.execute("SELECT actor, db_user, action, details FROM operator_actions").fetchall() == [
        ("alice", logins.worker_user, "send_event", {"key": "paid", "event_id": event_id})
    ]


def test_schedules_written_with_plain_sql_are_code_ones_and_audited(logins: Logins, db: psycopg.Connection) -> None:
    db.execute(
        "INSERT INTO schedules (name, cron, workflow_name, next_tick, source, created_by)"
        " VALUES ('ops', '0 * * * *', 'w', now() - interval '1 minute', 'cli', 'carol')"
    )
    with as_user(logins.worker_dsn) as conn:
        assert refused(
            conn,
            "INSERT INTO schedules (name, cron, workflow_name, next_tick, source, created_by)"
            " VALUES ('sneaky', '* * * * *', 'w', now(), 'cli', 'alice')",
        )
        assert refused(conn, "UPDATE schedules SET workflow_name = 'other', input = '{}' WHERE name = 'ops'")
        assert refused(conn, "UPDATE schedules SET next_tick = 'infinity' WHERE name = 'ops'")
        conn.execute(
            "INSERT INTO schedules (name, cron, workflow_name, next_tick, source, created_by)"
            " VALUES ('nightly', '0 3 * * *', 'w', now() + interval '1 day', 'code', 'deploy-7')"
        )
        conn.execute(  # the scheduler's advance of a due schedule (migration 0029)
            "UPDATE schedules SET next_tick = next_tick + interval '1 hour', last_tick = now() WHERE name = 'ops'"
        )
        conn.execute(
            "SELECT kestrel.add_schedule('hourly', '0 * * * *', 'UTC', 'w', NULL, false, now() + interval '1 hour',"
            " 'dave', NULL)"
        )
    audit = db.execute("SELECT actor, db_user, action, details->>'schedule' FROM operator_actions ORDER BY id")
    assert audit.fetchall() == [("dave", logins.worker_user, "add_schedule", "hourly")]
    declared = db.execute("SELECT db_user, kind, name, declared->>'created_by' FROM declarations ORDER BY id")
    assert declared.fetchall() == [(logins.worker_user, "schedule", "nightly", "deploy-7")]
    assert db.execute("SELECT name, workflow_name FROM schedules ORDER BY name").fetchall() == [
        ("hourly", "w"),
        ("nightly", "w"),
        ("ops", "w"),
    ]


def test_prune_refuses_a_cutoff_in_the_future(logins: Logins, db: psycopg.Connection) -> None:
    db.execute("INSERT INTO workflow_executions (workflow_name, status, finished_at) VALUES ('w', 'success', now())")
    for dsn in (logins.worker_dsn, logins.operator_dsn):
        with as_user(dsn) as conn:
            with pytest.raises(psycopg.Error, match="cutoff .* is in the future") as refusal:
                conn.execute("SELECT kestrel.prune_finished(now() + interval '1000 years', 100, 'mallory')")
            assert refusal.value.sqlstate == "KS409"
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (1,)
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)


# -- finding 7: decisions timed by the clock -------------------------------------------------


def clock_past(db: psycopg.Connection, moment) -> bool:
    return bool(db.execute("SELECT clock_timestamp() > %s", (moment,)).fetchone()[0])


def test_a_transaction_opened_before_the_deadline_cannot_decide_after_it(
    logins: Logins, db: psycopg.Connection
) -> None:
    eid = parked(db, "approval", "1.5 seconds")
    deadline = db.execute("SELECT wake_at FROM workflow_waits WHERE execution_id = %s", (eid,)).fetchone()[0]
    with psycopg.connect(logins.operator_dsn) as conn:  # not autocommit: one transaction
        began = conn.execute("SELECT now()").fetchone()[0]
        assert began < deadline
        wait_for(lambda: clock_past(db, deadline), what="the deadline to pass")
        with pytest.raises(psycopg.Error, match="timed out") as refusal:
            conn.execute("SELECT kestrel.decide_approval(%s, 'ship', true, 'alice', NULL)", (eid,))
        assert refusal.value.sqlstate == "KS409"
    assert state(db, eid)[0] == "waiting" and state(db, eid)[5] is None
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)


def test_a_decision_records_when_it_was_made_not_when_its_transaction_began(
    logins: Logins, db: psycopg.Connection
) -> None:
    eid = parked(db, "approval", "1 hour")
    with psycopg.connect(logins.operator_dsn) as conn:
        began = conn.execute("SELECT now()").fetchone()[0]
        wait_for(lambda: clock_past(db, began + timedelta(milliseconds=300)), what="time to pass")
        called = db.execute("SELECT clock_timestamp()").fetchone()[0]
        decision = conn.execute("SELECT kestrel.decide_approval(%s, 'ship', true, 'alice', NULL)", (eid,)).fetchone()[0]
        conn.commit()
    decided_at, audited_at = db.execute(
        "SELECT w.decided_at, a.at FROM workflow_waits w JOIN operator_actions a ON a.execution_id = w.execution_id"
        " WHERE w.execution_id = %s",
        (eid,),
    ).fetchone()
    assert decided_at >= called > began
    assert audited_at == decided_at
    assert datetime.fromisoformat(decision["decided_at"]) == decided_at


# -- the reader login: what the docs' "Security" table says of it -----------------------------


def test_the_reader_login_reads_and_does_nothing_else(reader_dsn: str, db: psycopg.Connection) -> None:
    eid = parked(db, "approval", "1 hour")
    with as_user(reader_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM workflow_executions").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM approval_audits").fetchone() == (0,)
        for statement in (
            "UPDATE workflow_executions SET status = 'success'",
            "DELETE FROM executions_ready",
            "INSERT INTO workflow_events (key) VALUES ('k')",
            "SELECT nextval('operator_actions_id_seq')",
            f"SELECT kestrel.decide_approval({eid}, 'ship', true, 'alice', NULL)",
            "SELECT kestrel.send_event('k', NULL, 'alice')",
            "SELECT kestrel.prune_finished(now(), 10, 'alice')",
            "CREATE TABLE kestrel.mine (x int)",
        ):
            assert refused(conn, statement), statement
    assert state(db, eid)[0] == "waiting"
