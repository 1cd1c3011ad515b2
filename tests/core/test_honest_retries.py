"""Only a lost connection is waited out as an outage (issue 17): a statement the server
refuses (a statement timeout) is not retried for a minute as ``db_retry``; a boundary whose
commit went through before its connection broke recognises its own write when retried."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from kestrel_core import Kestrel, boundary
from tests.waiting import wait_for


def test_a_statement_timeout_on_the_write_path_is_not_logged_as_db_retry(
        dsn: str, db: psycopg.Connection, start_worker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kestrel")
    app = Kestrel(make_conninfo(dsn, options="-c statement_timeout=300"))
    go = threading.Event()

    @app.workflow("held-up")
    def held_up(ctx, _input):
        ctx.step("a", go.wait, 30)
        return ctx.step("b", lambda: "b")

    with app:
        start_worker(app, lease=timedelta(seconds=2))
        eid = app.enqueue("held-up")
        wait_for(lambda: db.execute("SELECT 1 FROM step_attempts WHERE execution_id = %s AND step_id = 'a'",
                                    (eid,)).fetchone(), what="step a to start")
        with psycopg.connect(dsn) as blocker:  # a transaction holding the execution's row
            blocker.execute("SELECT 1 FROM kestrel.workflow_executions WHERE id = %s FOR UPDATE", (eid,))
            go.set()  # a ends: its boundary (a's checkpoint, b's start) waits for the lock, times out
            wait_for(lambda: any(m in caplog.text for m in ("event=db_retry", "event=engine_write_failed")),
                     timeout=30, what="the boundary write to time out")
            blocker.rollback()
        retried = [r.getMessage() for r in caplog.records if "event=db_retry" in r.getMessage()]
        assert retried == []
        failed = [r.getMessage() for r in caplog.records if "event=engine_write_failed" in r.getMessage()]
        assert failed and "statement timeout" in failed[0]
        # the lease lapses and the execution is replayed from its checkpoints
        done = wait_for(lambda: (e := app.get(eid)).done and e, timeout=30, what="the replay to finish")
        assert done.status == "success" and done.output == "b"

