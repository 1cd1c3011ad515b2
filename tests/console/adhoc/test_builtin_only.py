"""Issue 44, second review (6, 7): only what initdb made counts as built in, and casts are
resolved too.

A superuser may create objects in pg_catalog and information_schema, and anyone who may create
a function may back a cast with it (CREATE CAST needs only the ownership of a type or, for two
built-in types, a superuser). Before, ``lower(5)`` ran an admin's ``pg_catalog.lower(integer)``
(an allowlisted name in pg_catalog), a view added to information_schema was read unchecked, and
``1::text`` ran the function of an admin's cast, as did the console's own size wrapper on any
integer column (``octet_length(c0::text)``): each killed the victim session.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from kestrel_console.adhoc import QueryRefused, run_read_only
from tests.conftest import KeptSessions, admin_objects

KILL = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'kt-victim2'"
ADDED = f"""
CREATE FUNCTION pg_catalog.lower(integer) RETURNS text LANGUAGE sql SECURITY DEFINER
    AS $$ {KILL}; SELECT 'x' $$;
CREATE FUNCTION kestrel.int_text(integer) RETURNS text LANGUAGE sql SECURITY DEFINER
    AS $$ {KILL}; SELECT 'x' $$;
CREATE CAST (integer AS text) WITH FUNCTION kestrel.int_text(integer);
CREATE VIEW information_schema.killer AS {KILL.replace("SELECT ", "SELECT pid, ", 1)};
GRANT SELECT ON information_schema.killer TO PUBLIC;
"""
REMOVED = """
DROP VIEW IF EXISTS information_schema.killer;
DROP CAST IF EXISTS (integer AS text);
DROP FUNCTION IF EXISTS kestrel.int_text(integer);
DROP FUNCTION IF EXISTS pg_catalog.lower(integer);
"""


@pytest.fixture
def added(dsn: str) -> Iterator[None]:
    with admin_objects(dsn, ADDED, REMOVED):
        yield


def alive(conn: psycopg.Connection) -> bool:
    try:
        return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def test_objects_added_to_the_system_schemas_and_casts_are_refused(
    added: None, dsn: str, operator_dsn: str, sessions: KeptSessions
) -> None:
    victim = sessions.session(dsn, "victim", options="-c application_name=kt-victim2")
    with psycopg.connect(operator_dsn, autocommit=True) as conn:
        for query, reason in [
            ("SELECT lower(5)", "function pg_catalog.lower(integer): added to pg_catalog after initdb"),
            ("SELECT 1::text", "cast integer AS text runs the function kestrel.int_text"),
            ("SELECT CAST(1 AS text)", "cast integer AS text"),
            ("SELECT * FROM information_schema.killer", "view information_schema.killer runs what a query may not"),
        ]:
            with pytest.raises(QueryRefused) as refused:
                run_read_only(conn, query)
            assert refused.value.reason.startswith(reason), (query, refused.value.reason)
            assert alive(victim), query
        # every overload of a name counts: lower('A') may resolve to the admin's lower(integer)
        with pytest.raises(QueryRefused):
            run_read_only(conn, "SELECT lower('A')")
        # the console's own wrapper measures an integer column without a cast
        assert run_read_only(conn, "SELECT 42 AS n").rows == [(42,)]
        assert alive(victim)
