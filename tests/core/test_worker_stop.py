"""A stopping worker's `workers` row ends retired: no heartbeat of its own may follow the
retirement (the heartbeat's UPDATE clears stopped_at). Issue 17: after SIGKILL of a
supervisor, one child's row was left looking live
(tests/cli/test_worker_processes.py::test_the_processes_die_with_a_killed_supervisor)."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg

from kestrel_core import Kestrel
from tests.waiting import wait_for

BLOCKED = """
SELECT query, query_start FROM pg_stat_activity
 WHERE datname = current_database() AND application_name = 'kestrel-worker' AND wait_event_type = 'Lock'
"""


def test_no_heartbeat_follows_the_retirement(app: Kestrel, dsn: str, db: psycopg.Connection, start_worker) -> None:
    @app.workflow("idle")
    def idle(ctx, _input):
        return None

    worker = start_worker(app, lease=timedelta(seconds=3), worker_id="retiring")  # a heartbeat a second
    beat = db.execute("SELECT last_heartbeat FROM workers WHERE worker_id = 'retiring'").fetchone()[0]
    wait_for(
        lambda: db.execute("SELECT last_heartbeat > %s FROM workers WHERE worker_id = 'retiring'", (beat,)).fetchone()[
            0
        ],
        what="a heartbeat",
    )
    with psycopg.connect(dsn) as blocker:  # the workers row, locked just after a heartbeat
        blocker.execute("SELECT 1 FROM kestrel.workers WHERE worker_id = 'retiring' FOR UPDATE")
        stopping = threading.Thread(target=worker.stop, kwargs={"grace": timedelta(0)})
        stopping.start()

        def retire_waits_and_no_heartbeat_can_come() -> bool:
            blocked = db.execute(BLOCKED).fetchall()
            retire = [start for query, start in blocked if "stopped_at = now()" in query]
            later_beats = [
                start for query, start in blocked if "last_heartbeat = now()" in query and retire and start > retire[0]
            ]
            return bool(retire) and (bool(later_beats) or not any(t.is_alive() for t in worker._maintenance))

        wait_for(
            retire_waits_and_no_heartbeat_can_come,
            timeout=15,
            what="the retirement to wait for the lock (and the heartbeat thread to end or queue behind it)",
        )
        blocker.rollback()
    stopping.join(timeout=15)
    assert db.execute("SELECT stopped_at IS NOT NULL FROM workers WHERE worker_id = 'retiring'").fetchone() == (True,)
