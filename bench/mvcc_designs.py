"""Candidate claim designs for the MVCC study (bench/README.md), measured OUTSIDE the engine, on their own database.

``python -m bench.mvcc_designs [--designs a,a-split,b,c,bc,d] [--hold 90] [--baseline 30]``

Each design is a small set of tables and the statements a worker would run on them: enqueue,
claim a batch (``FOR UPDATE SKIP LOCKED``), renew the lease of what it holds, complete. One
run per design: client threads claim and complete as fast as they can while a feeder keeps a
steady backlog; after a baseline one ``REPEATABLE READ`` session holds its snapshot. Printed
per design: completed workflows (= claims) per second in the baseline and over the last third
of the hold, their ratio, the HOT ratio of the updates, index entries written per workflow
(exact, counted with pageinspect when the hold starts and ends: see bench.mvcc; the per-phase
lines print the upper bound from row writes) and the tables' size.

- ``a``: today's shape: one table holds every state; the claim walks the partial index of
  enqueued rows from its start; input and output JSON in the row.
- ``a-split``: ``a`` with the payloads in a side table (what the hot row alone costs).
- ``b``: a hot table holding only claimable work; the claim DELETEs rows from it (moves them
  to a small ``running`` table), finished history is insert-only elsewhere (PgQ-style).
- ``c``: today's shape, but the claim walk starts past the highest id this process claimed
  (a high-water mark, rescanned from the start once a second and when it finds nothing).
- ``bc``: ``b`` with ``c``'s high-water mark.
- ``d``: rotation: K hot tables; enqueue writes the current one, claims drain the oldest; an
  empty, no-longer-current table is TRUNCATEd (PgQ rotates its event tables the same way),
  which drops its dead tuples whatever the vacuum horizon (tables found drained are skipped
  for a second, rotation every second).

Payloads live in side tables in ``a-split``, ``b``, ``bc`` and ``d``; ``a`` and ``c`` keep them in the row.
FIFO by id only (no priority or run_at in the walk): the point is what the walk crosses.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import psycopg
from psycopg import sql

from .databases import admin_dsn, fresh_database
from .mvcc import CLEAR_STATS, HOLD_END, PAGEINSPECT, count_index_entries
from .report import ratio, table

PAYLOAD = (
    '{"alert": {"pod": "api-1", "namespace": "prod", "labels": {"team": "sre", "tier": "web"}}, '
    '"note": "' + "x" * 160 + '"}'
)
OUTPUT = '{"ok": true, "pr": "https://example.invalid/pr/1", "detail": "' + "y" * 160 + '"}'
LEASE = "30 seconds"

# -- a / a-split / c: today's shape --------------------------------------------------------------
TODAY_DDL = """
CREATE TABLE jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, workflow_name text NOT NULL,
    status text NOT NULL DEFAULT 'enqueued', input jsonb, output jsonb, error text, owner_id text,
    lease_expires timestamptz, claim_epoch bigint NOT NULL DEFAULT 0, priority int NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(), created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(), finished_at timestamptz);
ALTER TABLE jobs SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01);
CREATE INDEX jobs_enqueued ON jobs (priority DESC, run_at, id) WHERE status = 'enqueued';
CREATE INDEX jobs_enqueued_id ON jobs (id) WHERE status = 'enqueued';
CREATE INDEX jobs_running_lease ON jobs (lease_expires) WHERE status = 'running';
CREATE INDEX jobs_running_owner ON jobs (owner_id) WHERE status = 'running';
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_name ON jobs (workflow_name, id);
CREATE TABLE payloads (id bigint PRIMARY KEY, input jsonb, output jsonb);
"""
TODAY_ENQUEUE_ROW = """
INSERT INTO jobs (workflow_name, input) SELECT 'w', %(payload)s::jsonb FROM generate_series(1, %(n)s)
"""
TODAY_ENQUEUE_SPLIT = """
WITH j AS (INSERT INTO jobs (workflow_name) SELECT 'w' FROM generate_series(1, %(n)s) RETURNING id)
INSERT INTO payloads (id, input) SELECT id, %(payload)s::jsonb FROM j
"""
TODAY_CLAIM = """
WITH c AS (SELECT id FROM jobs WHERE status = 'enqueued' AND run_at <= now()
            ORDER BY priority DESC, run_at, id LIMIT %(n)s FOR UPDATE SKIP LOCKED)
UPDATE jobs j SET status = 'running', owner_id = %(worker_id)s, lease_expires = now() + %(lease)s::interval,
       claim_epoch = j.claim_epoch + 1, updated_at = now()
  FROM c WHERE j.id = c.id RETURNING j.id, j.input
"""
CURSOR_CLAIM = """
WITH c AS (SELECT id FROM jobs WHERE status = 'enqueued' AND id > %(after)s
            ORDER BY id LIMIT %(n)s FOR UPDATE SKIP LOCKED)
UPDATE jobs j SET status = 'running', owner_id = %(worker_id)s, lease_expires = now() + %(lease)s::interval,
       claim_epoch = j.claim_epoch + 1, updated_at = now()
  FROM c WHERE j.id = c.id RETURNING j.id, j.input
"""
TODAY_HEARTBEAT = """
UPDATE jobs SET lease_expires = now() + %(lease)s::interval
 WHERE owner_id = %(worker_id)s AND status = 'running'
"""
TODAY_COMPLETE_ROW = """
UPDATE jobs SET status = 'success', output = %(output)s::jsonb, finished_at = now(), updated_at = now(),
       lease_expires = NULL WHERE id = ANY(%(ids)s) AND status = 'running'
"""
TODAY_COMPLETE_SPLIT = """
WITH j AS (UPDATE jobs SET status = 'success', finished_at = now(), updated_at = now(), lease_expires = NULL
            WHERE id = ANY(%(ids)s) AND status = 'running' RETURNING id)
UPDATE payloads p SET output = %(output)s::jsonb FROM j WHERE p.id = j.id
"""

# -- b / bc / d: hot table of claimable work, running, insert-only history ------------------------
HOT_DDL = """
CREATE SEQUENCE execution_ids;
CREATE TABLE {ready} (id bigint PRIMARY KEY, workflow_name text NOT NULL);
CREATE TABLE running (id bigint PRIMARY KEY, workflow_name text NOT NULL, owner_id text NOT NULL,
    lease_expires timestamptz NOT NULL, claim_epoch bigint NOT NULL DEFAULT 1) WITH (fillfactor = 50);
CREATE TABLE history (id bigint PRIMARY KEY, workflow_name text NOT NULL, status text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(), finished_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX history_finished ON history (finished_at);
CREATE TABLE inputs (id bigint PRIMARY KEY, input jsonb);
CREATE TABLE outputs (id bigint PRIMARY KEY, output jsonb);
"""
READY_DDL = "CREATE TABLE {ready} (id bigint PRIMARY KEY, workflow_name text NOT NULL)"
HOT_ENQUEUE = """
WITH r AS (INSERT INTO {ready} (id, workflow_name)
           SELECT nextval('execution_ids'), 'w' FROM generate_series(1, %(n)s) RETURNING id)
INSERT INTO inputs (id, input) SELECT id, %(payload)s::jsonb FROM r
"""
HOT_CLAIM = """
WITH c AS (DELETE FROM {ready} WHERE id IN (
               SELECT id FROM {ready} WHERE id > %(after)s ORDER BY id LIMIT %(n)s FOR UPDATE SKIP LOCKED)
           RETURNING id, workflow_name),
     r AS (INSERT INTO running (id, workflow_name, owner_id, lease_expires)
           SELECT id, workflow_name, %(worker_id)s, now() + %(lease)s::interval FROM c RETURNING id)
SELECT r.id, i.input FROM r JOIN inputs i ON i.id = r.id
"""
# By primary key (the worker knows what it holds): never an index walk over dead entries of
# past owners, and lease_expires is in no index, so the update can be HOT.
HOT_HEARTBEAT = "UPDATE running SET lease_expires = now() + %(lease)s::interval WHERE id = ANY(%(ids)s)"
HOT_COMPLETE = """
WITH d AS (DELETE FROM running WHERE id = ANY(%(ids)s) RETURNING id, workflow_name),
     h AS (INSERT INTO history (id, workflow_name, status) SELECT id, workflow_name, 'success' FROM d RETURNING id)
INSERT INTO outputs (id, output) SELECT id, %(output)s::jsonb FROM h
"""
IS_EMPTY = "SELECT NOT EXISTS (SELECT 1 FROM {ready})"
TRUNCATE = "TRUNCATE {ready}"
LOCK_TIMEOUT = "SET lock_timeout = '200ms'"
ROTATE_TABLES = 3
ROTATE_EVERY_S = 1.0
RESCAN_EVERY_S = 1.0
# Rotation: a table found empty is skipped this long (re-read after: a row whose claim rolled
# back would be found again), so claims do not walk its dead index until it is truncated.
DRAINED_FOR_S = 1.0

HOLD_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ"
HOLD_TAKE = "SELECT txid_current_snapshot()"
ORDERED_PLAN = "SET enable_sort = off"
WRITES = """
SELECT relname, pg_total_relation_size(relid), n_tup_ins, n_tup_upd, n_tup_hot_upd,
       (SELECT count(*) FROM pg_index i WHERE i.indrelid = relid), n_dead_tup
  FROM pg_stat_user_tables WHERE schemaname = 'public'
"""
FLUSH = "SELECT pg_stat_force_next_flush()"


def q(text: str, ready: str = "ready") -> sql.Composed:
    """A statement with its hot table's name (rotation has several) as an identifier."""
    return sql.SQL(text).format(ready=sql.Identifier(ready))


@dataclass
class Design:
    """One candidate: its DDL and statements, and the per-process claim state."""

    key: str
    title: str
    shape: str  # "today" or "hot"
    split_payload: bool = True
    cursor: bool = False
    rotate: bool = False
    hwm: int = 0
    last_rescan: float = 0.0
    current: int = 0  # rotation: the table enqueue writes
    drained: dict[str, float] = field(default_factory=dict)  # rotation: found empty at (monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ready_tables(self) -> list[str]:
        return [f"ready_{i}" for i in range(ROTATE_TABLES)] if self.rotate else ["ready"]

    def setup(self, conn: psycopg.Connection) -> None:
        if self.shape == "today":
            conn.execute(TODAY_DDL)
            return
        first, *rest = self.ready_tables()
        conn.execute(q(HOT_DDL, first))
        for name in rest:
            conn.execute(q(READY_DDL, name))

    def enqueue(self, conn: psycopg.Connection, n: int) -> None:
        params = {"n": n, "payload": PAYLOAD}
        if self.shape == "today":
            conn.execute(TODAY_ENQUEUE_SPLIT if self.split_payload else TODAY_ENQUEUE_ROW, params)
        else:
            conn.execute(q(HOT_ENQUEUE, self.ready_tables()[self.current]), params)

    def _after(self) -> int:
        """Where the claim walk starts: past the high-water mark, or at 0 once a second."""
        if not self.cursor:
            return 0
        with self.lock:
            if time.monotonic() - self.last_rescan > RESCAN_EVERY_S:
                self.last_rescan = time.monotonic()
                return 0
            return self.hwm

    def claim(self, conn: psycopg.Connection, worker_id: str, n: int) -> list[int]:
        params: dict[str, Any] = {"n": n, "worker_id": worker_id, "lease": LEASE}
        if self.shape == "today":
            after = self._after()
            stmt: Any = CURSOR_CLAIM if self.cursor else TODAY_CLAIM
            rows = conn.execute(stmt, {**params, "after": after}).fetchall()
            if not rows and after:
                rows = conn.execute(stmt, {**params, "after": 0}).fetchall()
        elif self.rotate:
            rows = []
            k = len(self.ready_tables())
            current = self.current
            for j in range(1, k + 1):  # the oldest table first, the one being written last
                name = self.ready_tables()[(current + j) % k]
                if j < k and time.monotonic() - self.drained.get(name, -1e9) < DRAINED_FOR_S:
                    continue  # drained, not truncated yet: its index is all dead entries
                rows = conn.execute(q(HOT_CLAIM, name), {**params, "after": 0}).fetchall()
                if rows:
                    break
                if j < k:
                    self.drained[name] = time.monotonic()
        else:
            after = self._after()
            rows = conn.execute(q(HOT_CLAIM), {**params, "after": after}).fetchall()
            if not rows and after:
                rows = conn.execute(q(HOT_CLAIM), {**params, "after": 0}).fetchall()
        ids = [r[0] for r in rows]
        if ids and self.cursor:
            with self.lock:
                self.hwm = max(self.hwm, max(ids))
        return ids

    def heartbeat(self, conn: psycopg.Connection, worker_id: str, ids: list[int]) -> None:
        if self.shape == "today":
            conn.execute(TODAY_HEARTBEAT, {"worker_id": worker_id, "lease": LEASE})
        else:
            conn.execute(HOT_HEARTBEAT, {"ids": ids, "lease": LEASE})

    def complete(self, conn: psycopg.Connection, ids: list[int]) -> None:
        params = {"ids": ids, "output": OUTPUT}
        if self.shape == "today":
            conn.execute(TODAY_COMPLETE_SPLIT if self.split_payload else TODAY_COMPLETE_ROW, params)
        else:
            conn.execute(HOT_COMPLETE, params)

    def rotate_if_due(self, conn: psycopg.Connection) -> None:
        """Truncate the next table if drained, then make it the one enqueue writes."""
        k = len(self.ready_tables())
        nxt = (self.current + 1) % k
        name = self.ready_tables()[nxt]
        if not conn.execute(q(IS_EMPTY, name)).fetchone()[0]:
            return  # claims have not drained it yet: keep writing the current one
        try:
            with conn.transaction():
                conn.execute(LOCK_TIMEOUT)
                conn.execute(q(TRUNCATE, name))
        except psycopg.errors.LockNotAvailable:
            return
        self.current = nxt
        self.drained.pop(name, None)


DESIGNS: dict[str, Callable[[], Design]] = {
    "a": lambda: Design("a", "today: one table, walk from the start, payload in the row", "today", split_payload=False),
    "a-split": lambda: Design("a-split", "today, payloads in a side table", "today"),
    "b": lambda: Design("b", "hot table of claimable work (delete on claim), history apart", "hot"),
    "c": lambda: Design("c", "today's table, walk past a high-water mark", "today", split_payload=False, cursor=True),
    "bc": lambda: Design("bc", "hot table + high-water mark", "hot", cursor=True),
    "d": lambda: Design("d", f"rotation of {ROTATE_TABLES} hot tables (TRUNCATE when drained)", "hot", rotate=True),
}


@dataclass
class Counters:
    inserted: int = 0
    completed: int = 0
    claims: int = 0
    claim_s: float = 0.0
    error: BaseException | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def _client(dsn: str, design: Design, worker_id: str, batch: int, stop: threading.Event, c: Counters) -> None:
    """Claim a batch, renew its lease, complete it; again, until stopped (each its own commit)."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(ORDERED_PLAN)
            last_beat = time.monotonic()
            while not stop.is_set():
                t = time.perf_counter()
                ids = design.claim(conn, worker_id, batch)
                dt = time.perf_counter() - t
                if not ids:
                    stop.wait(0.005)
                    continue
                if time.monotonic() - last_beat > 1.0:
                    design.heartbeat(conn, worker_id, ids)
                    last_beat = time.monotonic()
                design.complete(conn, ids)
                with c.lock:
                    c.completed += len(ids)
                    c.claims += 1
                    c.claim_s += dt
    except BaseException as exc:
        c.error = exc


def _feeder(dsn: str, design: Design, backlog: int, stop: threading.Event, c: Counters) -> None:
    """Keep inserted - completed near ``backlog``; rotate the hot tables when that design does."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            last_rotation = time.monotonic()
            while not stop.is_set():
                missing = backlog - (c.inserted - c.completed)
                if missing > 0:
                    n = min(missing, 1000)
                    design.enqueue(conn, n)
                    c.inserted += n
                if design.rotate and time.monotonic() - last_rotation > ROTATE_EVERY_S:
                    design.rotate_if_due(conn)
                    last_rotation = time.monotonic()
                if missing <= 0:
                    stop.wait(0.02)
    except BaseException as exc:
        c.error = exc


def _writes(conn: psycopg.Connection) -> dict[str, tuple[int, ...]]:
    conn.execute(FLUSH)
    conn.execute(CLEAR_STATS)
    return {r[0]: tuple(int(v) for v in r[1:]) for r in conn.execute(WRITES)}


def _write_figures(a: dict[str, tuple[int, ...]], b: dict[str, tuple[int, ...]], done: int) -> dict[str, Any]:
    upd = hot = entries = 0
    for name, (_size, ins, u, h, nidx, _dead) in b.items():
        old = a.get(name, (0, 0, 0, 0, nidx, 0))
        upd += u - old[2]
        hot += h - old[3]
        entries += ((ins - old[1]) + (u - old[2]) - (h - old[3])) * nidx
    return {
        "hot_pct": round(100.0 * hot / upd, 1) if upd else None,
        "index_entries_per_workflow": round(entries / done, 1) if done else None,
        "updates_per_workflow": round(upd / done, 2) if done else None,
        "mib": round(sum(v[0] for v in b.values()) / 1048576.0, 1),
    }


@dataclass(frozen=True)
class Run:
    """What each design runs: ``clients`` threads claiming ``batch`` rows at a time, the feeder's
    ``backlog``, and the phases (seconds). The command's options are these fields."""

    clients: int = 4
    batch: int = 16
    backlog: int = 5000
    warmup: float = 5.0
    baseline: float = 30.0
    hold: float = 90.0


def run_design(admin: str, key: str, run: Run = Run(), echo: Callable[[str], None] = print) -> dict[str, Any]:
    """One design, one database: baseline, then a held snapshot; claims/s and writes of each."""
    design = DESIGNS[key]()
    with fresh_database(admin, kestrel=False, prefix="kestrel_mvcc_design") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            design.setup(conn)
        c = Counters()
        stop = threading.Event()
        threads = [threading.Thread(target=_feeder, args=(dsn, design, run.backlog, stop, c), daemon=True)]
        threads += [
            threading.Thread(target=_client, args=(dsn, design, f"w{i}", run.batch, stop, c), daemon=True)
            for i in range(run.clients)
        ]
        holder = psycopg.connect(dsn, autocommit=True)
        try:
            for t in threads:
                t.start()
            with psycopg.connect(dsn, autocommit=True) as conn:

                def measure(seconds: float, phase: str) -> dict[str, Any]:
                    w0, n0, k0, s0, t0 = _writes(conn), c.completed, c.claims, c.claim_s, time.monotonic()
                    end = t0 + seconds
                    marks = [(t0, n0)]
                    while time.monotonic() < end:
                        time.sleep(min(1.0, max(0.0, end - time.monotonic())))
                        if c.error is not None:
                            raise RuntimeError(f"{key}: a client failed: {c.error!r}")
                        marks.append((time.monotonic(), c.completed))
                    done = c.completed - n0
                    last_third = [m for m in marks if m[0] >= end - seconds / 3.0]
                    (ta, na), (tb, nb) = last_third[0], marks[-1]
                    out = {
                        "phase": phase,
                        "seconds": round(marks[-1][0] - t0, 1),
                        "wf_per_s": round(done / (marks[-1][0] - t0), 1),
                        "last_third_wf_per_s": round((nb - na) / (tb - ta), 1) if tb > ta else None,
                        "claim_ms": round(1000.0 * (c.claim_s - s0) / (c.claims - k0), 2) if c.claims > k0 else None,
                        **_write_figures(w0, _writes(conn), done),
                    }
                    echo(
                        f"  {key:<8} {phase:<8} {out['wf_per_s']:>9,.1f} wf/s (last third "
                        f"{out['last_third_wf_per_s'] or 0:,.1f})  claim {out['claim_ms']} ms  HOT {out['hot_pct']}%  "
                        f"idx/wf {out['index_entries_per_workflow']}  {out['mib']} MiB"
                    )
                    return out

                conn.execute(PAGEINSPECT)
                measure(run.warmup, "warmup")
                base = measure(run.baseline, "baseline")
                holder.execute(HOLD_BEGIN)
                holder.execute(HOLD_TAKE)
                first = count_index_entries(conn, "public", lambda: c.completed)
                held = measure(run.hold, "hold")
                # nothing removed an entry while the snapshot was held
                last = count_index_entries(conn, "public", lambda: c.completed)
        finally:
            try:
                holder.execute(HOLD_END)
            finally:
                holder.close()
            stop.set()
            for t in threads:
                t.join(timeout=30)
    done = last[1] - first[1]
    by_index = {k: round((v - first[0].get(k, 0)) / done, 2) for k, v in last[0].items()} if done > 0 else {}
    return {
        "design": key,
        "title": design.title,
        "clients": run.clients,
        "batch": run.batch,
        "backlog": run.backlog,
        "baseline": base,
        "hold": held,
        "index_entries_in_hold": {k: v for k, v in by_index.items() if v},
        "index_entries_per_workflow": round(sum(by_index.values()), 1) if done > 0 else None,
        "ratio": ratio(held["last_third_wf_per_s"], base["wf_per_s"]),
    }


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds like ^C: the design's database is dropped


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    p = argparse.ArgumentParser(
        prog="python -m bench.mvcc_designs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--admin-dsn", default=admin_dsn())
    p.add_argument("--designs", default=",".join(DESIGNS), help=f"any of {', '.join(DESIGNS)}")
    p.add_argument("--clients", type=int, default=Run.clients, help="claiming threads (one connection each)")
    p.add_argument("--batch", type=int, default=Run.batch, help="rows per claim")
    p.add_argument("--backlog", type=int, default=Run.backlog)
    p.add_argument("--warmup", type=float, default=Run.warmup)
    p.add_argument("--baseline", type=float, default=Run.baseline)
    p.add_argument("--hold", type=float, default=Run.hold)
    args = p.parse_args(argv)
    run = Run(**{f.name: getattr(args, f.name) for f in fields(Run)})
    keys = [k for k in args.designs.split(",") if k]
    unknown = [k for k in keys if k not in DESIGNS]
    if unknown:
        p.error(f"unknown design {unknown[0]!r}")
    load = [round(v, 2) for v in os.getloadavg()]
    results = [run_design(args.admin_dsn, k, run) for k in keys]
    print(
        table(
            f"Claim designs under a held snapshot ({run.hold:g} s; ratio = last third of the hold / baseline; "
            f"{run.clients} clients x {run.batch} rows, backlog {run.backlog:,})",
            [
                "design",
                "baseline wf/s",
                "hold last third wf/s",
                "ratio",
                "claim ms base / hold",
                "HOT % base / hold",
                "index entries/wf (exact)",
                "MiB after hold",
            ],
            [
                [
                    f"{r['design']}: {r['title']}",
                    r["baseline"]["wf_per_s"],
                    r["hold"]["last_third_wf_per_s"],
                    r["ratio"],
                    f"{r['baseline']['claim_ms']} / {r['hold']['claim_ms']}",
                    f"{r['baseline']['hot_pct']} / {r['hold']['hot_pct']}",
                    r["index_entries_per_workflow"],
                    r["hold"]["mib"],
                ]
                for r in results
            ],
        )
    )
    for r in results:
        print(f"{r['design']}: index entries per workflow by index: {r['index_entries_in_hold']}")
    print(f"load average before {load}, after {[round(v, 2) for v in os.getloadavg()]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
