"""db.pipeline: several statements in one round trip through the connection's libpq handle
(the enqueue group commit's write), against a real server."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql
from psycopg.pq import ExecStatus

from kestrel_core.db.pipeline import Prepared, Step, failure, round_trip, rows_of

ADD = Prepared.of(sql.SQL("SELECT %(n)s::int + 1, %(names)b::text[]"))
PREPARED = "SELECT name FROM pg_prepared_statements"


@pytest.fixture
def conn(dsn: str):
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


def test_parameters_take_the_types_the_statement_casts_them_to(conn: psycopg.Connection) -> None:
    """Prepared without types: a small int sent as psycopg's own binary int2 would be read as
    an int4 ("incorrect binary data format"); it goes as text, a list marked binary as binary."""
    (result,) = round_trip(conn, [Step(prepared=ADD, params={"n": 7, "names": ["a", "b"]})])
    assert failure(conn, result, ExecStatus.TUPLES_OK) is None
    assert rows_of(conn, result) == [(8, ["a", "b"])]


def test_a_statement_is_prepared_once_per_connection(conn: psycopg.Connection, dsn: str) -> None:
    for n in range(3):
        (result,) = round_trip(conn, [Step(prepared=ADD, params={"n": n, "names": []})])
        assert rows_of(conn, result) == [(n + 1, [])]
    assert conn.execute(PREPARED).fetchall() == [(ADD.name.decode(),)]
    with psycopg.connect(dsn, autocommit=True) as other:  # a new connection prepares its own
        (result,) = round_trip(other, [Step(prepared=ADD, params={"n": 1, "names": None})])
        assert rows_of(other, result) == [(2, None)]


def test_a_failed_statement_aborts_the_rest_and_says_why(conn: psycopg.Connection) -> None:
    bad = Prepared.of(sql.SQL("SELECT 1 / %(zero)s::int"))
    begun, divided, added, ended = round_trip(
        conn,
        [
            Step(literal=b"BEGIN"),
            Step(prepared=bad, params={"zero": 0}),
            Step(prepared=ADD, params={"n": 1, "names": []}),
            Step(literal=b"COMMIT"),
        ],
    )
    assert failure(conn, begun, ExecStatus.COMMAND_OK) is None
    assert isinstance(failure(conn, divided, ExecStatus.TUPLES_OK), psycopg.errors.DivisionByZero)
    assert isinstance(failure(conn, added, ExecStatus.TUPLES_OK), psycopg.errors.PipelineAborted)
    assert isinstance(failure(conn, ended, ExecStatus.COMMAND_OK), psycopg.errors.PipelineAborted)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    conn.rollback()
    (result,) = round_trip(conn, [Step(prepared=ADD, params={"n": 2, "names": []})])
    assert rows_of(conn, result) == [(3, [])]


def test_a_lost_connection_raises_instead_of_waiting(conn: psycopg.Connection, db: psycopg.Connection) -> None:
    round_trip(conn, [Step(prepared=ADD, params={"n": 1, "names": []})])
    db.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
    with pytest.raises(psycopg.OperationalError):
        round_trip(conn, [Step(prepared=ADD, params={"n": 1, "names": []})])
    assert conn.closed


def test_a_rollback_through_psycopg_keeps_the_statements_prepared(conn: psycopg.Connection) -> None:
    """psycopg empties the session's prepared statements at a rollback once it has prepared
    any of its own (DEALLOCATE ALL): the round trips' statements went with them, and every
    later batch of the connection failed ("prepared statement ... does not exist")."""
    round_trip(conn, [Step(prepared=ADD, params={"n": 1, "names": []})])
    for _ in range(8):  # past psycopg's prepare_threshold
        conn.execute("SELECT %s::int", (1,))
    with pytest.raises(psycopg.errors.DivisionByZero):
        with conn.transaction():
            conn.execute("SELECT 1 / 0")
    (result,) = round_trip(conn, [Step(prepared=ADD, params={"n": 4, "names": []})])
    assert failure(conn, result, ExecStatus.TUPLES_OK) is None and rows_of(conn, result) == [(5, [])]


def test_statements_deallocated_behind_its_back_are_prepared_again(conn: psycopg.Connection) -> None:
    round_trip(conn, [Step(prepared=ADD, params={"n": 1, "names": []})])
    conn.execute("DEALLOCATE ALL")
    (result,) = round_trip(conn, [Step(prepared=ADD, params={"n": 1, "names": []})])
    assert isinstance(failure(conn, result, ExecStatus.TUPLES_OK), psycopg.errors.InvalidSqlStatementName)
    (result,) = round_trip(conn, [Step(prepared=ADD, params={"n": 2, "names": []})])
    assert rows_of(conn, result) == [(3, [])]
