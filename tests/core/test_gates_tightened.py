"""The gates of migration 0024, tightened after a second review (issue 44; migration 0029).

Each attack the reviewer ran as the worker login (or, for the id, as the schema's owner) is run
here the same way and refused by the database; what the engine does with the same rights still
passes (tests/core/test_gates.py, test_waits.py, test_schedules.py run the engine itself).
"""

from __future__ import annotations

import psycopg
import pytest

from tests.core.test_gates import parked, state
from tests.core.test_roles import Logins, as_user, logins, refused  # noqa: F401 (fixture)


def status(db: psycopg.Connection, eid: int) -> str:
    return db.execute("SELECT status FROM workflow_executions WHERE id = %s", (eid,)).fetchone()[0]


# -- 1. a wait made (or reopened) beside a gate, for the sweep to wake its execution ----------


def test_a_worker_login_cannot_wake_a_gated_execution_with_a_wait_of_its_own(
    logins: Logins, db: psycopg.Connection
) -> None:
    eid = parked(db, "approval", "1 hour")
    before = state(db, eid)
    with as_user(logins.worker_dsn) as conn:
        assert refused(
            conn,
            "INSERT INTO workflow_waits (execution_id, step_id, kind, wake_at)"
            " VALUES (%s, 'nap', 'sleep', now() - interval '1 s')",
            (eid,),
        )
        conn.execute("SELECT kestrel.sweep_waits(100)")
    assert status(db, eid) == "waiting" and state(db, eid) == before


def test_a_reopened_old_wait_does_not_wake_a_gated_execution_either(logins: Logins, db: psycopg.Connection) -> None:
    eid = parked(db, "approval", "1 hour")
    # a sleep the workflow slept through before its gate (resolved), still in the table
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, wake_at, resolved_at)"
        " VALUES (%s, 'nap', 'sleep', now() - interval '1 h', now() - interval '1 h')",
        (eid,),
    )
    with as_user(logins.worker_dsn) as conn:
        assert refused(conn, "UPDATE workflow_waits SET resolved_at = NULL WHERE execution_id = %s", (eid,))
    # Reopened anyway (by the owner here): the sweep resolves the sleep and leaves the gate's
    # execution parked, the owner cannot wake it either, and the sweep's batch goes on.
    other = parked(db, "sleep", "-1 second")
    db.execute("UPDATE workflow_waits SET resolved_at = NULL WHERE execution_id = %s AND step_id = 'nap'", (eid,))
    with as_user(logins.worker_dsn) as conn:
        woken = [row[0] for row in conn.execute("SELECT kestrel.sweep_waits(100)")]
    assert woken == [other]
    assert status(db, eid) == "waiting"
    assert refused(db, "UPDATE workflow_executions SET status = 'enqueued' WHERE id = %s", (eid,))
    # once the gate times out, the sweep wakes it
    db.execute("UPDATE workflow_waits SET wake_at = now() - interval '1 s' WHERE execution_id = %s", (eid,))
    assert [row[0] for row in db.execute("SELECT kestrel.sweep_waits(100)")] == [eid]


# -- 2. and 3. an execution's identity --------------------------------------------------------


def test_an_execution_id_never_changes_not_even_for_the_owner(logins: Logins, db: psycopg.Connection) -> None:
    eid = parked(db, "approval", "1 hour")
    with as_user(logins.worker_dsn) as conn:
        assert refused(conn, "UPDATE workflow_executions SET id = DEFAULT WHERE id = %s", (eid,))
    assert refused(db, "UPDATE workflow_executions SET id = DEFAULT WHERE id = %s", (eid,))
    with pytest.raises(psycopg.errors.GeneratedAlways):  # the identity column refuses any other value
        db.execute("UPDATE workflow_executions SET id = id + 1000000 WHERE id = %s", (eid,))
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (1,)


@pytest.mark.parametrize("start", ["waiting", "enqueued", "running"])
def test_a_worker_login_cannot_rewrite_what_an_execution_is(logins: Logins, db: psycopg.Connection, start: str) -> None:
    eid = parked(db, "approval", "1 hour")
    if start != "waiting":  # the owner moves it (resolving its gate first)
        db.execute("UPDATE workflow_waits SET resolved_at = now() WHERE execution_id = %s", (eid,))
        db.execute("UPDATE workflow_executions SET status = %s, version = 'v1' WHERE id = %s", (start, eid))
    before = db.execute("SELECT * FROM workflow_executions WHERE id = %s", (eid,)).fetchone()
    edits = [
        "input = '{\"amount\": 1000000}'",
        "workflow_name = 'drop_everything'",
        "queue = 'other'",
        "priority = 100",
        "parent_id = 1",
        "idempotency_key = 'k'",
        "engine_key = 'k'",
        "created_at = now() - interval '1 year'",
        "trace_context = 'x'",
    ]
    if start != "waiting":
        edits.append("version = 'v2'")
    else:  # a waiting execution changes only by its wake-up (the owner's code)
        edits += ["output = '{\"forged\": 1}'", "owner_id = 'w9'", "claim_epoch = claim_epoch + 1", "version = 'v2'"]
    with as_user(logins.worker_dsn) as conn:
        for edit in edits:
            assert refused(conn, f"UPDATE workflow_executions SET {edit} WHERE id = %s", (eid,)), edit
    assert db.execute("SELECT * FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == before


# -- 4. prune's partition drops ---------------------------------------------------------------


def test_drop_history_range_refuses_a_cutoff_in_the_future(logins: Logins, db: psycopg.Connection) -> None:
    lo = db.execute("SELECT min(lo) FROM history_partitions").fetchone()[0]
    for who in (logins.worker_dsn, logins.operator_dsn):
        with as_user(who) as conn:
            with pytest.raises(psycopg.DatabaseError, match="cutoff .* is in the future"):
                conn.execute("SELECT kestrel.drop_history_range(%s, now() + interval '1000 years', 'x')", (lo,))
    with pytest.raises(psycopg.DatabaseError, match="in the future"):
        db.execute("SELECT kestrel.drop_history_range(%s, clock_timestamp() + interval '1 minute', 'x')", (lo,))


# -- 5. a schedule's next tick ----------------------------------------------------------------


def test_a_worker_login_moves_a_next_tick_only_as_the_scheduler_does(logins: Logins, db: psycopg.Connection) -> None:
    db.execute(
        "INSERT INTO schedules (name, cron, workflow_name, next_tick, source)"
        " VALUES ('soon', '* * * * *', 'w', now() + interval '30 s', 'code'),"
        "        ('due', '* * * * *', 'w', now() - interval '1 s', 'code')"
    )
    audits = "SELECT count(*) FROM declarations WHERE name = %s AND declared ? 'next_tick'"
    with as_user(logins.worker_dsn) as conn:
        # not due: a move far ahead is a pause that shows as active
        assert refused(conn, "UPDATE schedules SET next_tick = now() + interval '100 years' WHERE name = 'soon'")
        assert refused(conn, "UPDATE schedules SET next_tick = now() - interval '1 hour' WHERE name = 'soon'")
        # due: the scheduler's advance passes; one to more than a day ahead is audited
        conn.execute("UPDATE schedules SET next_tick = next_tick + interval '1 minute' WHERE name = 'due'")
        assert db.execute(audits, ("due",)).fetchone() == (0,)
        db.execute("UPDATE schedules SET next_tick = now() - interval '1 s' WHERE name = 'due'")
        conn.execute("UPDATE schedules SET next_tick = now() + interval '100 years' WHERE name = 'due'")
    rows = db.execute(
        "SELECT db_user, was ? 'next_tick' FROM declarations WHERE name = 'due' AND declared ? 'next_tick'"
    )
    assert rows.fetchall() == [(logins.worker_user, True)]
    assert db.execute("SELECT next_tick > now() + interval '1 day' FROM schedules WHERE name = 'soon'").fetchone() == (
        False,
    )
