"""A worker login inserts an execution only as the engine does: enqueued, unclaimed,
unstarted. The UPDATE guards (paused, waiting, finished) fire on UPDATE only: before migration
0036 a worker login inserted executions already 'paused', 'waiting', 'running' or 'success'."""

from __future__ import annotations

import psycopg
import pytest

from tests.core.test_roles import Logins, as_user, logins, refused  # noqa: F401 (fixture)

INSERT = "INSERT INTO workflow_executions (workflow_name, {column}) VALUES ('w', %s)"
MADE_UP = [
    ("status", "paused"),
    ("status", "waiting"),
    ("status", "running"),
    ("status", "success"),
    ("owner_id", "worker-x"),
    ("lease_expires", "2999-01-01"),
    ("started_at", "2020-01-01"),
    ("output", '{"forged": true}'),
    ("deadline_at", "2999-01-01"),
]


@pytest.mark.parametrize(("column", "value"), MADE_UP)
def test_a_worker_login_cannot_insert_an_execution_past_enqueued(
    logins: Logins,
    db: psycopg.Connection,
    column: str,
    value: str,
) -> None:
    with as_user(logins.worker_dsn) as conn:
        assert refused(conn, INSERT.format(column=column), (value,)), (column, value)
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (0,)


def test_a_worker_login_still_enqueues(logins: Logins, db: psycopg.Connection) -> None:
    with as_user(logins.worker_dsn) as conn:
        conn.execute("INSERT INTO workflow_executions (workflow_name, input, priority) VALUES ('w', '{}', 3)")
    assert db.execute("SELECT status FROM workflow_executions").fetchall() == [("enqueued",)]
