"""Large payloads live out of the hot row (migration 0017): a claim and a heartbeat of an
execution with a 4 KB input write a small WAL record for its row, not the input again.

Read back with pg_walinspect, counting only the records of this database's
workflow_executions heap, so other tests writing WAL at the same time do not count.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg

from kestrel_core import Kestrel
from kestrel_core.dispatch import lease
from kestrel_core.dispatch.claim import claim
from tests.conftest import require_extension
from tests.waiting import wait_for

S = "kestrel"
LEASE = timedelta(minutes=5)
N = 32
# Far below the payload (4 KB of JSON text, ~1.2 KB compressed): what an update of the row
# writes besides its payload is ~300 bytes (the row's other columns and the record header).
BOUND = 512

CREATE_WALINSPECT = "CREATE EXTENSION IF NOT EXISTS pg_walinspect"
INSERT_LSN = "SELECT pg_current_wal_insert_lsn()::text"
FLUSHED = "SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn"
HEAP_NODE = """
SELECT format('/%s/%s ', d.oid, c.relfilenode)
  FROM pg_class c, pg_database d
 WHERE c.oid = 'kestrel.workflow_executions'::regclass AND d.datname = current_database()
"""
# Bytes of the WAL records (full-page images left out: they depend on when the last
# checkpoint ran) that touch the heap: block_ref names it as "rel <tablespace>/<db>/<node> ...".
HEAP_WAL = """
SELECT coalesce(sum(record_length - fpi_length), 0)
  FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
 WHERE block_ref LIKE '%%' || %(node)s || '%%'
"""


def order(size: int) -> dict[str, Any]:
    """An order of about ``size`` bytes of JSON: repeated keys, varied values (compressible,
    as real inputs are)."""
    items: list[dict[str, Any]] = []
    doc: dict[str, Any] = {"customer": "c-000042", "items": items}
    i = 0
    while len(json.dumps(doc)) < size:
        items.append({"sku": f"SKU-{(i * 7919) % 100000:05d}", "qty": i % 7 + 1, "price": f"{(i * 37) % 1000}.99"})
        i += 1
    return doc


def heap_wal(db: psycopg.Connection, node: str, start: str) -> int:
    end = db.execute(INSERT_LSN).fetchone()[0]  # type: ignore[index]
    # Heartbeats commit asynchronously: pg_walinspect reads only flushed WAL.
    wait_for(lambda: db.execute(FLUSHED, (end,)).fetchone()[0], what="the WAL flushed")  # type: ignore[index]
    return int(db.execute(HEAP_WAL, {"start": start, "end": end, "node": node}).fetchone()[0])  # type: ignore[index]


def test_claims_and_heartbeats_do_not_rewrite_a_4kb_input(dsn: str, db: psycopg.Connection) -> None:
    require_extension("pg_walinspect")
    db.execute(CREATE_WALINSPECT)
    doc = order(4096)
    app = Kestrel(dsn)
    app.workflow("w", version="1")(lambda ctx, inp: None)
    with app:
        app.enqueue_many("w", [doc] * N)
    node = db.execute(HEAP_NODE).fetchone()[0]  # type: ignore[index]

    start = db.execute(INSERT_LSN).fetchone()[0]  # type: ignore[index]
    held = claim(db, S, worker_id="w1", names=["w"], n=N, lease=LEASE, versions=["1"])
    claimed = heap_wal(db, node, start)
    # A 4 KB input is read after the claim, not returned by it (tests/core/test_claim_result_size.py).
    assert len(held) == N and all(c.input is None and c.input_later for c in held)

    start = db.execute(INSERT_LSN).fetchone()[0]  # type: ignore[index]
    renewed = lease.heartbeat(db, S, "w1", LEASE, [c.execution_id for c in held]).renewed
    beat = heap_wal(db, node, start)
    assert len(renewed) == N

    assert claimed / N < BOUND and beat / N < BOUND, (claimed / N, beat / N)
