"""Enqueue: JSON validation, idempotency keys, delays, bulk insert, NOTIFY."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from kestrel_core import Kestrel, NotSerializable
from kestrel_core.db.statements import notify_channel
from kestrel_core.dispatch.claim import claim
from kestrel_core.dispatch.enqueue import Row, write, write_and_wake


def count(db: psycopg.Connection) -> int:
    return db.execute("SELECT count(*) FROM workflow_executions").fetchone()[0]


def test_enqueue_returns_id_and_stores_input(app: Kestrel, db: psycopg.Connection) -> None:
    eid = app.enqueue("remediate", {"pod": "api-1", "n": [1, 2.5, None, True]})
    row = db.execute("SELECT workflow_name, status, input FROM workflow_executions WHERE id = %s", (eid,)).fetchone()
    assert row == ("remediate", "enqueued", {"pod": "api-1", "n": [1, 2.5, None, True]})
    assert app.get(eid).status == "enqueued"


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"x": float("nan")}, "float nan"),
        ({"x": math.inf}, "float inf"),
        (b"bytes", "type bytes"),
        ({1, 2}, "type set"),
        ({"k": object()}, "type object at $.k"),
        ({1: "int key"}, "dict key of type int"),
        ("nul\x00char", "NUL character"),
    ],
)
def test_non_json_input_is_refused_and_nothing_inserted(app: Kestrel, db: psycopg.Connection, bad, message) -> None:
    with pytest.raises(NotSerializable, match="input of workflow 'w' is not") as info:
        app.enqueue("w", bad)
    assert message in str(info.value)
    assert count(db) == 0


def test_huge_nesting_is_refused(app: Kestrel, db: psycopg.Connection) -> None:
    value: list = []
    for _ in range(2000):
        value = [value]
    with pytest.raises(NotSerializable, match="nested more than 500 levels"):
        app.enqueue("w", value)
    assert count(db) == 0


def test_idempotency_key_returns_first_id(app: Kestrel, db: psycopg.Connection) -> None:
    first = app.enqueue("w", 1, idempotency_key="alert-42")
    second = app.enqueue("w", 2, idempotency_key="alert-42")
    assert first == second
    assert count(db) == 1
    assert app.get(first).input == 1


def test_delay_postpones_the_claim(app: Kestrel, db: psycopg.Connection) -> None:
    later = app.enqueue("w", None, delay=timedelta(hours=1))
    now = app.enqueue("w", None)
    claimed = claim(db, "kestrel", worker_id="t", names=["w"], n=10, lease=timedelta(seconds=30))
    assert [c.execution_id for c in claimed] == [now]
    assert app.get(later).status == "enqueued"


def test_bulk_enqueue_one_round_trip_in_order(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", [{"i": i} for i in range(500)])
    assert len(ids) == 500 and ids == sorted(ids)
    inputs = db.execute("SELECT input FROM workflow_executions ORDER BY id").fetchall()
    assert [r[0]["i"] for r in inputs] == list(range(500))
    with pytest.raises(NotSerializable, match="input #2"):
        app.enqueue_many("w", [1, 2, {3}])
    assert count(db) == 500


def test_enqueue_notifies_listeners(app: Kestrel, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(notify_channel("kestrel"))))
        app.enqueue("remediate", {})
        notes = list(listener.notifies(timeout=2.0, stop_after=1))
    assert [n.payload for n in notes] == ["remediate"]


def test_priority_orders_claims(app: Kestrel, db: psycopg.Connection) -> None:
    low = app.enqueue("w", None)
    high = app.enqueue("w", None, priority=10)
    claimed = claim(db, "kestrel", worker_id="t", names=["w"], n=1, lease=timedelta(seconds=30))
    assert [c.execution_id for c in claimed] == [high]
    assert app.get(low).status == "enqueued"


def _scans_run(plan: dict, relation: str) -> list[str]:
    """The scan nodes of ``relation`` in an EXPLAIN ANALYZE JSON plan that ran at least once."""
    ran = []
    if plan.get("Relation Name") == relation and plan["Node Type"] != "ModifyTable" and plan["Actual Loops"]:
        ran.append(plan["Node Type"])
    for child in plan.get("Plans", []):
        ran += _scans_run(child, relation)
    return ran


def test_a_batch_without_keys_reads_no_key_holders_in_a_cached_plan(dsn: str) -> None:
    """The cached (generic) plan of a pooled connection, made while the table was small, must
    not read the table for a batch without idempotency keys: written as
    ``idempotency_key = ANY(keys)`` it was a sequential scan of the whole table at every batch
    until the next ANALYZE (bench/README.md, "Ingestion")."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        write(conn, "kestrel", [Row("w", Jsonb(i)) for i in range(100)])
        conn.execute("ANALYZE kestrel.workflow_executions")  # small: a scan is the planner's pick
        conn.execute("SET plan_cache_mode = force_generic_plan")
        write(conn, "kestrel", [Row("w", Jsonb(0), "a key")], prepare=True)
        write(conn, "kestrel", [Row("w", Jsonb(0))], prepare=True)
        (name,) = conn.execute(
            "SELECT name FROM pg_prepared_statements WHERE btrim(statement, E' \n') LIKE 'WITH req%'"
        ).fetchone()
        with conn.transaction(force_rollback=True):
            ((plan,),) = conn.execute(
                sql.SQL(
                    "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {}('{{w,w}}', ARRAY['1'::jsonb, '2'], '{{NULL,NULL}}',"
                    " '{{NULL,NULL}}', '{{NULL,NULL}}', '{{NULL,NULL}}', '{{NULL,NULL}}', '{{NULL,NULL}}',"
                    " '{{NULL,NULL}}', 'unused', false, false)"
                ).format(sql.Identifier(name))
            ).fetchall()
        assert _scans_run(plan[0]["Plan"], "workflow_executions") == []
        (holder,) = conn.execute(
            "SELECT id FROM kestrel.workflow_executions WHERE idempotency_key = 'a key'"
        ).fetchone()
        assert write(conn, "kestrel", [Row("w", Jsonb(1), "a key"), Row("w", Jsonb(2))])[0] == holder


TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # a W3C traceparent (tracing on)


@pytest.mark.parametrize("writer", [write, write_and_wake], ids=["caller's connection", "group commit's round trip"])
def test_an_optional_column_set_by_one_row_or_by_none_is_stored_row_by_row(db: psycopg.Connection, writer) -> None:
    """A column no row of the batch sets travels as one NULL array, padded by unnest
    (enqueue.column): each row still gets its own value, or the default, on the caller's
    connection and through the group commit's round trip (db.pipeline) alike."""
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    mixed = [
        Row("w", Jsonb(0)),
        Row("w", Jsonb(1), key="k1"),
        Row("w", Jsonb(2), run_at=at),
        Row("w", Jsonb(3), priority=7),
        Row("w", Jsonb(4), queue="q1"),
        Row("w", Jsonb(5), ckey="c1"),
        Row("w", Jsonb(6), version="v1"),
        Row("w", Jsonb(9), trace=TRACE),
    ]
    plain = [Row("w", Jsonb(7)), Row("w", Jsonb(8))]
    ids = writer(db, "kestrel", mixed) + writer(db, "kestrel", plain)
    stored = {
        row[0]: row[1:]
        for row in db.execute(
            "SELECT id, input, idempotency_key, run_at = %s, priority, queue, concurrency_key, version, trace_context"
            " FROM workflow_executions",
            (at,),
        )
    }
    default = (None, False, 0, "default", None, None, None)
    assert [stored[i] for i in ids] == [
        (0, *default),
        (1, "k1", False, 0, "default", None, None, None),
        (2, None, True, 0, "default", None, None, None),
        (3, None, False, 7, "default", None, None, None),
        (4, None, False, 0, "q1", None, None, None),
        (5, None, False, 0, "default", "c1", None, None),
        (6, None, False, 0, "default", None, "v1", None),
        (9, None, False, 0, "default", None, None, TRACE),
        (7, *default),
        (8, *default),
    ]
