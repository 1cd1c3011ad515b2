"""The issue's must-show: a schedule at one tick a second, run by 3 worker processes for 20 s,
enqueues each tick exactly once (no duplicates, no gaps), leaderless."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from tests.waiting import wait_for
from tests.worker_processes import start_worker_process, stop_worker_processes

SCHEDULED = re.compile(r"event=scheduled worker=(\S+) schedule=every-second tick=(\S+) execution_id=(\d+)")


def test_three_workers_enqueue_each_one_second_tick_exactly_once(dsn: str, db, tmp_path: Path) -> None:
    procs, logs = [], []
    try:
        for i in range(3):
            log = tmp_path / f"w{i}.log"
            with open(log, "w") as out:
                procs.append(
                    start_worker_process(
                        dsn,
                        "tests.core.schedule_app:app",
                        "--concurrency",
                        "2",
                        "--worker-id",
                        f"w{i}",
                        "--processes",
                        "1",
                        out=out,
                    )
                )
            logs.append(log)
        wait_for(
            lambda: (
                db.execute("SELECT count(*) FROM workers WHERE stopped_at IS NULL").fetchone()[0] == 3
                or any(p.poll() is not None for p in procs)
            ),
            timeout=30,
            what="3 workers to register",
        )
        assert all(p.poll() is None for p in procs), [log.read_text() for log in logs]
        started = db.execute("SELECT now()").fetchone()[0]

        def span() -> timedelta:
            row = db.execute(
                "SELECT max((input->>'scheduled_at')::timestamptz) FROM workflow_executions"
                " WHERE (input->>'scheduled_at')::timestamptz > %s",
                (started,),
            ).fetchone()
            return (row[0] - started) if row[0] else timedelta(0)

        wait_for(lambda: span() >= timedelta(seconds=20), timeout=60, interval=0.5, what="20 s of ticks")
    finally:
        stop_worker_processes(procs)

    ticks = [
        datetime.fromisoformat(r[0])
        for r in db.execute("SELECT input->>'scheduled_at' FROM workflow_executions ORDER BY 1")
    ]
    # No duplicates in the table, and no gaps between the first tick and the last.
    assert len(ticks) == len(set(ticks)) >= 21
    assert all(b - a == timedelta(seconds=1) for a, b in zip(ticks, ticks[1:])), ticks
    # Each tick was enqueued by exactly one worker (not just deduplicated by the key): the
    # workers' logs name every tick once in all.
    lines = [m.groups() for log in logs for m in SCHEDULED.finditer(log.read_text())]
    per_tick = Counter(datetime.fromisoformat(tick) for _, tick, _ in lines)
    assert sorted(per_tick) == ticks
    assert set(per_tick.values()) == {1}
    assert {int(eid) for _, _, eid in lines} == {r[0] for r in db.execute("SELECT id FROM workflow_executions")}
    assert db.execute("SELECT count(*) FROM schedules WHERE name = 'every-second' AND source = 'code'").fetchone() == (
        1,
    )
    # The runs ran (a worker has the workflow), once each.
    assert (
        db.execute("SELECT count(*) FROM workflow_executions WHERE status = 'success' AND claims = 1").fetchone()[0]
        >= 20
    )
