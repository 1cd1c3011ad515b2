"""Retention keeps the finished children of a parent while the parent's row is there (issue 43):
a parent's later ``wait_for`` reads its child's row, and reported it "missing" once a prune
had taken it; a parent cancelled while it waited is finished, but a requeue runs it again.
Both ways a prune deletes: the batches (the range the id sequence is in) and the
drop of a whole range (the child in an old range, its parent in a newer one)."""

from __future__ import annotations

from datetime import timedelta

import psycopg

from kestrel_core import Kestrel
from kestrel_core.admin.prune import connection_runner, droppable_ranges, prunable, prune
from tests.core.test_partitions import MARKER, SEED_FINISHED, count, partitions, ranges, restart_ids

S = "kestrel"
CHILD = """
INSERT INTO workflow_executions (workflow_name, status, parent_id, created_at, started_at, finished_at, updated_at)
VALUES ('child', 'success', %s, now() - interval '41 days', now() - interval '41 days', now() - interval '40 days',
        now() - interval '40 days')
RETURNING id
"""
PARENT = "INSERT INTO workflow_executions (workflow_name, status) VALUES ('parent', 'waiting') RETURNING id"
FINISH = (
    "UPDATE workflow_executions SET status = 'success', finished_at = now() - interval '40 days',"
    " updated_at = now() WHERE id = %s"
)


def run(app: Kestrel):
    return prune(connection_runner(app.connection), S, older_than=timedelta(days=30), by="tester")


def exists(db: psycopg.Connection, eid: int) -> bool:
    return db.execute("SELECT count(*) FROM workflow_executions WHERE id = %s", (eid,)).fetchone()[0] == 1


def test_a_batch_prune_keeps_a_finished_child_of_a_live_parent(app: Kestrel, db: psycopg.Connection) -> None:
    old = db.execute(SEED_FINISHED, {"n": 20, "age": "40 days"}).fetchone()[0]
    (parent,) = db.execute(PARENT).fetchone()
    (child,) = db.execute(CHILD, (parent,)).fetchone()
    cutoff = db.execute("SELECT now() - interval '30 days'").fetchone()[0]
    assert sum(g.count for g in prunable(db, S, cutoff)) == old  # the dry run says so too
    assert run(app).deleted == old
    assert exists(db, child), "a finished child of a waiting parent was pruned"
    db.execute(FINISH, (parent,))
    assert run(app).deleted == 2  # the parent, then its child
    assert not exists(db, child) and not exists(db, parent)


def test_a_range_holding_a_finished_child_of_a_live_parent_is_not_dropped(app: Kestrel, db: psycopg.Connection) -> None:
    db.execute(SEED_FINISHED, {"n": 20, "age": "40 days"})
    restart_ids(db, ranges(db)[0][1] - 1)
    (child,) = db.execute(CHILD, (None,)).fetchone()  # the last of the first range
    db.execute(MARKER)  # the first past it, two minutes old: the sequence passed the range
    (parent,) = db.execute(PARENT).fetchone()  # in the next range
    db.execute("UPDATE workflow_executions SET parent_id = %s WHERE id = %s", (parent, child))
    cutoff = db.execute("SELECT now() - interval '30 days'").fetchone()[0]
    assert droppable_ranges(db, S, cutoff) == []
    result = run(app)
    assert result.dropped == [] and exists(db, child)
    assert "workflow_executions_p0" in partitions(db, "workflow_executions")
    db.execute(FINISH, (parent,))
    assert droppable_ranges(db, S, cutoff) == []  # the parent's row is still there
    run(app)  # prunes the parent
    assert not exists(db, parent) and exists(db, child)
    assert [r.lo for r in droppable_ranges(db, S, cutoff)] == [0]
    result = run(app)
    assert "workflow_executions_p0" not in partitions(db, "workflow_executions")
    assert not exists(db, child) and count(db, "workflow_executions", "workflow_name = 'old'") == 0


CANCELLED_PARENT = (
    "INSERT INTO workflow_executions (workflow_name, status, finished_at) VALUES ('parent', 'cancelled', now())"
    " RETURNING id"
)


def test_a_finished_child_of_a_cancelled_parent_stays_for_a_requeue(app: Kestrel, db: psycopg.Connection) -> None:
    """Issue 43 review (f): a parent cancelled while it waited for its child is finished, but
    not old; a requeue runs it again, and its wait_for reads the child. Before: the child
    (finished long ago) was pruned, and the requeued parent failed with ChildFailed "missing"."""
    (parent,) = db.execute(CANCELLED_PARENT).fetchone()
    (child,) = db.execute(CHILD, (parent,)).fetchone()
    cutoff = db.execute("SELECT now() - interval '30 days'").fetchone()[0]
    assert sum(g.count for g in prunable(db, S, cutoff)) == 0
    run(app)
    assert exists(db, child), "the finished child of a parent that may be requeued was pruned"
    db.execute(FINISH, (parent,))  # the parent old enough too: it goes, then its child
    assert run(app).deleted == 2
    assert not exists(db, child) and not exists(db, parent)


def test_a_range_holding_a_finished_child_of_a_cancelled_parent_is_not_dropped(
    app: Kestrel, db: psycopg.Connection
) -> None:
    db.execute(SEED_FINISHED, {"n": 20, "age": "40 days"})
    restart_ids(db, ranges(db)[0][1] - 1)
    (child,) = db.execute(CHILD, (None,)).fetchone()  # the last of the first range
    db.execute(MARKER)
    (parent,) = db.execute(CANCELLED_PARENT).fetchone()  # in the next range, finished just now
    db.execute("UPDATE workflow_executions SET parent_id = %s WHERE id = %s", (parent, child))
    cutoff = db.execute("SELECT now() - interval '30 days'").fetchone()[0]
    assert droppable_ranges(db, S, cutoff) == []
    assert run(app).dropped == [] and exists(db, child)
