"""The shipped ``schedules`` report: state, next tick, last run and its status, and the runs
each schedule enqueued in the period, on real ticks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kestrel_console.reports import bind_params, find_report, run_report
from kestrel_core import Kestrel
from kestrel_core.engine import scheduler

T0 = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)


def run(db, **given: str) -> list[dict]:
    report = find_report("schedules", ())
    result = run_report(db, report, bind_params(report, given), schema="kestrel")
    names = [c if isinstance(c, str) else c.name for c in result.columns]
    return [dict(zip(names, row)) for row in result.rows]


def test_schedules_report(dsn: str, db) -> None:
    with Kestrel(dsn) as app:
        app.add_schedule("often", "* * * * * */10", "report", catch_up=True, by="alice")
        app.add_schedule("nightly", "0 2 * * *", "digest", by="alice")
        app.pause_schedule("nightly", by="bob")
        db.execute("UPDATE schedules SET next_tick = %s WHERE name = 'often'", (T0,))
        with app.connection() as conn:
            scheduler.tick_due(conn, "kestrel", T0 + timedelta(seconds=25))  # ticks 0, 10, 20
    db.execute(
        "UPDATE workflow_executions SET status = 'error' WHERE input->>'scheduled_at' = %s",
        ((T0 + timedelta(seconds=20)).isoformat(),),
    )
    rows = {r["name"]: r for r in run(db)}
    often, nightly = rows["often"], rows["nightly"]
    assert (often["state"], often["workflow"], often["runs"], often["errors"]) == ("active", "report", 3, 1)
    assert often["next_tick"] == T0 + timedelta(seconds=30)
    assert often["last_tick"] == T0 + timedelta(seconds=20) and often["last_status"] == "error"
    assert (nightly["state"], nightly["next_tick"], nightly["last_tick"], nightly["runs"]) == (
        "paused by bob",
        None,
        None,
        0,
    )
    db.execute("UPDATE workflow_executions SET created_at = now() - interval '2 days'")
    assert run(db, since="1 day")[1]["runs"] == 0
