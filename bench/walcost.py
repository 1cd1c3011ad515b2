"""``python -m bench.walcost``: WAL bytes that one claim, one heartbeat and one completion write
per execution, by payload size, and the HOT ratio of those updates.

Each size gets a fresh migrated database; N executions of a one-step workflow are enqueued with
an input of that size, then claimed (the engine's claim, 16 at a time), heartbeaten (the
engine's heartbeat of all of them, three times), checkpointed (a step boundary writing a step
output of the same size) and completed (the step boundary with an output of the same size, 16
at a time). WAL is read back with ``pg_walinspect`` and only the
records that touch this database's relations are counted, so the other sessions of a shared
server do not blur it; full-page images (the first change of a page after a checkpoint) are
counted apart, since they depend on when the last checkpoint ran.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from kestrel_core import Kestrel
from kestrel_core.dispatch import Claim, claim_executions
from kestrel_core.dispatch import heartbeat as renew_leases
from kestrel_core.durable import Attempt, Boundary, Completion, Finish, write_boundaries

from .databases import admin_dsn, fresh_database

SCHEMA = "kestrel"
OWNER = "walcost"
LEASE = timedelta(minutes=5)
NAME = "walcost"

LSN = "SELECT pg_current_wal_insert_lsn()::text"
FLUSHED = "SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn"
# Relations of this database by relfilenode: the table, its TOAST table, its indexes.
RELATIONS = """
SELECT c.relfilenode::text,
       CASE WHEN c.oid = 'kestrel.workflow_executions_p0'::regclass THEN 'heap'
            WHEN c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = 'kestrel.workflow_executions_p0'::regclass)
              OR c.oid = (SELECT i.indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
                           WHERE t.oid = (SELECT reltoastrelid FROM pg_class
                                           WHERE oid = 'kestrel.workflow_executions_p0'::regclass))
              THEN 'toast'
            WHEN c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'kestrel.workflow_executions_p0'::regclass)
              THEN 'indexes'
            ELSE 'other' END
  FROM pg_class c WHERE c.relfilenode <> 0
"""
DATABASE_OID = "SELECT oid::text FROM pg_database WHERE datname = current_database()"
# One row per WAL record of the range: its length, its full-page images' length, the blocks.
RECORDS = """
SELECT record_length, fpi_length, coalesce(block_ref, '')
  FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn)
"""
UPDATES = """
SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
 WHERE relid = 'kestrel.workflow_executions_p0'::regclass
"""
# The hot table's rows live in its first range's partition on a fresh database (migration 0022:
# a partitioned table has no storage of its own, no statistics, no storage options).
SET_TOAST_TARGET = "ALTER TABLE kestrel.workflow_executions_p0 SET (toast_tuple_target = {})"
FORCE_FLUSH = "SELECT pg_stat_force_next_flush()"
CLEAR_SNAPSHOT = "SELECT pg_stat_clear_snapshot()"
INPUT_SIZE = """
SELECT avg(pg_column_size(input))::int, avg(octet_length(input::text))::int FROM kestrel.workflow_executions
"""


def payload(size: int) -> dict[str, Any]:
    """JSON of about ``size`` bytes shaped like an order: repeated keys, varied values (it
    compresses as real inputs do)."""
    items: list[dict[str, Any]] = []
    doc: dict[str, Any] = {"customer": "c-000042", "items": items}
    i = 0
    while len(json.dumps(doc)) < size - 60:
        items.append({"sku": f"SKU-{(i * 7919) % 100000:05d}", "qty": i % 7 + 1, "price": f"{(i * 37) % 1000}.99"})
        i += 1
    return doc


class WalReader:
    """WAL of this database between two points, split by relation kind."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        db = conn.execute(DATABASE_OID).fetchone()
        assert db is not None
        self.prefix = f"/{db[0]}/"
        self.kinds = dict(conn.execute(RELATIONS).fetchall())

    def mark(self) -> str:
        row = self.conn.execute(LSN).fetchone()
        assert row is not None
        return str(row[0])

    def since(self, start: str) -> dict[str, int]:
        """Bytes by kind (heap, toast, indexes, other) and full-page images, since ``start``."""
        end = self.mark()
        deadline = time.monotonic() + 10
        while not self.conn.execute(FLUSHED, (end,)).fetchone()[0]:  # type: ignore[index]
            if time.monotonic() > deadline:
                raise TimeoutError("WAL not flushed")
            time.sleep(0.05)
        out = {"heap": 0, "toast": 0, "indexes": 0, "other": 0, "fpi": 0}
        for length, fpi, refs in self.conn.execute(RECORDS, (start, end)).fetchall():
            if self.prefix not in refs:
                continue
            node = refs.split(self.prefix, 1)[1].split()[0].rstrip(",")
            out[self.kinds.get(node, "other")] += length - fpi
            out["fpi"] += fpi
        return out


def updates(reader: psycopg.Connection, writer: psycopg.Connection) -> tuple[int, int]:
    writer.execute(FORCE_FLUSH)
    writer.execute("SELECT 1")
    reader.execute(CLEAR_SNAPSHOT)
    row = reader.execute(UPDATES).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def measure(dsn: str, size: int, n: int, toast_target: int | None = None) -> dict[str, Any]:
    doc = payload(size)
    app = Kestrel(dsn)
    app.workflow(NAME, version="1")(lambda ctx, inp: None)
    with app, psycopg.connect(dsn, autocommit=True) as conn, psycopg.connect(dsn, autocommit=True) as stats:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        if toast_target is not None:
            conn.execute(sql.SQL(SET_TOAST_TARGET).format(sql.Literal(toast_target)))
        app.enqueue_many(NAME, [doc] * n)
        wal = WalReader(conn)
        stored, text = conn.execute(INPUT_SIZE).fetchone()  # type: ignore[misc]
        result: dict[str, Any] = {"size": size, "input_text_bytes": text, "input_stored_bytes": stored, "n": n}
        held: list[Claim] = []

        def claim() -> int:
            while len(held) < n:
                got = claim_executions(conn, SCHEMA, worker_id=OWNER, names=[NAME], n=16, lease=LEASE, versions=["1"])
                if not got:
                    raise RuntimeError("nothing to claim")
                held.extend(got)
            return n

        def heartbeat() -> int:
            for _ in range(3):
                renew_leases(conn, SCHEMA, OWNER, LEASE, [c.execution_id for c in held])
            return 3 * n

        def checkpoint() -> int:
            for i in range(0, n, 16):
                batch = [
                    Boundary(
                        c.execution_id,
                        OWNER,
                        c.claim_epoch,
                        finish=Finish("step", Attempt(1, None), Jsonb(doc), elapsed=0.001),
                    )
                    for c in held[i : i + 16]
                ]
                write_boundaries(conn, SCHEMA, batch)
            return n

        def complete() -> int:
            for i in range(0, n, 16):
                batch = [
                    Boundary(c.execution_id, OWNER, c.claim_epoch, complete=Completion("success", Jsonb(doc)))
                    for c in held[i : i + 16]
                ]
                write_boundaries(conn, SCHEMA, batch)
            return n

        phases: list[tuple[str, Callable[[], int]]] = [
            ("claim", claim),
            ("heartbeat", heartbeat),
            ("checkpoint", checkpoint),
            ("complete", complete),
        ]
        for label, run in phases:
            upd0, hot0 = updates(stats, conn)
            start = wal.mark()
            rows = run()
            by_kind = wal.since(start)
            upd1, hot1 = updates(stats, conn)
            total = sum(v for k, v in by_kind.items() if k != "fpi")
            result[label] = {
                "bytes_per_row": round(total / rows),
                "heap_per_row": round(by_kind["heap"] / rows),
                "toast_per_row": round(by_kind["toast"] / rows),
                "indexes_per_row": round(by_kind["indexes"] / rows),
                "other_per_row": round(by_kind["other"] / rows),
                "fpi_per_row": round(by_kind["fpi"] / rows),
                "updates": upd1 - upd0,
                "hot": hot1 - hot0,
            }
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.walcost", description=__doc__)
    p.add_argument("--sizes", default="200,2000,4000", help="input/output JSON sizes, bytes")
    p.add_argument("-n", type=int, default=256, help="executions per size")
    p.add_argument(
        "--toast-tuple-target",
        type=int,
        help="set workflow_executions' toast_tuple_target first (2032: the default before migration 17)",
    )
    args = p.parse_args(argv)
    print(
        f"{'size':>6} {'stored':>6}  {'phase':<10} {'WAL B/row':>9} {'heap':>6} {'toast':>6}"
        f" {'index':>6} {'other':>6} {'FPI':>6} {'HOT':>9}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        with fresh_database(admin_dsn(), prefix="kestrel_walcost") as dsn:
            r = measure(dsn, size, args.n, args.toast_tuple_target)
        for label in ("claim", "heartbeat", "checkpoint", "complete"):
            m = r[label]
            print(
                f"{r['input_text_bytes']:>6} {r['input_stored_bytes']:>6}  {label:<10} {m['bytes_per_row']:>9}"
                f" {m['heap_per_row']:>6} {m['toast_per_row']:>6} {m['indexes_per_row']:>6}"
                f" {m['other_per_row']:>6} {m['fpi_per_row']:>6} {m['hot']:>4}/{m['updates']:<4}"
            )


if __name__ == "__main__":
    main()
