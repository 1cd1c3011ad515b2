"""A module database is handed on to the next module of the process (tests/conftest.py,
tests/database_reuse.py) only when it is again what a fresh copy of the template is: rows are
reset, anything else keeps it from being handed on."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from tests import conftest
from tests.conftest import RANGES, drop_at_the_end


@pytest.fixture
def copy(template_database: str) -> Iterator[str]:
    """A fresh copy of the template, kept out of this process's spares afterwards."""
    dsn = conftest.copy_of_template(template_database)
    yield dsn
    if dsn in conftest.spare_databases:
        conftest.spare_databases.remove(dsn)
    drop_at_the_end(dsn)


def test_a_database_whose_tests_only_wrote_rows_is_reset_and_handed_on(copy: str) -> None:
    with psycopg.connect(copy, autocommit=True, options="-c search_path=kestrel") as conn:
        own = conn.execute(RANGES).fetchall()
        conn.execute("SELECT kestrel.ensure_partitions(12)")  # ranges made ahead
        conn.execute("INSERT INTO workflow_executions (workflow_name, status) VALUES ('x', 'success')")
        conn.execute("INSERT INTO queues (name, concurrency) VALUES ('q', 2)")
        conn.execute("CREATE TEMP TABLE scratch (x text)")  # its schema outlives the session, empty
        left_open = psycopg.connect(copy, autocommit=True)  # a session the module did not close

    assert conftest.hand_on(copy) and copy in conftest.spare_databases
    with pytest.raises(psycopg.OperationalError), left_open:  # its session was ended
        left_open.execute("SELECT 1")
    with psycopg.connect(copy, autocommit=True, options="-c search_path=kestrel") as conn:
        assert conn.execute(RANGES).fetchall() == own
        assert conn.execute("SELECT count(*) FROM workflow_executions").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM queues").fetchone() == (0,)


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE public.ledger (id int)",
        "CREATE FUNCTION public.purge() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "ALTER TABLE kestrel.queues ADD COLUMN extra int",
        "GRANT SELECT ON kestrel.queues TO PUBLIC",
        "ALTER ROLE CURRENT_USER IN DATABASE {db} SET work_mem = '8MB'",
        "ALTER DATABASE {db} SET work_mem = '8MB'",
        "INSERT INTO kestrel.workflow_executions (workflow_name) VALUES ('x'); ANALYZE kestrel.workflow_executions",
        "INSERT INTO kestrel.schema_migrations (version, name) VALUES (9999, 'from the future')",
        "DROP TRIGGER execution_key_taken ON kestrel.workflow_executions",
    ],
)
def test_a_database_changed_in_anything_but_rows_is_not_handed_on(copy: str, change: str) -> None:
    with psycopg.connect(copy, autocommit=True) as conn:
        conn.execute(sql.SQL(change).format(db=sql.Identifier(conn.info.dbname)))

    assert not conftest.hand_on(copy) and copy not in conftest.spare_databases
