"""The reset between a module's tests (tests/conftest.py, TablesReset): the next test starts
from empty tables, ids from 1, and the module database's own history ranges, whatever ranges
the last one added."""

from __future__ import annotations

import psycopg
from psycopg import sql

from tests.conftest import EMPTIED_BY_DELETE, RESET_TABLES, TablesReset

RANGES = "SELECT lo, hi FROM kestrel.history_partitions ORDER BY lo"
COUNT = sql.SQL("SELECT count(*) FROM kestrel.{}")
PARTITIONS = "SELECT count(*) FROM pg_inherits WHERE inhparent = 'kestrel.workflow_executions'::regclass"


def test_the_ranges_a_test_added_are_dropped_with_their_partitions(
    dsn: str, db: psycopg.Connection, tables_reset: TablesReset
) -> None:
    own = db.execute(RANGES).fetchall()
    partitions = db.execute(PARTITIONS).fetchone()[0]
    db.execute("SELECT kestrel.ensure_partitions(12)")  # a test that made ranges ahead
    db.execute("INSERT INTO workflow_executions (workflow_name) VALUES ('x')")
    assert len(db.execute(RANGES).fetchall()) > len(own)

    tables_reset()

    assert db.execute(RANGES).fetchall() == own
    assert db.execute(PARTITIONS).fetchone()[0] == partitions
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone()[0] == 0


def filled(db: psycopg.Connection) -> list[str]:
    """The tables the reset empties that hold rows."""
    return [t for t in RESET_TABLES if db.execute(COUNT.format(sql.Identifier(t))).fetchone()[0]]


def test_tables_of_few_rows_and_of_many_are_emptied_alike(db: psycopg.Connection, tables_reset: TablesReset) -> None:
    """Few rows go by DELETE without triggers, more than EMPTIED_BY_DELETE by TRUNCATE: either
    way every table the reset empties is empty (those the triggers fill too) and ids restart."""
    many = EMPTIED_BY_DELETE + 1
    db.execute("INSERT INTO workflow_executions (workflow_name) SELECT 'many' FROM generate_series(1, %s)", (many,))
    first = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status) VALUES ('few', 'success') RETURNING id"
    ).fetchone()[0]
    db.execute("INSERT INTO operation_outputs (execution_id, step_id, output) VALUES (%s, 's', '1')", (first,))
    db.execute("INSERT INTO workflow_waits (execution_id, step_id, kind) VALUES (%s, 'gate', 'approval')", (first,))
    assert {"workflow_executions", "operation_outputs", "workflow_waits", "execution_counts"} <= set(filled(db))

    tables_reset()

    assert filled(db) == []
    again = db.execute("INSERT INTO workflow_executions (workflow_name) VALUES ('again') RETURNING id").fetchone()[0]
    assert again == 1
