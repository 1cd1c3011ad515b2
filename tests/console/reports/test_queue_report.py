"""The shipped ``queues`` report: limits, pause state, depth, running and the claims in the
current rate window of each queue, on real claims."""

from __future__ import annotations

from datetime import timedelta

from kestrel_console.reports import bind_params, find_report, run_report
from kestrel_core import Kestrel
from kestrel_core.dispatch.claim import claim
from kestrel_core.dispatch.queues import declare


def run(db) -> dict[str, dict]:
    report = find_report("queues", ())
    result = run_report(db, report, bind_params(report, {}), schema="kestrel")
    names = [c if isinstance(c, str) else c.name for c in result.columns]
    return {row[0]: dict(zip(names, row)) for row in result.rows}


def test_queues_report(dsn: str, db) -> None:
    with Kestrel(dsn) as app:
        app.queue("emails", concurrency=3, per_worker=2, rate=(5, timedelta(minutes=1)), priority=4)
        app.queue("exports")

        @app.workflow("send", queue="emails")
        def send(ctx, input):
            return input

        @app.workflow("export", queue="exports")
        def export(ctx, input):
            return input

        with app.connection() as conn:
            declare(conn, app.schema, list(app.queues.values()), {"emails": ["send"], "exports": ["export"]})
        app.enqueue_many("send", [1, 2, 3, 4])
        app.enqueue("export", 1)
        with app.connection() as conn:  # one worker's claim: per_worker=2 lets it take 2 of 4
            taken = claim(
                conn,
                app.schema,
                worker_id="w1",
                names=["send"],
                n=4,
                lease=timedelta(seconds=30),
                versions=[app.workflows["send"].version],
                queues=["emails"],
            )
        app.pause_queue("exports", by="bob")
    assert len(taken) == 2
    rows = run(db)
    emails, exports = rows["emails"], rows["exports"]
    assert (emails["paused"], emails["enqueued"], emails["running"], emails["started_in_window"]) == (False, 2, 2, 2)
    assert (
        emails["concurrency"],
        emails["per_worker"],
        emails["rate_limit"],
        emails["rate_period"],
        emails["priority"],
        emails["workflows"],
    ) == (3, 2, 5, timedelta(minutes=1), 4, ["send"])
    assert (
        exports["paused"],
        exports["paused_by"],
        exports["enqueued"],
        exports["running"],
        exports["concurrency"],
        exports["started_in_window"],
    ) == (True, "bob", 1, 0, None, 0)
    assert list(rows) == ["emails", "exports"]  # by priority, then name
