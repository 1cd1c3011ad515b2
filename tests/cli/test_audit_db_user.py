"""The audit records the database role that acted beside the name the operator gave (issue 9).

The name (--operator, $KESTREL_OPERATOR, by=...) is a claim anyone can make; the role is
session_user, what Postgres authenticated. Here a login role granted kestrel_operator claims to
be "alice": the audit, `show` and the operator-actions report show both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from kestrel_core import Kestrel
from tests.cli.script import console
from tests.conftest import login_in_role
from tests.seed import waiting_on_gate


@pytest.fixture
def ops_login(dsn: str, db: psycopg.Connection) -> Iterator[tuple[str, str]]:
    """(role name, DSN) of a fresh login role holding only kestrel_operator."""
    with login_in_role(dsn, "ops", "kestrel_operator") as ops_dsn:
        yield conninfo_to_dict(ops_dsn)["user"], ops_dsn


def test_approve_records_the_login_role_beside_the_claimed_name(db: psycopg.Connection, ops_login) -> None:
    role, ops_dsn = ops_login
    eid = waiting_on_gate(db)
    done = console("approve", str(eid), "approve-fix", "--operator", "alice", "--comment", "lgtm", dsn=ops_dsn)
    assert done.returncode == 0, done.stderr
    assert db.execute("SELECT decided_by, decided_by_db_user FROM workflow_waits").fetchall() == [("alice", role)]
    assert db.execute("SELECT actor, db_user, action FROM operator_actions").fetchall() == [("alice", role, "approve")]

    shown = console("show", str(eid), "--format", "json", dsn=ops_dsn)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)[0]
    gate = next(e for e in doc["timeline"] if e["step_id"] == "approve-fix")
    assert (gate["decided_by"], gate["decided_by_db_user"]) == ("alice", role)
    assert [(a["actor"], a["db_user"], a["action"]) for a in doc["actions"]] == [("alice", role, "approve")]

    table = console("show", str(eid), dsn=ops_dsn)
    assert table.returncode == 0, table.stderr
    assert f"approved by alice (db role {role})" in table.stdout
    assert "Operator actions" in table.stdout and role in table.stdout.split("Operator actions")[1]


def test_cancel_requeue_and_prune_record_the_login_role(dsn: str, db: psycopg.Connection, ops_login) -> None:
    role, ops_dsn = ops_login
    eid = waiting_on_gate(db)
    with Kestrel(ops_dsn) as ops:
        ops.cancel(eid, by="mallory-claims-to-be-bob")
        ops.requeue(eid, by="bob")
    db.execute(
        "UPDATE workflow_executions SET status = 'success', finished_at = now() - interval '40 days' WHERE id = %s",
        (eid,),
    )
    pruned = console("prune", "--older-than", "30d", "--operator", "carol", dsn=ops_dsn)
    assert pruned.returncode == 0, pruned.stderr
    assert db.execute("SELECT action, actor, db_user FROM operator_actions ORDER BY id").fetchall() == [
        ("cancel", "mallory-claims-to-be-bob", role),
        ("requeue", "bob", role),
        ("prune", "carol", role),
    ]

    report = console("report", "operator-actions", "--format", "json", dsn=ops_dsn)
    assert report.returncode == 0, report.stderr
    rows = json.loads(report.stdout)
    assert {(r["action"], r["actor"], r["db_user"]) for r in rows} == {
        ("cancel", "mallory-claims-to-be-bob", role),
        ("requeue", "bob", role),
        ("prune", "carol", role),
    }


def test_the_caller_cannot_choose_the_recorded_role(db: psycopg.Connection, ops_login) -> None:
    """Whatever the name passed, the role column is the session's login, not a parameter."""
    role, ops_dsn = ops_login
    eid = waiting_on_gate(db)
    with psycopg.connect(ops_dsn, autocommit=True) as conn:
        conn.execute("SELECT kestrel.decide_approval(%s, 'approve-fix', false, 'postgres', NULL)", (eid,))
    assert db.execute("SELECT decided_by, decided_by_db_user FROM workflow_waits").fetchall() == [("postgres", role)]
    assert db.execute("SELECT actor, db_user FROM operator_actions").fetchall() == [("postgres", role)]


def test_a_decision_written_outside_decide_approval_is_shown_as_unaudited(
    db: psycopg.Connection,
    ops_login,
) -> None:
    """Issue 18: a decision no operator action records (here written by hand, as the schema's
    owner; a worker login may no longer write one) is marked, whatever names it carries."""
    role, ops_dsn = ops_login
    forged, audited = waiting_on_gate(db), waiting_on_gate(db)
    db.execute(
        "UPDATE workflow_waits SET decision = 'approved', decided_by = 'alice', decided_by_db_user = %s,"
        " decided_at = now(), resolved_at = now() WHERE execution_id = %s",
        (role, forged),
    )
    with Kestrel(ops_dsn) as ops:
        ops.approve(audited, "approve-fix", by="alice")

    table = console("show", str(forged), dsn=ops_dsn)
    assert table.returncode == 0, table.stderr
    assert "UNAUDITED: no operator action records this decision" in table.stdout
    shown = console("show", str(forged), "--format", "json", dsn=ops_dsn)
    gate = next(e for e in json.loads(shown.stdout)[0]["timeline"] if e["step_id"] == "approve-fix")
    assert (gate["decision"], gate["audited"]) == ("approved", False)

    fine = console("show", str(audited), dsn=ops_dsn)
    assert fine.returncode == 0 and f"approved by alice (db role {role})" in fine.stdout
    assert "UNAUDITED" not in fine.stdout


def test_an_audited_decision_edited_afterwards_is_shown_as_unaudited(
    db: psycopg.Connection,
    ops_login,
) -> None:
    """Issue 44, finding 8: bob's audited rejection, edited by the schema's owner into alice's
    approval (the trigger that keeps decisions final switched off for it), is no longer backed
    by its audit row: the audit row must match the decision, its actor and its role."""
    role, ops_dsn = ops_login
    eid = waiting_on_gate(db)
    with Kestrel(ops_dsn) as ops:
        ops.reject(eid, "approve-fix", by="bob", comment="too risky")
    with db.transaction():
        db.execute("SET LOCAL session_replication_role = replica")  # the owner's own way around guard_waits
        db.execute(
            "UPDATE workflow_waits SET decision = 'approved', decided_by = 'alice' WHERE execution_id = %s", (eid,)
        )
    assert db.execute("SELECT actor, action FROM operator_actions").fetchall() == [("bob", "reject")]

    table = console("show", str(eid), dsn=ops_dsn)
    assert table.returncode == 0, table.stderr
    assert "UNAUDITED: no operator action records this decision" in table.stdout
    shown = console("show", str(eid), "--format", "json", dsn=ops_dsn)
    gate = next(e for e in json.loads(shown.stdout)[0]["timeline"] if e["step_id"] == "approve-fix")
    assert (gate["decision"], gate["decided_by"], gate["audited"]) == ("approved", "alice", False)
    # each part must match: the verb, the actor, the role
    for edit in (
        "decision = 'rejected', decided_by = 'bob', decided_by_db_user = 'someone_else'",
        "decision = 'rejected', decided_by = 'alice', decided_by_db_user = %(role)s",
        "decision = 'approved', decided_by = 'bob', decided_by_db_user = %(role)s",
    ):
        with db.transaction():
            db.execute("SET LOCAL session_replication_role = replica")
            db.execute(f"UPDATE workflow_waits SET {edit} WHERE execution_id = %(eid)s", {"role": role, "eid": eid})
        assert db.execute("SELECT audited FROM approval_audits WHERE execution_id = %s", (eid,)).fetchone() == (False,)
    with db.transaction():
        db.execute("SET LOCAL session_replication_role = replica")
        db.execute(
            "UPDATE workflow_waits SET decision = 'rejected', decided_by = 'bob', decided_by_db_user = %s"
            " WHERE execution_id = %s",
            (role, eid),
        )
    fine = console("show", str(eid), dsn=ops_dsn)
    assert fine.returncode == 0 and "UNAUDITED" not in fine.stdout


def test_a_decision_whose_comment_was_edited_is_shown_as_unaudited(db: psycopg.Connection, ops_login) -> None:
    """Issue 44, second review: the audit keeps what the approver wrote (docs/guarantees.md);
    a comment edited afterwards, in the gate or in its audit row, is no longer backed by it."""
    role, ops_dsn = ops_login
    eid = waiting_on_gate(db)
    with Kestrel(ops_dsn) as ops:
        ops.approve(eid, "approve-fix", by="alice", comment="checked the diff")
    audited = "SELECT audited FROM approval_audits WHERE execution_id = %s"
    assert db.execute(audited, (eid,)).fetchone() == (True,)
    db.execute("UPDATE operator_actions SET comment = 'ship it, no review needed' WHERE execution_id = %s", (eid,))
    assert db.execute(audited, (eid,)).fetchone() == (False,)
    assert "UNAUDITED" in console("show", str(eid), dsn=ops_dsn).stdout
    db.execute("UPDATE operator_actions SET comment = 'checked the diff' WHERE execution_id = %s", (eid,))
    with db.transaction():
        db.execute("SET LOCAL session_replication_role = replica")  # the owner's own way around guard_waits
        db.execute("UPDATE workflow_waits SET comment = NULL WHERE execution_id = %s", (eid,))
    assert db.execute(audited, (eid,)).fetchone() == (False,)
