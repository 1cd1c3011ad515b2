"""Pause across a worker SIGKILL (issue 47), with real worker processes: whether the pause
commits before the kill or after it (the dead worker's lease still live), no step starts while
the execution is paused, no worker claims it (not even once that lease has lapsed), and resume
goes on from its checkpoints: no checkpointed step runs again."""

from __future__ import annotations

import signal
from datetime import datetime

import psycopg
import pytest

from kestrel_core import Kestrel
from tests.core.test_crash import Workers, checkpoints, ran, workers  # noqa: F401 (fixture)
from tests.waiting import wait_for, wait_leases_lapsed


def attempts_started_after(db: psycopg.Connection, eid: int, at: datetime) -> list[str]:
    rows = db.execute(
        "SELECT step_id FROM step_attempts WHERE execution_id = %s AND started_at > %s ORDER BY id", (eid, at)
    ).fetchall()
    return [r[0] for r in rows]


@pytest.mark.parametrize("order", ["pause_then_kill", "kill_then_pause"])
def test_a_paused_execution_stays_put_across_a_sigkill_and_resumes_from_its_checkpoints(
    app: Kestrel, db: psycopg.Connection, workers: Workers, order: str
) -> None:
    a = workers.start("worker-a", step_seconds=0.6)
    eid = app.enqueue("slow", {"steps": 5})
    wait_for(lambda: len(checkpoints(db, eid)) >= 2, what="two checkpoints")
    if order == "kill_then_pause":
        a.send_signal(signal.SIGKILL)
        a.wait()
    assert app.pause(eid, by="alice") == "running"
    (paused_at,) = db.execute(
        "SELECT at FROM operator_actions WHERE execution_id = %s AND action = 'pause'", (eid,)
    ).fetchone()
    kept = checkpoints(db, eid)  # nothing is checkpointed under the pause (fenced)
    if order == "pause_then_kill":
        a.send_signal(signal.SIGKILL)
        a.wait()
    workers.start("worker-b")
    # worker-b claims and sweeps: a new execution runs through, and the dead worker's lease
    # lapses (the lease sweep would have re-enqueued a running execution by then). Read live:
    # a's heartbeat renews a paused execution's lease while its step runs, and a renewal its
    # backend received before the kill may commit after a.wait() returns.
    wait_leases_lapsed(db, [eid])
    probe = app.enqueue("slow", {"steps": 1})
    wait_for(lambda: app.get(probe).done, timeout=30, what="worker-b to run another execution")
    assert app.get(eid).status == "paused"
    assert checkpoints(db, eid) == kept
    assert attempts_started_after(db, eid, paused_at) == []  # no step started while paused

    assert app.resume(eid, by="alice") == "enqueued"
    wait_for(lambda: app.get(eid).done, timeout=30, what="the resumed execution to finish")
    assert app.get(eid).status == "success"
    assert app.get(eid).output == [f"s{i}-done" for i in range(5)]
    runs = ran(db, eid)
    assert all(runs[step] == 1 for step in kept), runs  # no checkpointed step ran again
    assert set(attempts_started_after(db, eid, paused_at)) <= {f"s{i}" for i in range(5)} - set(kept)
    owners = db.execute(
        "SELECT DISTINCT owner_id FROM step_attempts WHERE execution_id = %s AND started_at > %s", (eid, paused_at)
    ).fetchall()
    assert owners == [("worker-b",)]
