"""Least privilege for schedules: the operator role changes them only through the audited
functions; the worker role declares and ticks them but cannot call the operator functions."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import psycopg

from kestrel_core import Kestrel, scheduler, schedules
from tests.core.test_roles import Logins, as_user, logins, refused  # noqa: F401 (fixture)


def test_operator_changes_schedules_only_through_the_functions(dsn: str, logins: Logins) -> None:
    with Kestrel(logins.operator_dsn) as app:
        app.add_schedule("hourly", "0 * * * *", "report", by="alice")
        app.pause_schedule("hourly", by="alice")
        app.resume_schedule("hourly", by="alice")
    with as_user(logins.operator_dsn) as conn:
        assert refused(conn, "UPDATE schedules SET paused = true")
        assert refused(conn, "DELETE FROM schedules")
        assert refused(conn, "INSERT INTO schedules (name, cron, workflow_name, next_tick, source)"
                             " VALUES ('x', '* * * * *', 'w', now(), 'cli')")
        assert conn.execute("SELECT action FROM operator_actions ORDER BY id").fetchall() == [
            ("add_schedule",), ("pause_schedule",), ("resume_schedule",)]
    with Kestrel(logins.operator_dsn) as app:
        assert app.remove_schedule("hourly", by="alice") == "cli"


def test_worker_declares_and_ticks_but_cannot_act_as_operator(dsn: str, logins: Logins) -> None:
    t0 = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
    with as_user(logins.worker_dsn) as conn:
        schedules.declare(conn, "kestrel", [schedules.Schedule("s", "* * * * * */10", "report")], by="w1")
        conn.execute("UPDATE schedules SET next_tick = %s", (t0,))
        done = scheduler.tick_due(conn, "kestrel", t0 + timedelta(seconds=5))
        assert [(n, t) for n, t, _ in done.enqueued] == [("s", t0)]
        assert refused(conn, "SELECT set_schedule_paused('s', true, NULL, 'w1', NULL)")
        assert refused(conn, "SELECT remove_schedule('s', 'w1', NULL)")
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert admin.execute("SELECT source, last_tick FROM kestrel.schedules").fetchone() == ("code", t0)
