"""Least privilege for schedules: the operator role pauses, resumes and removes them only
through the audited functions, and cannot add one (a schedule enqueues, which the operator role
may not); the worker role declares and ticks them, adds one through the audited function, and
cannot pause, resume or remove."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from kestrel_core import ActionRefused, Kestrel
from kestrel_core.admin import schedules
from kestrel_core.engine import scheduler
from tests.cli.script import console, one_clear_line
from tests.core.test_roles import Logins, as_user, logins, refused  # noqa: F401 (fixture)


def test_operator_changes_schedules_only_through_the_functions(dsn: str, logins: Logins) -> None:
    with Kestrel(logins.operator_dsn) as app:
        with pytest.raises(ActionRefused, match="cannot add a schedule: .*needs the worker role"):
            app.add_schedule("hourly", "0 * * * *", "report", by="alice")
    with Kestrel(logins.worker_dsn) as app:  # the role that may enqueue
        app.add_schedule("hourly", "0 * * * *", "report", by="alice")
    with Kestrel(logins.operator_dsn) as app:
        app.pause_schedule("hourly", by="alice")
        app.resume_schedule("hourly", by="alice")
    with as_user(logins.operator_dsn) as conn:
        assert refused(conn, "UPDATE schedules SET paused = true")
        assert refused(conn, "DELETE FROM schedules")
        assert refused(
            conn,
            "INSERT INTO schedules (name, cron, workflow_name, next_tick, source)"
            " VALUES ('x', '* * * * *', 'w', now(), 'cli')",
        )
        assert conn.execute("SELECT action FROM operator_actions ORDER BY id").fetchall() == [
            ("add_schedule",),
            ("pause_schedule",),
            ("resume_schedule",),
        ]
    with Kestrel(logins.operator_dsn) as app:
        # Running it once now enqueues through the audited function: the operator may, though it
        # may not enqueue by itself.
        triggered = app.trigger_schedule("hourly", by="alice")
        assert app.get(triggered).workflow_name == "report"
        assert app.remove_schedule("hourly", by="alice") == "cli"


def test_worker_declares_and_ticks_but_cannot_act_as_operator(dsn: str, logins: Logins) -> None:
    t0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    with as_user(logins.worker_dsn) as conn:
        schedules.declare(conn, "kestrel", [schedules.Schedule("s", "* * * * * */10", "report")], by="w1")
        with psycopg.connect(dsn, autocommit=True) as admin:  # the worker moves a tick only as the scheduler does
            admin.execute("UPDATE kestrel.schedules SET next_tick = %s", (t0,))
        done = scheduler.tick_due(conn, "kestrel", t0 + timedelta(seconds=5))
        assert [(n, t) for n, t, _ in done.enqueued] == [("s", t0)]
        assert refused(conn, "SELECT set_schedule_paused('s', true, NULL, 'w1', NULL)")
        assert refused(conn, "SELECT remove_schedule('s', 'w1', NULL)")
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert admin.execute("SELECT source, last_tick FROM kestrel.schedules").fetchone() == ("code", t0)


def test_an_operator_login_may_neither_enqueue_nor_add_a_schedule_and_is_told_which_role_may(
    dsn: str,
    logins: Logins,
) -> None:
    """Issue 18: add_schedule let an operator, who cannot enqueue, run any workflow with any
    input; and enqueue said only 'permission denied for table queues'."""
    for args in (["enqueue", "report"], ["schedule", "add", "hourly", "0 * * * *", "report"]):
        done = console(*args, dsn=logins.operator_dsn)
        one_clear_line(done, 1, "needs the worker role", "does not enqueue")
        assert done.stderr.count("\n") == 1, done.stderr
    with as_user(logins.operator_dsn) as conn:
        assert refused(
            conn,
            "SELECT add_schedule('s', '* * * * *', 'UTC', 'anything', '{\"any\": 1}', false, now(), 'mallory', NULL)",
        )
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert admin.execute(
            "SELECT (SELECT count(*) FROM kestrel.workflow_executions), (SELECT count(*) FROM kestrel.schedules)"
        ).fetchone() == (0, 0)


@pytest.mark.parametrize(
    "cron, tz, needle",
    [
        ("every day", "UTC", "invalid cron expression"),
        ("* * *", "UTC", "invalid cron expression"),
        ("* * * * *", "Mars/Olympus", "unknown timezone"),
        ("* * * * *", "", "unknown timezone"),
    ],
)
def test_add_schedule_called_directly_refuses_a_broken_cron_or_timezone(
    dsn: str,
    logins: Logins,
    cron: str,
    tz: str,
    needle: str,
) -> None:
    """Issue 18: called directly (not through schedules.add, which checks with croniter), it
    stored them, and every worker then logged an error every second."""
    for caller in (dsn, logins.worker_dsn):  # the schema's owner, and the role that may call it
        with as_user(caller) as conn, pytest.raises(psycopg.Error, match=needle):
            conn.execute(
                "SELECT kestrel.add_schedule('s', %s, %s, 'report', NULL, false, now(), 'w1', NULL)", (cron, tz)
            )
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM kestrel.schedules").fetchone() == (0,)
        assert admin.execute("SELECT count(*) FROM kestrel.operator_actions").fetchone() == (0,)
