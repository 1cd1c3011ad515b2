"""A parent with 50 children survives a SIGKILLed worker mid fan-in (worker subprocesses)."""

from __future__ import annotations

import signal

import psycopg

from kestrel_core import Kestrel
from tests.core.test_crash import Workers, workers  # noqa: F401  (fixture)
from tests.waiting import wait_for


def test_fan_in_of_50_children_completes_after_a_sigkill(
    app: Kestrel, db: psycopg.Connection, workers: Workers
) -> None:
    a = workers.start("worker-a", step_seconds=0.1)
    eid = app.enqueue("fan", {"children": 50})
    wait_for(
        lambda: db.execute(
            "SELECT count(*) FILTER (WHERE status = 'success') >= 8"
            "   AND count(*) FILTER (WHERE status IN ('enqueued', 'running')) >= 8"
            "  FROM workflow_executions WHERE parent_id = %s",
            (eid,),
        ).fetchone()[0],
        timeout=30,
        interval=0.01,
        what="the fan-in to be under way",
    )
    assert app.get(eid).status in ("waiting", "enqueued", "running")
    a.send_signal(signal.SIGKILL)
    a.wait()
    workers.start("worker-b", step_seconds=0.1)
    wait_for(lambda: app.get(eid).done, timeout=60, interval=0.1, what="the parent to finish")

    final = app.get(eid)
    assert final.status == "success", final.error
    assert final.output == [f"leaf-{i}-done" for i in range(50)]
    children = db.execute(
        "SELECT input::int, status FROM workflow_executions WHERE parent_id = %s ORDER BY 1", (eid,)
    ).fetchall()
    assert children == [(i, "success") for i in range(50)]  # each child started exactly once
    runs = dict(db.execute("SELECT step_id, count(*) FROM public.ledger GROUP BY 1").fetchall())
    assert set(runs) == {f"leaf-{i}" for i in range(50)}
    # A child's step in flight at the kill runs again (at-least-once steps); nothing else does.
    assert sum(n - 1 for n in runs.values()) <= 4, runs
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (51,)
