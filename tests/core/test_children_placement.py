"""ctx.start_child takes the enqueue options users know (queue=, concurrency_key=, priority=)
and places the child as app.enqueue would: its queue, its version."""

from __future__ import annotations

import psycopg

from kestrel_core import Kestrel
from tests.waiting import wait_finished as done

CHILD_ROW = """
SELECT parent_id, status, queue, concurrency_key, version, priority
  FROM workflow_executions WHERE id = %s
"""


def test_a_child_started_with_queue_and_concurrency_key_lands_there_and_runs(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    app.queue("q", concurrency=2, priority=7)

    @app.workflow("leaf", version="leaf-v3")
    def leaf(ctx, n):
        return n + 1

    @app.workflow("parent")
    def parent(ctx, n):
        handle = ctx.start_child("leaf", n, queue="q", concurrency_key="k")
        return {"child": handle.execution_id, "result": ctx.wait_for(handle)}

    start_worker(app)
    eid = app.enqueue("parent", 1)
    final = done(app, eid)
    assert final.status == "success", final.error
    assert final.output["result"] == 2
    child = final.output["child"]
    # the queue's default priority, the child workflow's version (this process has its code)
    assert db.execute(CHILD_ROW, (child,)).fetchone() == (eid, "success", "q", "k", "leaf-v3", 7)
    assert db.execute("SELECT keyed FROM queues WHERE name = 'q'").fetchone() == (True,)


def test_a_child_goes_to_its_workflows_queue_and_an_unknown_child_has_no_version(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    app.queue("bound", concurrency=5)

    @app.workflow("bound_leaf", queue="bound", version="b1")
    def bound_leaf(ctx, _):
        return "ran in bound"

    @app.workflow("parent")
    def parent(ctx, _):
        bound = ctx.start_child("bound_leaf", priority=3)
        elsewhere = ctx.start_child("not_here")  # code only another deployment has
        return {"bound": bound.execution_id, "result": ctx.wait_for(bound), "elsewhere": elsewhere.execution_id}

    start_worker(app)
    eid = app.enqueue("parent")
    final = done(app, eid)
    assert final.status == "success", final.error
    assert final.output["result"] == "ran in bound"
    assert db.execute(CHILD_ROW, (final.output["bound"],)).fetchone() == (eid, "success", "bound", None, "b1", 3)
    # not known here: default queue, any version, left for a worker that has it
    assert db.execute(CHILD_ROW, (final.output["elsewhere"],)).fetchone() == (eid, "enqueued", "default", None, None, 0)
