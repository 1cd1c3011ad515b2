"""What `enqueue` and the operator API refuse before writing (issue 9): names, priorities,
delays, ids, inputs that are not valid Unicode or are too large."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from kestrel_core import InvalidArgument, Kestrel, NotSerializable
from kestrel_core.base.serialization import MAX_JSON_BYTES


def executions(db: psycopg.Connection) -> int:
    return db.execute("SELECT count(*) FROM workflow_executions").fetchone()[0]


@pytest.mark.parametrize("name", ["", "  ", "x" * 201, "nul\x00name", None, 7])
def test_bad_workflow_names_raise_value_error(app: Kestrel, db: psycopg.Connection, name) -> None:
    with pytest.raises(ValueError) as caught:
        app.enqueue(name, {})
    assert isinstance(caught.value, InvalidArgument)
    with pytest.raises(InvalidArgument):
        app.enqueue_many(name, [{}])
    assert executions(db) == 0


def test_a_name_of_200_characters_is_fine(app: Kestrel, db: psycopg.Connection) -> None:
    app.enqueue("n" * 200, None)
    assert executions(db) == 1


@pytest.mark.parametrize(
    "options",
    [
        {"priority": 2**31},
        {"priority": -(2**31) - 1},
        {"priority": 1.5},
        {"delay": timedelta(days=3651)},
        {"delay": 1e12},
        {"delay": 30},
        {"delay": timedelta(days=-999_999_999)},
    ],
)
def test_priority_and_delay_out_of_range(app: Kestrel, db: psycopg.Connection, options) -> None:
    with pytest.raises(InvalidArgument):
        app.enqueue("w", None, **options)
    assert executions(db) == 0


def test_a_lone_surrogate_is_not_storable(app: Kestrel, db: psycopg.Connection) -> None:
    with pytest.raises(NotSerializable, match="lone surrogate"):
        app.enqueue("w", {"text": "\ud800"})
    assert executions(db) == 0


def test_an_input_over_the_limit_is_refused_before_sending(app: Kestrel, db: psycopg.Connection) -> None:
    big = "x" * (MAX_JSON_BYTES + 1)
    with pytest.raises(ValueError, match=r"too large \(64\.0 MB; the limit is 64\.0 MB\)") as caught:
        app.enqueue("w", big)
    assert isinstance(caught.value, NotSerializable)
    del big
    assert executions(db) == 0


@pytest.mark.parametrize("eid", [2**63, 0, -1])
def test_operator_actions_refuse_ids_no_execution_can_have(app: Kestrel, db: psycopg.Connection, eid) -> None:
    for act in (
        lambda: app.cancel(eid, by="a"),
        lambda: app.requeue(eid, by="a"),
        lambda: app.approve(eid, "g", by="a"),
        lambda: app.reject(eid, "g", by="a"),
    ):
        with pytest.raises(InvalidArgument, match="no execution can have id"):
            act()
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)


@pytest.mark.parametrize(
    "options",
    [
        {"idempotency_key": "k" * 501},
        {"queue": "q" * 501},
        {"concurrency_key": "c" * 501},
        {"idempotency_key": "\ud800"},
    ],
)
def test_keys_and_queue_names_are_bounded(app: Kestrel, db: psycopg.Connection, options) -> None:
    with pytest.raises(InvalidArgument):
        app.enqueue("w", **options)
    assert executions(db) == 0


def test_a_permanent_error_is_not_reported_as_an_unreachable_database(app: Kestrel) -> None:
    """Issue 18: every OperationalError inside app.connection() became DatabaseUnavailable
    ("cannot connect"), a statement the server refused (an index row too large, a timeout) too."""
    with pytest.raises(psycopg.errors.QueryCanceled), app.connection() as conn, conn.transaction():
        conn.execute("SET LOCAL statement_timeout = '1ms'")
        conn.execute("SELECT pg_sleep(1)")
    assert app.enqueue("w") > 0  # the pool and the database are fine
