"""The database fixtures' reset (``tests/conftest.empty_tables``): what every test starts from."""

from __future__ import annotations

from datetime import timedelta

from psycopg import sql

from kestrel_core import Kestrel
from tests.conftest import KEPT_TABLES, empty_tables
from tests.waiting import wait_for

TABLES = """
SELECT c.relname FROM pg_class c
 WHERE c.relnamespace = 'kestrel'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
 ORDER BY 1
"""


def test_every_table_but_the_kept_ones_is_emptied_and_the_ids_restart(app: Kestrel, dsn: str, db) -> None:
    @app.workflow("done")
    def finish(ctx, _input):
        return ctx.step("one", lambda: 1)

    @app.workflow("gated")
    def gate(ctx, n):
        ctx.step("before", lambda: n)
        return ctx.wait_for_approval("approve")

    gated = app.enqueue("gated", 1, idempotency_key="k-1")
    done = app.enqueue("done")
    worker = app.worker(concurrency=2, poll_interval=0.05)
    worker.start()
    try:
        wait_for(lambda: app.get(done).status == "success", what="the execution to finish")
        wait_for(lambda: app.get(gated).status == "waiting", what="the gate to wait")
    finally:
        worker.stop(grace=timedelta(0))
    app.cancel(gated, by="alice", comment="done testing")
    tables = [row[0] for row in db.execute(TABLES)]
    count = sql.SQL("SELECT count(*) FROM kestrel.{}")
    written = [t for t in tables if t not in KEPT_TABLES and db.execute(count.format(sql.Identifier(t))).fetchone()[0]]
    assert {"workflow_executions", "operation_outputs", "workflow_waits", "operator_actions", "workers"} <= set(written)

    empty_tables(dsn)

    left = {t: db.execute(count.format(sql.Identifier(t))).fetchone()[0] for t in tables if t not in KEPT_TABLES}
    assert left == dict.fromkeys(left, 0)
    assert all(db.execute(count.format(sql.Identifier(t))).fetchone()[0] for t in KEPT_TABLES)
    with Kestrel(dsn) as again:
        assert again.enqueue("done", idempotency_key="k-1") == 1  # ids from 1, the key free again
    counted = "SELECT workflow_name, status, sum(n) FROM kestrel.execution_counts GROUP BY 1, 2 HAVING sum(n) <> 0"
    assert db.execute(counted).fetchall() == []
