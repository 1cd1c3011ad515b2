"""Review of issue 47's pause: "A pause stops a running execution at its next step boundary and
keeps the step in flight ... after the resume that step is replayed from its checkpoint, not
run again" (docs/guarantees.md), and "a step runs again only if it was in flight when its claim
ended (killed, froze past its lease, shut down past its grace, a boundary write failed)".

Reproduction: pause during s2 of s1..s3, resume before s2 returns (an operator's quick
pause/resume), then let s2 return. The resume sets 'enqueued' keeping owner and epoch; s2's
boundary write needs 'running' or 'paused', so s2's end is refused (not checkpointed), and the
next claim runs s2 again: the ledger is s1, s2, s2, s3. No worker was killed, frozen or
stopped."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg

from kestrel_core import Kestrel
from kestrel_core.engine.worker import Worker
from tests.core.conftest import ledger_rows
from tests.waiting import wait_for


def record(app: Kestrel, execution_id: int, step_id: str) -> str:
    with psycopg.connect(app.dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, %s)", (execution_id, step_id))
    return step_id


def test_a_resume_before_the_step_in_flight_returns_does_not_run_it_again(
    app: Kestrel, ledger: psycopg.Connection, db: psycopg.Connection, start_worker: Callable[..., Worker]
) -> None:
    in_s2 = threading.Event()
    go_on = threading.Event()

    def s2(eid: int) -> str:
        record(app, eid, "s2")
        if not in_s2.is_set():
            in_s2.set()
            go_on.wait(30)
        return "s2"

    @app.workflow("chain")
    def chain(ctx, _):
        return [
            ctx.step("s1", record, app, ctx.execution_id, "s1"),
            ctx.step("s2", s2, ctx.execution_id),
            ctx.step("s3", record, app, ctx.execution_id, "s3"),
        ]

    start_worker(app)
    eid = app.enqueue("chain", None)
    assert in_s2.wait(30)
    assert app.pause(eid, by="alice") == "running"
    assert app.resume(eid, by="alice") == "enqueued"
    go_on.set()
    wait_for(
        lambda: db.execute(
            "SELECT 1 FROM workflow_executions WHERE id = %s AND status IN ('success', 'error')", (eid,)
        ).fetchone(),
        what="the execution to finish",
    )
    assert [s for _, s in ledger_rows(db, eid)] == ["s1", "s2", "s3"]
