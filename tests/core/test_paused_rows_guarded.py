"""A paused execution stays as its pause left it (issue 44, review round two): a worker login
changes only its lease (the claim it was paused under renews it while its step in flight runs,
and clears it when it lets go); its deadline, run time, owner, claim and input are the operator
functions' to change. Before migration 0037 a plain UPDATE that left it paused changed any."""

from __future__ import annotations

import psycopg
import pytest

from kestrel_core import Kestrel
from tests.core.test_roles import Logins, as_user, logins, refused  # noqa: F401 (fixture)

CHANGES = [
    ("deadline_at", "now() + interval '999 days'"),
    ("run_at", "now() + interval '999 days'"),
    ("owner_id", "'worker-x'"),
    ("claim_epoch", "claim_epoch + 1"),
    ("input", "'{\"forged\": true}'::jsonb"),
    ("priority", "priority + 1"),
]


def _paused(app: Kestrel, db: psycopg.Connection) -> int:
    eid = app.enqueue("w")
    db.execute(
        "UPDATE workflow_executions SET status = 'running', owner_id = 'w1', claim_epoch = 1, "
        "lease_expires = now() + interval '30 seconds' WHERE id = %s",
        (eid,),
    )
    assert app.pause(eid, by="alice") == "running"
    return eid


@pytest.mark.parametrize(("column", "value"), CHANGES)
def test_a_worker_login_cannot_change_a_paused_execution(
    app: Kestrel, logins: Logins, db: psycopg.Connection, column: str, value: str
) -> None:
    eid = _paused(app, db)
    before = db.execute("SELECT to_jsonb(e) FROM workflow_executions e WHERE id = %s", (eid,)).fetchone()
    with as_user(logins.worker_dsn) as conn:
        assert refused(conn, f"UPDATE workflow_executions SET {column} = {value} WHERE id = %s", (eid,)), column
    assert db.execute("SELECT to_jsonb(e) FROM workflow_executions e WHERE id = %s", (eid,)).fetchone() == before


def test_the_claim_it_was_paused_under_still_renews_and_clears_its_lease(
    app: Kestrel, logins: Logins, db: psycopg.Connection
) -> None:
    eid = _paused(app, db)
    with as_user(logins.worker_dsn) as conn:
        conn.execute(
            "UPDATE workflow_executions SET lease_expires = now() + interval '60 seconds' WHERE id = %s", (eid,)
        )
        conn.execute("UPDATE workflow_executions SET lease_expires = NULL WHERE id = %s", (eid,))
    assert db.execute("SELECT status, lease_expires FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (
        "paused",
        None,
    )
