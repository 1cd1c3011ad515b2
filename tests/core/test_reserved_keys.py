"""The engine's idempotency keys are in a namespace users cannot write (issue 18, finding 5).

A pre-enqueued ``schedule:NAME:<tick>`` key used to swallow that tick (and ``schedule list``
showed the foreign execution as its last run); a pre-enqueued ``child:ID:...`` key made the
parent fail its child as missing. Now the API refuses those prefixes, the database refuses
them in ``idempotency_key`` too, and the engine keys its own rows in ``engine_key``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from kestrel_core import InvalidArgument, Kestrel
from kestrel_core.dispatch.keys import tick_key
from kestrel_core.engine import scheduler
from tests.cli.script import console, one_clear_line
from tests.core.test_roles import Logins, as_user, logins  # noqa: F401 (fixture)

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("key, prefix", [(tick_key("nightly", T0), "schedule:"), ("child:1:child:double", "child:")])
def test_a_reserved_key_is_refused_by_the_api_the_cli_and_the_database(
    logins: Logins,
    app: Kestrel,
    db: psycopg.Connection,
    key: str,
    prefix: str,
) -> None:
    with pytest.raises(InvalidArgument, match=f"starts with '{prefix}', a prefix reserved for the engine"):
        app.enqueue("report", idempotency_key=key)
    one_clear_line(console("enqueue", "report", "--idempotency-key", key, dsn=app.dsn), 2, prefix, "reserved")
    with as_user(logins.worker_dsn) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO workflow_executions (workflow_name, idempotency_key) VALUES ('report', %s)", (key,))
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (0,)


def test_a_user_key_cannot_take_the_place_of_a_tick(app: Kestrel, db: psycopg.Connection) -> None:
    db.execute(
        "INSERT INTO schedules (name, cron, workflow_name, next_tick, source)"
        " VALUES ('nightly', '0 0 * * *', 'report', %s, 'code')",
        (T0,),
    )
    user = app.enqueue("report", {"mine": True}, idempotency_key=f"nightly:{T0.isoformat()}")
    with app.connection() as conn:
        done = scheduler.tick_due(conn, "kestrel", T0 + timedelta(seconds=1))
    [(_, _, tick_execution)] = done.enqueued
    assert tick_execution != user
    assert db.execute(
        "SELECT input ->> 'schedule', engine_key FROM workflow_executions WHERE id = %s", (tick_execution,)
    ).fetchone() == ("nightly", tick_key("nightly", T0))
    assert db.execute("SELECT last_execution_id FROM schedules").fetchone() == (tick_execution,)
