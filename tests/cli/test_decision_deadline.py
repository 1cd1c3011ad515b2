"""A gate's deadline holds in the decision itself (issue 18, finding 3).

With no sweeper running, an approval 4 s past the gate's timeout used to go through with
``approved: true, timed_out: false``; and ``decide_approval`` with a NULL decision recorded a
rejection but handed the workflow ``approved: null``. Both are refused now, nothing changed.
"""

from __future__ import annotations

import psycopg
import pytest

from kestrel_core import ActionRefused, Kestrel
from tests.cli.script import console
from tests.core.test_roles import Logins, as_user, logins  # noqa: F401 (fixture)

STATE = """
SELECT e.status, w.decision, w.resolved_at IS NULL,
       (SELECT count(*) FROM operation_outputs o WHERE o.execution_id = e.id),
       (SELECT count(*) FROM operator_actions)
  FROM workflow_executions e JOIN workflow_waits w ON w.execution_id = e.id WHERE e.id = %s
"""


def gate(db: psycopg.Connection, deadline: str | None) -> int:
    """A waiting execution parked on gate 'ship' whose deadline is ``deadline`` from now."""
    eid = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status) VALUES ('w', 'waiting') RETURNING id"
    ).fetchone()[0]
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, wake_at, created_at)"
        " VALUES (%s, 'ship', 'approval', now() + %s::interval, now() - interval '1 minute')",
        (eid, deadline),
    )
    return eid


@pytest.mark.parametrize("verb", ["approve", "reject"])
def test_a_gate_past_its_deadline_cannot_be_decided_though_no_sweeper_ran(
    dsn: str,
    db: psycopg.Connection,
    verb: str,
) -> None:
    eid = gate(db, "-4 seconds")
    before = db.execute(STATE, (eid,)).fetchone()
    result = console("--operator", "alice", verb, str(eid), "ship", dsn=dsn)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f'error: cannot {verb}: approval "ship" of execution {eid} timed out at '
    )
    assert db.execute(STATE, (eid,)).fetchone() == before == ("waiting", None, True, 0, 0)
    with Kestrel(dsn) as app, pytest.raises(ActionRefused, match="timed out"):
        app.approve(eid, "ship", by="alice")


def test_a_gate_before_its_deadline_is_decided(dsn: str, db: psycopg.Connection) -> None:
    eid = gate(db, "1 hour")
    result = console("--operator", "alice", "approve", str(eid), "ship", dsn=dsn)
    assert result.returncode == 0, result.stdout + result.stderr
    assert db.execute(STATE, (eid,)).fetchone() == ("enqueued", "approved", False, 1, 1)


def test_a_null_decision_is_refused(logins: Logins, dsn: str, db: psycopg.Connection) -> None:
    eid = gate(db, None)
    with as_user(logins.operator_dsn) as conn:
        with pytest.raises(psycopg.Error, match="must be true .approve. or false .reject., not NULL"):
            conn.execute("SELECT decide_approval(%s, 'ship', NULL, 'mallory', NULL)", (eid,))
    assert db.execute(STATE, (eid,)).fetchone() == ("waiting", None, True, 0, 0)
