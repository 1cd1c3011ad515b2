"""The reset between a module's tests (tests/conftest.py, TablesReset): the next test starts
from the module database's own history ranges, whatever ranges the last one added."""

from __future__ import annotations

import psycopg

from tests.conftest import TablesReset

RANGES = "SELECT lo, hi FROM kestrel.history_partitions ORDER BY lo"
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
