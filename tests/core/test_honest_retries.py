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

from kestrel_core import Kestrel
from kestrel_core.durable import boundary
from tests.waiting import wait_for


def test_a_statement_timeout_on_the_write_path_is_not_logged_as_db_retry(
    dsn: str, db: psycopg.Connection, start_worker, caplog: pytest.LogCaptureFixture
) -> None:
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
        wait_for(
            lambda: db.execute(
                "SELECT 1 FROM step_attempts WHERE execution_id = %s AND step_id = 'a'", (eid,)
            ).fetchone(),
            what="step a to start",
        )
        with psycopg.connect(dsn) as blocker:  # a transaction holding the execution's row
            blocker.execute("SELECT 1 FROM kestrel.workflow_executions WHERE id = %s FOR UPDATE", (eid,))
            go.set()  # a ends: its boundary (a's checkpoint, b's start) waits for the lock, times out
            wait_for(
                lambda: any(m in caplog.text for m in ("event=db_retry", "event=engine_write_failed")),
                timeout=30,
                what="the boundary write to time out",
            )
            blocker.rollback()
        retried = [r.getMessage() for r in caplog.records if "event=db_retry" in r.getMessage()]
        assert retried == []
        failed = [r.getMessage() for r in caplog.records if "event=engine_write_failed" in r.getMessage()]
        assert failed and "statement timeout" in failed[0]
        # the lease lapses and the execution is replayed from its checkpoints
        done = wait_for(lambda: (e := app.get(eid)).done and e, timeout=30, what="the replay to finish")
        assert done.status == "success" and done.output == "b"


def test_a_boundary_retried_after_its_commit_went_through_leaves_one_attempt_and_no_stall(
    app: Kestrel, db: psycopg.Connection, ledger, start_worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = boundary.write
    broken: list[int] = []

    def write_then_lose_the_answer(conn, schema, batch):
        outcomes = real_write(conn, schema, batch)  # committed (autocommit)
        if not broken and any(b.finish is not None and b.finish.step_id == "a" and b.finish.keep for b in batch):
            broken.append(len(batch))
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")  # the answer never arrives
        return outcomes

    monkeypatch.setattr(boundary, "write", write_then_lose_the_answer)

    def side_effect(eid: int, step: str) -> str:
        ledger.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, %s)", (eid, step))
        return step

    @app.workflow("two")
    def two(ctx, _input):
        return [ctx.step("a", side_effect, ctx.execution_id, "a"), ctx.step("b", side_effect, ctx.execution_id, "b")]

    start_worker(app, lease=timedelta(seconds=30))  # a stall would wait out this lease
    eid = app.enqueue("two")
    done = wait_for(lambda: (e := app.get(eid)).done and e, timeout=20, what="the execution to finish")
    assert broken, "the fault was injected"
    assert done.status == "success" and done.output == ["a", "b"]
    assert done.claims == 1  # never re-claimed: no lease waited out
    attempts = db.execute(
        "SELECT step_id, attempt, outcome FROM step_attempts WHERE execution_id = %s ORDER BY step_id, attempt", (eid,)
    ).fetchall()
    assert attempts == [("a", 1, "success"), ("b", 1, "success")]
    assert db.execute(
        "SELECT step_id, owner_id IS NOT NULL, claim_epoch FROM operation_outputs"
        " WHERE execution_id = %s ORDER BY step_id",
        (eid,),
    ).fetchall() == [("a", True, 1), ("b", True, 1)]
    assert sorted(step for _, step in ledger.execute("SELECT execution_id, step_id FROM public.ledger")) == ["a", "b"]
