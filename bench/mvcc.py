"""Full load under a held snapshot (``mvcc``) and over a growing history (``soak``).

Both run W worker processes (bench.worker) at concurrency C while a feeder keeps the live
backlog (enqueued + running) near a set level, and sample every ``interval`` seconds:
throughput, on-disk sizes (each table with its indexes, each index), dead tuples, the HOT
ratio of the updates, index entries and commits per workflow.

- ``mvcc``: warm-up (discarded), baseline, then ONE ``REPEATABLE READ`` session holds its
  snapshot (so vacuum may remove nothing newer) for ``hold`` seconds, then releases it, then a
  recovery phase. The verdict: throughput over the last minute of the hold / baseline (the
  target is >= 0.8x), both measured in this run.
- ``soak``: retention on (each worker prunes finished executions older than ``retention``);
  throughput and size per interval, first-k vs last-k minutes (k = 5, or half a short run).

Finished = inserted by the feeder - live, so deletes by ``prune`` do not disturb the count.
Index entries per workflow is an upper bound from row writes (pg_stat_user_tables):
inserts and non-HOT updates x the table's indexes (a partial index whose predicate the new
row misses gets no entry); HOT updates write none.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from kestrel_core.db import render
from kestrel_core.dispatch import enqueue_many, ensure_partitions

from .background import Background
from .databases import fresh_database, server_settings
from .procs import Proc, kestrel_worker, stop_all, wait_registered
from .report import ratio, table
from .throughput import SCHEMA, warm_up
from .workloads import NOOP1

FEED_BATCH = 1000
FEED_POLL_S = 0.5  # the backlog (8,000) outlasts it at 5,000 wf/s; each count reads dead rows in a hold
# Each live state through its own partial index (one count over both may plan a seq scan).
LIVE = """
SELECT (SELECT count(*) FROM {schema}.workflow_executions WHERE status = 'enqueued')
     + (SELECT count(*) FROM {schema}.workflow_executions WHERE status = 'running')
"""
# Under a held snapshot LIVE walks every dead version of the live rows: 5 ms a count before
# the hold, 156 ms a minute into it (bench mvcc at 5,000 wf/s), five counts a second, which
# took a third of a core from the workers and counted in their slowdown. The held-snapshot run
# counts what finished from the engine's counters instead (a few rows); retention subtracts
# the ranges it drops from them, so the soak keeps LIVE (and has no held snapshot).
FINISHED = "SELECT coalesce(sum(n), 0)::bigint FROM {schema}.execution_counts"
COMMITS = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
# Per table of the schema: heap + TOAST + indexes, dead tuples, cumulative row writes, indexes,
# and the table it is a partition of (itself when not one: a partition's figures count under its
# table; a dropped partition takes its counters with it, so deltas are taken per partition).
TABLES = """
SELECT c.relname, pg_total_relation_size(c.oid), coalesce(s.n_dead_tup, 0),
       coalesce(s.n_tup_ins, 0), coalesce(s.n_tup_upd, 0), coalesce(s.n_tup_hot_upd, 0),
       coalesce(s.n_tup_del, 0), (SELECT count(*) FROM pg_index i WHERE i.indrelid = c.oid),
       coalesce(pg_partition_root(c.oid), c.oid)::regclass::text
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
 WHERE n.nspname = %(schema)s AND c.relkind = 'r'
"""
INDEXES = """
SELECT c.relname, pg_relation_size(c.oid)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = %(schema)s AND c.relkind = 'i'
 ORDER BY pg_relation_size(c.oid) DESC
"""
DATABASE_SIZE = "SELECT pg_database_size(current_database())"
# Statistics are cached per transaction; clear, so each sample reads the current counters.
CLEAR_STATS = "SELECT pg_stat_clear_snapshot()"
HOLD_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ"
# Any read takes the transaction's snapshot; its xmin then pins the vacuum horizon.
HOLD_TAKE = "SELECT count(*) FROM {schema}.workers"
HOLD_XMIN = "SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = %s"
HOLD_END = "ROLLBACK"
HOT_TABLE = "workflow_executions"
# Exact index entries (heap TIDs on btree leaf pages, posting lists expanded), by index, with
# pageinspect. Counted when the hold starts and before it ends: while the snapshot is held
# nothing may remove an entry (vacuum, LP_DEAD marking and bottom-up deletion all respect the
# horizon), so the difference is what was written. Seconds per count on a few hundred MiB.
PAGEINSPECT = "CREATE EXTENSION IF NOT EXISTS pageinspect"
INDEX_ENTRIES = """
SELECT p.relname, count(*) FILTER (WHERE i.tids IS NULL) + coalesce(sum(cardinality(i.tids)), 0)
  FROM (SELECT c.oid::regclass::text AS rel, c.relname, b.blkno, s.btpo_next <> 0 AS has_high_key
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_am a ON a.oid = c.relam
         CROSS JOIN LATERAL generate_series(1, pg_relation_size(c.oid) / current_setting('block_size')::int - 1)
               AS b(blkno)
         CROSS JOIN LATERAL bt_page_stats(c.oid::regclass::text, b.blkno) s
         WHERE n.nspname = %(schema)s AND c.relkind = 'i' AND a.amname = 'btree' AND s.type = 'l'
        OFFSET 0) p
 CROSS JOIN LATERAL bt_page_items(p.rel, p.blkno) i
 WHERE i.htid IS NOT NULL AND NOT (p.has_high_key AND i.itemoffset = 1)  -- a page's high key
 GROUP BY p.relname
"""
MIB = 1024.0 * 1024.0
PLATEAU_GROWTH = 0.05


@dataclass
class Sample:
    """The counters at one moment of a run."""

    t: float
    phase: str
    finished: int
    commits: int
    tables: dict[str, tuple[int, int, int, int, int, int, int]]  # size, dead, ins, upd, hot, del, indexes
    roots: dict[str, str]  # table or partition -> the table it belongs to (schema-qualified or not)
    indexes: dict[str, int]
    database_bytes: int


@dataclass
class Feeder(Background):
    """Keeps the live backlog near ``backlog`` from its own thread; counts what finished."""

    thread_name = "feeder"
    dsn: str
    backlog: int
    workflow: str = NOOP1
    from_counters: bool = False  # count what finished from execution_counts, not live rows
    inserted: int = 0
    finished: int = 0
    error: BaseException | None = None

    def _run(self) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                live_sql, finished_sql = render(LIVE, SCHEMA), render(FINISHED, SCHEMA)
                before = conn.execute(finished_sql).fetchone()[0]  # the warm-up's, all finished
                while not self._stop.is_set():
                    if self.from_counters:
                        self.finished = conn.execute(finished_sql).fetchone()[0] - before
                        live = self.inserted - self.finished
                    else:
                        live = conn.execute(live_sql).fetchone()[0]
                        self.finished = self.inserted - live
                    missing = self.backlog - live
                    while missing > 0 and not self._stop.is_set():
                        k = min(missing, FEED_BATCH)
                        enqueue_many(conn, SCHEMA, self.workflow, [{"i": self.inserted + i} for i in range(k)])
                        self.inserted += k
                        missing -= k
                    self._stop.wait(FEED_POLL_S)
        except BaseException as exc:  # the main loop reports it
            self.error = exc


def sample(conn: psycopg.Connection, phase: str, feeder: Feeder) -> Sample:
    """Read every counter the report needs (one round trip each, autocommit)."""
    conn.execute(CLEAR_STATS)
    # A partition retention dropped between the catalog read and its size has a NULL size.
    rows = [r for r in conn.execute(TABLES, {"schema": SCHEMA}).fetchall() if None not in r[1:8]]
    tables = {r[0]: tuple(int(v) for v in r[1:8]) for r in rows}
    roots = {r[0]: r[8].rpartition(".")[2] for r in rows}
    indexes = {r[0]: int(r[1]) for r in conn.execute(INDEXES, {"schema": SCHEMA}) if r[1] is not None}
    return Sample(
        time.monotonic(),
        phase,
        feeder.finished,
        int(conn.execute(COMMITS).fetchone()[0]),
        tables,
        roots,
        indexes,
        int(conn.execute(DATABASE_SIZE).fetchone()[0]),
    )  # type: ignore[arg-type]


def interval_row(a: Sample, b: Sample, t0: float) -> dict[str, Any]:
    """What happened between two samples: rates, sizes at the end, writes per workflow."""
    done = b.finished - a.finished
    dt = b.t - a.t
    upd = hot = entries = deleted = 0
    for name, (_size, _dead, ins, u, h, dels, nidx) in b.tables.items():
        old = a.tables.get(name, (0, 0, 0, 0, 0, 0, nidx))
        d_ins, d_upd, d_hot = ins - old[2], u - old[3], h - old[4]
        entries += (d_ins + d_upd - d_hot) * nidx
        if b.roots.get(name, name) == HOT_TABLE:
            upd, hot, deleted = upd + d_upd, hot + d_hot, deleted + dels - old[5]
    # Rows of the hot table's partitions dropped since the last sample: retention by partition.
    dropped = [v for k, v in a.tables.items() if k not in b.tables and a.roots.get(k, k) == HOT_TABLE]
    hot_parts = [v for k, v in b.tables.items() if b.roots.get(k, k) == HOT_TABLE]
    hot_table = (sum(v[0] for v in hot_parts), sum(v[1] for v in hot_parts))
    return {
        "t_s": round(b.t - t0, 1),
        "phase": b.phase,
        "finished": done,
        "workflows_per_s": round(done / dt, 1) if dt > 0 else None,
        "hot_table_mib": round(hot_table[0] / MIB, 1),
        "hot_table_indexes_mib": round(sum(v for k, v in b.indexes.items() if k.startswith(HOT_TABLE)) / MIB, 1),
        "schema_mib": round(sum(v[0] for v in b.tables.values()) / MIB, 1),
        "database_mib": round(b.database_bytes / MIB, 1),
        "dead_tuples": sum(v[1] for v in b.tables.values()),
        "hot_table_dead_tuples": hot_table[1],
        "hot_pct": round(100.0 * hot / upd, 1) if upd else None,
        "deleted": deleted,
        "partitions": len(hot_parts),
        "partitions_dropped": len(dropped),
        "index_entries_per_workflow": round(entries / done, 1) if done else None,
        "commits_per_workflow": round((b.commits - a.commits) / done, 2) if done else None,
        "indexes_mib": {k: round(v / MIB, 2) for k, v in b.indexes.items()},
    }


@dataclass(frozen=True)
class Load:
    """The full load both runs keep: ``workers`` processes at ``concurrency`` each, and the
    live backlog the feeder holds."""

    workers: int = 2
    concurrency: int = 64
    backlog: int = 8000


@contextmanager
def full_load(
    admin: str,
    load: Load,
    *,
    worker_args: dict[str, Any] | None = None,
    setup: Callable[[psycopg.Connection], None] | None = None,
    from_counters: bool = False,
) -> Iterator[tuple[str, Feeder, list[Proc]]]:
    """A fresh database (``setup`` run on it first), warmed workers and a running feeder
    (``Feeder.from_counters``); everything stopped on exit."""
    with fresh_database(admin) as dsn:
        if setup is not None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                setup(conn)
        ids = [f"mvcc-w{i}" for i in range(load.workers)]
        procs = [kestrel_worker(dsn, worker_id=wid, concurrency=load.concurrency, **(worker_args or {})) for wid in ids]
        feeder = Feeder(dsn, load.backlog, from_counters=from_counters)
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                wait_registered(dsn, procs, ids)
                warm_up(conn, procs, load.workers * load.concurrency * 2)
            feeder.start()
            yield dsn, feeder, procs
        finally:
            feeder.stop()
            stop_all(procs)


def _run_phases(
    dsn: str,
    feeder: Feeder,
    procs: list[Proc],
    phases: list[tuple[str, float]],
    interval: float,
    on_phase: Callable[[str], None],
    echo: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Sample every ``interval`` s through the phases (name, seconds); ``on_phase`` at each start."""
    rows: list[dict[str, Any]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        t0 = time.monotonic()
        last = sample(conn, phases[0][0], feeder)
        for name, seconds in phases:
            on_phase(name)
            end = time.monotonic() + seconds
            while time.monotonic() < end - 0.01:
                due = min(last.t + interval, end)
                while (left := due - time.monotonic()) > 0:  # short sleeps: notice a dead process
                    time.sleep(min(left, 0.5))
                    if feeder.error is not None:
                        raise RuntimeError(f"the feeder failed: {feeder.error!r}")
                    for p in procs:
                        p.check_alive()
                cur = sample(conn, name, feeder)
                row = interval_row(last, cur, t0)
                row["dt_s"] = round(cur.t - last.t, 2)
                rows.append(row)
                echo(
                    f"  {row['t_s']:>7.1f}s {name:<9} {fmt_rate(row['workflows_per_s']):>8} wf/s  "
                    f"{HOT_TABLE} {row['hot_table_mib']:,.1f} MiB (indexes {row['hot_table_indexes_mib']:,.1f})  "
                    f"dead {row['dead_tuples']:,}  HOT {fmt_rate(row['hot_pct'])}%  "
                    f"idx/wf {fmt_rate(row['index_entries_per_workflow'])}  "
                    f"commits/wf {fmt_rate(row['commits_per_workflow'])}"
                )
                last = cur
    return rows


def fmt_rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def interval_table(title: str, rows: list[dict[str, Any]]) -> str:
    return table(
        title,
        [
            "t s",
            "phase",
            "wf/s",
            f"{HOT_TABLE} MiB (all)",
            "its indexes MiB",
            "schema MiB",
            "dead tuples",
            "HOT %",
            "index entries/wf",
            "commits/wf",
        ],
        [
            [
                r["t_s"],
                r["phase"],
                r["workflows_per_s"],
                r["hot_table_mib"],
                r["hot_table_indexes_mib"],
                r["schema_mib"],
                r["dead_tuples"],
                r["hot_pct"],
                r["index_entries_per_workflow"],
                r["commits_per_workflow"],
            ]
            for r in rows
        ],
    )


def index_table(rows: list[dict[str, Any]], columns: int = 8) -> str:
    """Each index's size (MiB) at up to ``columns`` evenly spread sample times."""
    if not rows:
        return "no samples"
    step = max(1, len(rows) // columns)
    picked = rows[step - 1 :: step][-columns:]
    if picked[-1] is not rows[-1]:
        picked = [*picked[1:], rows[-1]]
    names = sorted(rows[-1]["indexes_mib"], key=lambda k: -rows[-1]["indexes_mib"][k])
    return table(
        "Index sizes, MiB (at t s)",
        ["index", *[f"{r['t_s']:.0f} {r['phase']}" for r in picked]],
        [[n, *[r["indexes_mib"].get(n) for r in picked]] for n in names],
    )


def rate_over(rows: list[dict[str, Any]]) -> float | None:
    """Total finished / total seconds of these intervals."""
    span = sum(r["dt_s"] for r in rows)
    return round(sum(r["finished"] for r in rows) / span, 1) if span > 0 else None


def count_index_entries(
    conn: psycopg.Connection, schema: str, finished: Callable[[], float]
) -> tuple[dict[str, int], float]:
    """Heap TIDs per btree index of ``schema`` (pageinspect), and ``finished()``, the workflows
    finished so far, at the count's midpoint: the count takes a while under load."""
    before = finished()
    counts = {r[0]: int(r[1]) for r in conn.execute(INDEX_ENTRIES, {"schema": schema})}
    return counts, (before + finished()) / 2.0


def entries_written(start: tuple[dict[str, int], float], end: tuple[dict[str, int], float]) -> dict[str, Any]:
    """Index entries per workflow between two counts, in total and by index (largest first)."""
    done = end[1] - start[1]
    if done <= 0:
        return {"workflows": 0, "per_workflow": None, "by_index": {}}
    by = {k: round((v - start[0].get(k, 0)) / done, 2) for k, v in end[0].items()}
    by = {k: v for k, v in sorted(by.items(), key=lambda kv: -kv[1]) if v}
    return {"workflows": int(done), "per_workflow": round(sum(by.values()), 1), "by_index": by}


def load_average() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


@dataclass(frozen=True)
class Phases:
    """``mvcc``'s phases (seconds) and its sampling interval."""

    warmup: float = 10.0
    baseline: float = 60.0
    hold: float = 300.0
    after: float = 30.0
    interval: float = 10.0

    def in_order(self) -> list[tuple[str, float]]:
        """(name, seconds) of each phase, as ``_run_phases`` takes them."""
        return [("warmup", self.warmup), ("baseline", self.baseline), ("hold", self.hold), ("after", self.after)]


def run_mvcc(
    admin: str, load: Load = Load(), phases: Phases = Phases(), echo: Callable[[str], None] = print
) -> dict[str, Any]:
    """Baseline, then a held REPEATABLE READ snapshot, then released: rates and sizes per interval."""
    holder: list[psycopg.Connection] = []
    checks: list[bool] = []
    load_before = load_average()
    autovacuum = autovacuum_on(admin, echo)
    with full_load(admin, load, from_counters=True) as (dsn, feeder, procs):

        def holds_snapshot(conn: psycopg.Connection) -> bool:
            with psycopg.connect(dsn, autocommit=True) as probe:
                return bool(probe.execute(HOLD_XMIN, (conn.info.backend_pid,)).fetchone()[0])

        def on_phase(name: str) -> None:
            if name == "hold":
                conn = psycopg.connect(dsn, autocommit=True)
                holder.append(conn)
                conn.execute(HOLD_BEGIN)
                conn.execute(render(HOLD_TAKE, SCHEMA))
                if not holds_snapshot(conn):
                    raise RuntimeError("the REPEATABLE READ session holds no snapshot")
                if counter is not None:
                    counts.append(count_index_entries(counter, SCHEMA, lambda: feeder.finished))
            elif holder:
                if counter is not None:
                    counts.append(count_index_entries(counter, SCHEMA, lambda: feeder.finished))
                checks.append(holds_snapshot(holder[0]))  # still held at the end of the hold
                release(holder)

        counts: list[tuple[dict[str, int], float]] = []
        counter: psycopg.Connection | None = psycopg.connect(dsn, autocommit=True)
        try:
            counter.execute(PAGEINSPECT)
        except psycopg.Error as exc:  # not installed, or not allowed: the upper bound stays
            echo(f"exact index entries skipped: {str(exc).strip()}")
            counter.close()
            counter = None
        try:
            rows = _run_phases(dsn, feeder, procs, phases.in_order(), phases.interval, on_phase, echo)
        finally:
            release(holder)
            if counter is not None:
                counter.close()
    base = [r for r in rows if r["phase"] == "baseline"]
    held = [r for r in rows if r["phase"] == "hold"]
    hold_end = held[-1]["t_s"] if held else 0.0
    last_minute = [r for r in held if r["t_s"] > hold_end - min(60.0, phases.hold) + 0.5] or held[-1:]
    result = {
        "workers": load.workers,
        "concurrency": load.concurrency,
        "backlog": load.backlog,
        "warmup_s": phases.warmup,
        "baseline_s": phases.baseline,
        "hold_s": phases.hold,
        "autovacuum": autovacuum,
        "held_to_the_end": checks == [True],
        "after_s": phases.after,
        "interval_s": phases.interval,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "baseline_wf_per_s": rate_over(base),
        "hold_last_minute_wf_per_s": rate_over(last_minute),
        "last_minute_s": round(sum(r["dt_s"] for r in last_minute), 1),
        "after_wf_per_s": rate_over([r for r in rows if r["phase"] == "after"]),
        "intervals": rows,
        "index_entries_in_hold": entries_written(counts[0], counts[1]) if len(counts) == 2 else None,
    }
    result["ratio"] = ratio(result["hold_last_minute_wf_per_s"], result["baseline_wf_per_s"])
    echo(
        interval_table(
            f"Held snapshot: {load.workers} worker(s) x concurrency {load.concurrency}, backlog {load.backlog:,}, "
            f"hold {phases.hold:.0f} s",
            rows,
        )
    )
    echo(index_table(rows))
    exact = result["index_entries_in_hold"]
    if exact and exact["per_workflow"] is not None:
        echo(
            table(
                f"Index entries written per workflow during the hold (exact, pageinspect; "
                f"{exact['workflows']:,} workflows): {exact['per_workflow']}",
                ["index", "entries/wf"],
                list(exact["by_index"].items()),
            )
        )
    echo(f"load average before {load_before}, after {result['load_average_after']}")
    echo(
        f"last {result['last_minute_s']:.0f} s of the hold / baseline: {fmt_rate(result['hold_last_minute_wf_per_s'])}"
        f" / {fmt_rate(result['baseline_wf_per_s'])} wf/s = {result['ratio']}x (target >= 0.8x)"
    )
    return result


def release(holder: list[psycopg.Connection]) -> None:
    """End the REPEATABLE READ session (never leave it open)."""
    while holder:
        conn = holder.pop()
        try:
            conn.execute(HOLD_END)
        finally:
            conn.close()


# The soak's history ranges: a size the retention spans several of, and the ids moved
# past the ranges migrate made at the default size (a fresh database: they are empty, and
# retention drops them a minute later), so every range the run fills has the soak's size.
RANGE_SIZE = "UPDATE {schema}.history_settings SET range_size = %s"
PAST_THE_RANGES = """
SELECT setval(pg_get_serial_sequence('{schema}.workflow_executions', 'id'),
              (SELECT max(hi) FROM {schema}.history_partitions), false)
"""
SOAK_RANGE_SIZE = 100_000


def sized_ranges(range_size: int) -> Callable[[psycopg.Connection], None]:
    """``full_load``'s setup: history ranges of ``range_size`` ids from the first enqueue on."""

    def setup(conn: psycopg.Connection) -> None:
        conn.execute(render(RANGE_SIZE, SCHEMA), (range_size,))
        conn.execute(render(PAST_THE_RANGES, SCHEMA))
        ensure_partitions(conn, SCHEMA)

    return setup


NO_AUTOVACUUM = (
    "warning: autovacuum is off on this server (see pg_settings' sourcefile): dead rows are never "
    "cleaned up here, so sizes and dead tuples do not show what a production server would"
)


def autovacuum_on(admin: str, echo: Callable[[str], None]) -> bool:
    """Whether the server runs autovacuum; says so in a warning line when it does not."""
    on = server_settings(admin)["autovacuum"] == "on"
    if not on:
        echo(NO_AUTOVACUUM)
    return on


@dataclass(frozen=True)
class Soak:
    """``soak``'s length, retention and sampling; ``window``: the first and last stretch compared;
    ``range_size``: ids per history range (history_settings.range_size)."""

    minutes: float = 30.0
    retention: float = 120.0
    prune_every: float = 10.0
    interval: float = 60.0
    window: float = 300.0
    range_size: int = SOAK_RANGE_SIZE


def run_soak(
    admin: str, load: Load = Load(), soak: Soak = Soak(), echo: Callable[[str], None] = print
) -> dict[str, Any]:
    """Full load with retention on for ``minutes``: rate and size per interval, first vs last window."""
    load_before = load_average()
    autovacuum = autovacuum_on(admin, echo)
    worker_args = {"prune_older_than": soak.retention, "prune_every": soak.prune_every}
    with full_load(admin, load, worker_args=worker_args, setup=sized_ranges(soak.range_size)) as (dsn, feeder, procs):
        rows = _run_phases(dsn, feeder, procs, [("soak", soak.minutes * 60.0)], soak.interval, lambda _: None, echo)
    total = sum(r["dt_s"] for r in rows)
    window = min(soak.window, total / 2.0)
    first, acc = [], 0.0
    for r in rows:
        if acc >= window - 0.5:
            break
        first.append(r)
        acc += r["dt_s"]
    last, acc = [], 0.0
    for r in reversed(rows):
        if acc >= window - 0.5:
            break
        last.insert(0, r)
        acc += r["dt_s"]
    result = {
        "minutes": soak.minutes,
        "workers": load.workers,
        "concurrency": load.concurrency,
        "backlog": load.backlog,
        "retention_s": soak.retention,
        "prune_every_s": soak.prune_every,
        "range_size": soak.range_size,
        "autovacuum": autovacuum,
        "interval_s": soak.interval,
        "window_s": round(window, 1),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "first_wf_per_s": rate_over(first),
        "last_wf_per_s": rate_over(last),
        "intervals": rows,
    }
    result["ratio"] = ratio(result["last_wf_per_s"], result["first_wf_per_s"])
    before_last = rows[len(rows) - len(last) - 1]["database_mib"] if len(last) < len(rows) else rows[0]["database_mib"]
    result["last_window_growth_mib"] = round(rows[-1]["database_mib"] - before_last, 1)
    # A plateau: the database's peak over the last third of the run is less than PLATEAU_GROWTH
    # above its peak over the middle third. Peaks, not the end against the window's start:
    # retention drops whole ranges, so the size saws up and down, and where in a tooth the run
    # ends would decide.
    third = max(1, len(rows) // 3)
    middle, final = rows[-2 * third : -third] or rows[:1], rows[-third:]
    result["peak_middle_third_mib"] = max(r["database_mib"] for r in middle)
    result["peak_last_third_mib"] = max(r["database_mib"] for r in final)
    result["peak_growth_mib"] = round(result["peak_last_third_mib"] - result["peak_middle_third_mib"], 1)
    result["plateau"] = result["peak_growth_mib"] < PLATEAU_GROWTH * result["peak_last_third_mib"]
    echo(
        interval_table(
            f"Soak: {load.workers} worker(s) x concurrency {load.concurrency}, backlog {load.backlog:,}, "
            f"retention {soak.retention:.0f} s, history ranges of {soak.range_size:,} ids, {soak.minutes:g} min",
            rows,
        )
    )
    echo(
        table(
            "On-disk size per interval",
            ["t s", "database MiB", "schema MiB", f"{HOT_TABLE} MiB", "its partitions", "dropped", "rows deleted"],
            [
                [
                    r["t_s"],
                    r["database_mib"],
                    r["schema_mib"],
                    r["hot_table_mib"],
                    r["partitions"],
                    r["partitions_dropped"],
                    r["deleted"],
                ]
                for r in rows
            ],
        )
    )
    echo(
        f"database size, peak of the last third of the run against the middle third: "
        f"{result['peak_last_third_mib']:,.1f} / {result['peak_middle_third_mib']:,.1f} MiB, "
        f"{result['peak_growth_mib']:+,.1f} MiB ({'a plateau' if result['plateau'] else 'still growing'}: "
        f"plateau = under {PLATEAU_GROWTH:.0%} of its size); over the last {window:.0f} s: "
        f"{result['last_window_growth_mib']:+,.1f} MiB"
    )
    echo(f"load average before {load_before}, after {result['load_average_after']}")
    echo(
        f"last {window:.0f} s / first {window:.0f} s: {fmt_rate(result['last_wf_per_s'])} / "
        f"{fmt_rate(result['first_wf_per_s'])} wf/s = {result['ratio']}x (target >= 0.9x)"
    )
    return result
