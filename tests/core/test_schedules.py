"""Cron schedules: declaration, operator actions (audited), and the tick policy (skip or catch
up after an outage), with real Postgres and in-process workers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from kestrel_core import ActionRefused, Kestrel, NotFound
from kestrel_core.engine import scheduler
from tests.waiting import wait_for

UTC = UTC
T0 = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)  # on every 10-second tick


def scheduled_runs(db: psycopg.Connection, name: str) -> list[str]:
    """The scheduled_at of every execution the schedule enqueued, in tick order."""
    return [
        r[0]
        for r in db.execute(
            "SELECT input->>'scheduled_at' FROM workflow_executions WHERE input->>'schedule' = %s"
            " ORDER BY input->>'scheduled_at'",
            (name,),
        )
    ]


def at(seconds: int) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def put_schedule(
    db: psycopg.Connection, name: str, cron: str, next_tick: datetime, *, catch_up: bool = False, paused: bool = False
) -> None:
    db.execute(
        "INSERT INTO schedules (name, cron, workflow_name, catch_up, paused, next_tick, source)"
        " VALUES (%s, %s, 'report', %s, %s, %s, 'cli')",
        (name, cron, catch_up, paused, next_tick),
    )


# -- declaring in code -------------------------------------------------------------------------


def test_decorator_registers_the_workflow_and_validates(dsn: str) -> None:
    app = Kestrel(dsn)

    @app.schedule("*/5 * * * *", timezone="Europe/Paris")
    @app.workflow("nightly-report")
    def nightly(ctx, input):
        return input

    @app.schedule("0 9 * * 1-5", name="weekday-digest", input={"team": "ops"})
    def digest(ctx, input):
        return input

    assert set(app.workflows) == {"nightly-report", "digest"}
    assert app.schedules["nightly-report"].workflow == "nightly-report"
    assert app.schedules["nightly-report"].timezone == "Europe/Paris"
    assert app.schedules["weekday-digest"].workflow == "digest"
    with pytest.raises(ValueError, match="invalid cron expression '61 \\* \\* \\* \\*'"):
        app.schedule("61 * * * *", name="w")(lambda ctx, i: None)
    with pytest.raises(ValueError, match="cron expression '0 0 30 2 \\*' never fires"):
        app.schedule("0 0 30 2 *", name="v")(lambda ctx, i: None)
    with pytest.raises(ValueError, match="never fires"):
        app.add_schedule("feb-31", "0 0 31 2 *", "nightly-report", by="alice")
    with pytest.raises(ValueError, match="unknown timezone 'Mars/Olympus'"):
        app.schedule("* * * * *", name="x", timezone="Mars/Olympus")(lambda ctx, i: None)
    with pytest.raises(ValueError, match="may not use the key\\(s\\) scheduled_at"):
        app.schedule("* * * * *", name="y", input={"scheduled_at": 1})(lambda ctx, i: None)
    with pytest.raises(ValueError, match="declared twice"):
        app.schedule("* * * * *")(nightly)
    assert set(app.schedules) == {"nightly-report", "weekday-digest"}  # nothing half-registered


def test_worker_declares_code_schedules_and_keeps_their_place(dsn: str, db, start_worker) -> None:
    app = Kestrel(dsn)

    @app.schedule("0 0 1 1 *", name="yearly")
    def yearly(ctx, input):
        return None

    @app.schedule("0 0 * * *", name="operator-owned")  # a name an operator already took
    def daily(ctx, input):
        return None

    put_schedule(db, "operator-owned", "* * * * *", T0)
    with app:
        start_worker(app).stop()
        row = db.execute(
            "SELECT cron, workflow_name, source, next_tick, paused FROM schedules WHERE name = 'yearly'"
        ).fetchone()
        assert row[:3] == ("0 0 1 1 *", "yearly", "code") and row[3].month == 1 and row[4] is False
        db.execute("UPDATE schedules SET paused = true, next_tick = %s WHERE name = 'yearly'", (T0,))
        start_worker(app, sweep_interval=60).stop()  # redeclared unchanged: place and pause kept
        assert db.execute("SELECT next_tick, paused FROM schedules WHERE name = 'yearly'").fetchone() == (T0, True)
    assert db.execute("SELECT cron, source FROM schedules WHERE name = 'operator-owned'").fetchone() == (
        "* * * * *",
        "cli",
    )


# -- operator actions ----------------------------------------------------------------------------


def test_add_pause_resume_remove_are_audited(app: Kestrel, db) -> None:
    first = app.add_schedule("hourly", "0 * * * *", "report", input={"k": 1}, by="alice")
    assert first.minute == 0 and first > datetime.now(UTC)
    with pytest.raises(ActionRefused, match="a schedule with that name exists"):
        app.add_schedule("hourly", "*/5 * * * *", "report", by="bob")
    with pytest.raises(ValueError, match="invalid cron expression"):
        app.add_schedule("bad", "every day", "report", by="bob")
    with pytest.raises(ValueError, match="unknown timezone"):
        app.add_schedule("bad", "* * * * *", "report", timezone="Nowhere/City", by="bob")
    with pytest.raises(ValueError, match="workflow name too long"):  # every tick would fail to enqueue it
        app.add_schedule("bad", "* * * * *", "w" * 201, by="bob")
    app.pause_schedule("hourly", by="carol", comment="maintenance")
    with pytest.raises(ActionRefused, match="already paused \\(by carol"):
        app.pause_schedule("hourly", by="carol")
    assert app.resume_schedule("hourly", by="dave") == first
    with pytest.raises(ActionRefused, match="already running"):
        app.resume_schedule("hourly", by="dave")
    assert app.remove_schedule("hourly", by="erin") == "cli"
    with pytest.raises(NotFound, match='no schedule named "hourly"'):
        app.remove_schedule("hourly", by="erin")
    assert db.execute(
        "SELECT actor, action, comment, details->>'schedule' FROM operator_actions ORDER BY id"
    ).fetchall() == [
        ("alice", "add_schedule", None, "hourly"),
        ("carol", "pause_schedule", "maintenance", "hourly"),
        ("dave", "resume_schedule", None, "hourly"),
        ("erin", "remove_schedule", None, "hourly"),
    ]
    assert db.execute("SELECT count(*) FROM schedules").fetchone() == (0,)


def test_trigger_runs_a_schedule_once_now_audited_and_leaves_its_ticks_alone(app: Kestrel, db) -> None:
    first = app.add_schedule("hourly", "0 * * * *", "report", input={"k": 1}, by="alice")
    # Placed as any enqueue: the queue that declares the workflow, with its priority.
    db.execute("INSERT INTO queues (name, priority, workflows, declared_at) VALUES ('reports', 5, '{report}', now())")
    app.pause_schedule("hourly", by="alice")
    before = datetime.now(UTC)
    eid = app.trigger_schedule("hourly", by="bob", comment="rerun after the fix")
    run = db.execute("SELECT workflow_name, input, queue, priority, status FROM workflow_executions").fetchall()
    assert len(run) == 1 and run[0][0] == "report" and run[0][2:] == ("reports", 5, "enqueued")
    given = run[0][1]
    assert {k: v for k, v in given.items() if k != "scheduled_at"} == {"k": 1, "schedule": "hourly"}
    assert before - timedelta(seconds=1) <= datetime.fromisoformat(given["scheduled_at"]) <= datetime.now(UTC)
    assert db.execute("SELECT paused, next_tick, last_tick, last_execution_id FROM schedules").fetchone() == (
        True, first, None, None,
    )  # fmt: skip
    assert db.execute(
        "SELECT actor, action, execution_id, comment, details FROM operator_actions WHERE action = 'trigger_schedule'"
    ).fetchall() == [
        ("bob", "trigger_schedule", eid, "rerun after the fix",
         {"schedule": "hourly", "workflow": "report", "paused": True}),
    ]  # fmt: skip
    with pytest.raises(NotFound, match='cannot trigger: no schedule named "nope"'):
        app.trigger_schedule("nope", by="bob")


# -- the tick policy ---------------------------------------------------------------------------


def test_each_tick_once_with_its_time_in_the_input(app: Kestrel, db) -> None:
    put_schedule(db, "s", "* * * * * */10", T0)
    with app.connection() as conn:
        done = scheduler.tick_due(conn, "kestrel", T0 + timedelta(seconds=5))
        again = scheduler.tick_due(conn, "kestrel", T0 + timedelta(seconds=9))
        later = scheduler.tick_due(conn, "kestrel", T0 + timedelta(seconds=10))
    assert [(n, t) for n, t, _ in done.enqueued] == [("s", T0)] and again.enqueued == []
    assert len(later.enqueued) == 1
    assert scheduled_runs(db, "s") == [at(0), at(10)]
    row = db.execute(
        "SELECT input, engine_key, workflow_name, status FROM workflow_executions ORDER BY id LIMIT 1"
    ).fetchone()
    assert row == ({"schedule": "s", "scheduled_at": at(0)}, f"schedule:s:{at(0)}", "report", "enqueued")
    assert db.execute("SELECT next_tick, last_tick, last_execution_id FROM schedules").fetchone() == (
        T0 + timedelta(seconds=20),
        T0 + timedelta(seconds=10),
        later.enqueued[0][2],
    )


def test_after_an_outage_skip_enqueues_the_latest_and_catch_up_every_missed_tick(app: Kestrel, db) -> None:
    put_schedule(db, "skip", "* * * * * */10", T0)
    put_schedule(db, "catch", "* * * * * */10", T0, catch_up=True)
    outage_over = T0 + timedelta(minutes=2, seconds=3)  # ticks 0, 10, ... 120 were missed
    with app.connection() as conn:
        done = scheduler.tick_due(conn, "kestrel", outage_over)
    assert scheduled_runs(db, "skip") == [at(120)]
    assert done.skipped == {"skip": 12}
    assert scheduled_runs(db, "catch") == [at(s) for s in range(0, 121, 10)]
    assert db.execute("SELECT name, next_tick FROM schedules ORDER BY name").fetchall() == [
        ("catch", T0 + timedelta(seconds=130)),
        ("skip", T0 + timedelta(seconds=130)),
    ]


def test_late_ticks_within_the_grace_are_not_skipped(app: Kestrel, db) -> None:
    put_schedule(db, "s", "* * * * * *", T0)  # every second, the worker 4 s behind
    with app.connection() as conn:
        scheduler.tick_due(conn, "kestrel", T0 + timedelta(seconds=4))
    assert scheduled_runs(db, "s") == [at(s) for s in range(5)]


def test_catch_up_is_bounded(app: Kestrel, db) -> None:
    put_schedule(db, "s", "* * * * * *", T0, catch_up=True)  # a day of one-second ticks missed
    end = T0 + timedelta(days=1)
    with app.connection() as conn:
        first = scheduler.tick_due(conn, "kestrel", end)
        for _ in range(12):
            scheduler.tick_due(conn, "kestrel", end)
    runs = scheduled_runs(db, "s")
    assert len(first.enqueued) == scheduler.CATCH_UP_BATCH
    assert len(runs) == scheduler.CATCH_UP_MAX  # the 1000 most recent ticks, no more
    assert runs[0] == (end - timedelta(seconds=scheduler.CATCH_UP_MAX - 1)).isoformat()
    assert runs[-1] == end.isoformat()


def test_paused_schedules_do_not_tick_and_resume_without_a_burst(app: Kestrel, db) -> None:
    app.add_schedule("s", "* * * * * *", "report", catch_up=True, by="alice")
    app.pause_schedule("s", by="alice")
    with app.connection() as conn:
        assert scheduler.tick_due(conn, "kestrel", datetime.now(UTC) + timedelta(minutes=5)).enqueued == []
        db.execute("UPDATE schedules SET next_tick = next_tick - interval '1 hour'")  # paused for an hour
        before = datetime.now(UTC)
        next_tick = app.resume_schedule("s", by="alice")
        assert next_tick > before
        done = scheduler.tick_due(conn, "kestrel")
    assert all(tick >= before - timedelta(seconds=1) for _, tick, _ in done.enqueued)
    assert len(done.enqueued) <= 2


def test_a_worker_enqueues_missed_ticks_by_policy_and_runs_them(app: Kestrel, db, start_worker) -> None:
    ran: list[str] = []

    @app.workflow("report")
    def report(ctx, input):
        ran.append(input["scheduled_at"])
        return input["scheduled_at"]

    now = db.execute("SELECT date_trunc('minute', now())").fetchone()[0]
    put_schedule(db, "skip", "* * * * * */10", now - timedelta(minutes=5))
    put_schedule(db, "catch", "* * * * * */10", now - timedelta(minutes=1), catch_up=True)
    start_worker(app)
    wait_for(
        lambda: len(scheduled_runs(db, "catch")) >= 7 and scheduled_runs(db, "skip"),
        what="the worker to enqueue the missed ticks",
    )
    catch = scheduled_runs(db, "catch")
    assert catch[:7] == [(now - timedelta(minutes=1) + timedelta(seconds=s)).isoformat() for s in range(0, 61, 10)]
    skip = scheduled_runs(db, "skip")
    assert skip[0] >= (now - timedelta(seconds=10)).isoformat()  # the 30 older missed ticks skipped
    wait_for(
        lambda: db.execute("SELECT count(*) = 0 FROM workflow_executions WHERE status <> 'success'").fetchone()[0],
        what="the scheduled runs to finish",
    )
    assert set(catch) <= set(ran)
