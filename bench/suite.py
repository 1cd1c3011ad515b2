"""Each benchmark as one function: run it, print its table, write its JSON, return the data.

``python -m bench`` (see __main__.py) calls these; the smoke tests call them with tiny sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import buckets as buckets_bench
from . import ceiling, peer, pgstats, profiling
from .buckets import Buckets
from .console import reader_available, run_console
from .databases import admin_dsn, server_settings, server_version
from .enqueue_bench import run_enqueue, run_rss
from .fleet import Fleets, fleet_table, run_fleets
from .ingest import Ingest, run_ingest
from .latency import run_latency
from .metrics_scrape import run_metrics
from .migration import run_migration
from .mvcc import Load, Phases, Soak, run_mvcc, run_soak
from .recovery import run_recovery
from .report import machine, ratio, table, write_json
from .targets import targets
from .throughput import run_kestrel
from .throughput_tables import fed_table, profile_paths, throughput_table, writes_table
from .workloads import NOOP1, NOOP5


@dataclass
class Options:
    """Sizes and knobs of a run (defaults: the full run; ``quick()``: the smoke run). A benchmark
    whose runner takes many of them has them in the runner's own dataclass (its defaults)."""

    admin: str = field(default_factory=admin_dsn)
    results: Path | None = None
    echo: Callable[[str], None] = print
    # throughput
    workers: tuple[int, ...] = (1, 2, 4)
    concurrency: int = 64
    n: int = 5000
    workloads: tuple[str, ...] = (NOOP1, NOOP5)
    ceiling: bool = True
    ceiling_seconds: float = 10.0
    dbos: bool = True
    dbos_polling: float = peer.DEFAULT_POLLING
    profile: Path | None = None  # a folder: run the Kestrel workers under cProfile
    stats_settle: float = pgstats.SETTLE_S  # idle seconds before the counters' first snapshot
    # throughput --buckets: today's claim against counts of bucket groups (-n: its backlog)
    buckets: Buckets = field(default_factory=Buckets)
    # latency
    samples: int = 200
    poll_samples: int = 30
    poll_interval: float = 1.0
    # recovery
    recovery_executions: int = 16
    lease: float = 5.0
    # console
    finished: int = 1_000_000
    live: int = 10_000
    dashboard_samples: int = 100
    query_samples: int = 30  # each screen, search and page (the dashboard's every 0.5 s)
    # enqueue and memory
    enqueue_rows: int = 100_000
    enqueue_batch: int = 1000
    rss_concurrency: int = 32
    rss_load: int = 3000
    # ingestion (single enqueues against a plain INSERT, workers running)
    ingest: Ingest = field(default_factory=Ingest)
    # throughput fed by single enqueues from this many threads (0: no such row)
    feed_threads: int = 8
    # mvcc (held snapshot) and soak (retention on): their full load (``load()``: at the
    # concurrency above), mvcc's phases, the soak's length and retention
    load_workers: int = Load.workers
    backlog: int = Load.backlog
    phases: Phases = field(default_factory=Phases)
    soak: Soak = field(default_factory=Soak)
    # migration of a populated database (today's schema, seeded) while a probe writes
    migrate_executions: int = 1_000_000
    # workers: worker identities against the fleet module's baseline (10)
    fleet: Fleets = field(default_factory=Fleets)

    @classmethod
    def quick(cls, **overrides: Any) -> Options:
        """Tiny sizes: every benchmark in a few seconds (what the smoke tests run)."""
        small = dict(
            workers=(1,),
            concurrency=4,
            n=60,
            ceiling_seconds=1.0,
            samples=10,
            poll_samples=4,
            poll_interval=0.2,
            recovery_executions=2,
            lease=1.0,
            finished=20_000,
            live=500,
            dashboard_samples=5,
            query_samples=3,
            enqueue_rows=5000,
            rss_concurrency=32,
            rss_load=100,
            stats_settle=0.6,
            ingest=Ingest(threads=(8,), tasks=(8,), seconds=0.3, rounds=1),
            load_workers=1,
            backlog=300,
            # mvcc's phases run flat out, ~1.3 s of CPU a second: one or two intervals each are enough
            # to check the phases (the suite's smoke run took 6.6 s of CPU at 1.5 / 2.0 / 1.0 s,
            # 4.3-4.8 s at these)
            phases=Phases(warmup=0.5, baseline=1.0, hold=1.0, after=0.5, interval=0.5),
            soak=Soak(minutes=0.05, interval=0.75, retention=2.0, prune_every=1.0, range_size=1000),
            migrate_executions=2000,
            fleet=Fleets(count=4, idle_s=1.5, load_s=1.5, rate=20.0),
        )
        small.update(overrides)
        return cls(**small)

    def load(self) -> Load:
        """mvcc's and the soak's full load: ``load_workers`` at the throughput's ``concurrency``."""
        return Load(self.load_workers, self.concurrency, self.backlog)


def _save(opts: Options, name: str, data: dict[str, Any]) -> dict[str, Any]:
    path = write_json(name, data, opts.results)
    opts.echo(f"(written to {path})\n")
    return data


def _context(opts: Options) -> dict[str, Any]:
    return {"machine": machine(), "postgres": server_version(opts.admin), "settings": server_settings(opts.admin)}


def throughput(opts: Options) -> dict[str, Any]:
    """Kestrel, the pgbench ceiling and DBOS, side by side for each workload and worker count;
    with ``buckets.groups``, today's claim against the bucketed one instead (bench/buckets.py)."""
    if opts.buckets.groups:
        workers = 2 if opts.workers == Options().workers else opts.workers[0]
        data = buckets_bench.compare(
            opts.admin, opts.buckets, workers=workers, concurrency=opts.concurrency, echo=opts.echo
        )
        return _save(opts, "throughput_buckets", {**_context(opts), **data})
    dbos_skipped = None
    if opts.dbos:
        dbos_skipped = peer.available()
    ceiling_skipped = None
    if opts.ceiling and ceiling.pgbench_binary() is None:
        ceiling_skipped = "pgbench not found (install the PostgreSQL client tools)"
    rows: list[dict[str, Any]] = []
    for workflow in opts.workloads:
        for w in opts.workers:
            opts.echo(f"  {workflow}: {w} worker(s) x concurrency {opts.concurrency}, N={opts.n} ...")
            row: dict[str, Any] = {
                "kestrel": _kestrel(opts, workflow, w, profile=opts.profile.resolve() if opts.profile else None)
            }
            if opts.ceiling and not ceiling_skipped:
                clients = min(w * opts.concurrency, ceiling.MAX_CLIENTS)
                row["ceiling"] = ceiling.run_ceiling(
                    opts.admin, workflow, clients=clients, threads=w, seconds=opts.ceiling_seconds
                )
            if opts.dbos and not dbos_skipped:
                row["dbos"] = _dbos(opts, workflow, w)
            k = row["kestrel"]["workflows_per_s"]
            row["kestrel_vs_ceiling"] = ratio(k, row.get("ceiling", {}).get("workflows_per_s"))
            row["kestrel_vs_dbos"] = ratio(k, row.get("dbos", {}).get("workflows_per_s"))
            rows.append(row)
    fed_rows = _fed_rows(opts, rows, dbos=opts.dbos and not dbos_skipped)
    opts.echo(throughput_table(rows, opts.concurrency, opts.n))
    if fed_rows:
        opts.echo(fed_table(fed_rows, opts.feed_threads, opts.n))
    opts.echo(writes_table(rows))
    statements_skipped = next((r["kestrel"]["statements_skipped"] for r in rows), None)
    for why in (ceiling_skipped, dbos_skipped and f"DBOS skipped: {dbos_skipped}", statements_skipped):
        if why:
            opts.echo(why)
    if opts.profile:
        opts.echo(profiling.summary(profile_paths(opts.profile.resolve(), rows)))
        opts.echo(f"(profiles in {opts.profile}: open one with python -m pstats FILE; profiled runs are slower)")
    data = {
        **_context(opts),
        "concurrency": opts.concurrency,
        "n": opts.n,
        "dbos_polling_s": opts.dbos_polling,
        "dbos_version": peer.dbos_version(),
        "ceiling_skipped": ceiling_skipped,
        "dbos_skipped": dbos_skipped,
        "rows": rows,
        "fed_rows": fed_rows,
    }
    return _save(opts, "throughput", data)


def _fed_rows(opts: Options, bulk: list[dict[str, Any]], *, dbos: bool) -> list[dict[str, Any]]:
    """The one-step workload fed by single enqueues from ``feed_threads`` threads while the
    workers run, next to its bulk-fed row, the same workers fed by as many threads of plain
    one-row INSERTs (the cheapest single-row ingestion: the reference), and DBOS fed the same way."""
    out: list[dict[str, Any]] = []
    if not opts.feed_threads or NOOP1 not in opts.workloads:
        return out
    for w in opts.workers:
        opts.echo(f"  {NOOP1} fed by {opts.feed_threads} threads: {w} worker(s), N={opts.n} ...")
        row: dict[str, Any] = {
            feed: _kestrel(opts, NOOP1, w, feed_threads=opts.feed_threads, plain_feed=feed == "plain")
            for feed in ("kestrel", "plain")
        }
        if dbos:
            row["dbos"] = _dbos(opts, NOOP1, w, feed_threads=opts.feed_threads)
        same = next((r for r in bulk if r["kestrel"]["workflow"] == NOOP1 and r["kestrel"]["workers"] == w), None)
        row["bulk_workflows_per_s"] = same["kestrel"]["workflows_per_s"] if same else None
        row["kestrel_vs_plain"] = ratio(row["kestrel"]["workflows_per_s"], row["plain"]["workflows_per_s"])
        row["kestrel_vs_dbos"] = ratio(row["kestrel"]["workflows_per_s"], row.get("dbos", {}).get("workflows_per_s"))
        out.append(row)
    return out


def _kestrel(opts: Options, workflow: str, workers: int, **extra: Any) -> dict[str, Any]:
    """One Kestrel measure of ``workflow`` on ``workers`` processes at the options' concurrency,
    N and settle time (``extra``: how it is fed, profiled)."""
    return run_kestrel(
        opts.admin, workflow, workers=workers, concurrency=opts.concurrency, n=opts.n, settle=opts.stats_settle, **extra
    )


def _dbos(opts: Options, workflow: str, workers: int, **extra: Any) -> dict[str, Any]:
    """DBOS on the same workload and sizes as ``_kestrel``, at the options' polling interval."""
    return peer.run_dbos(
        opts.admin,
        workflow,
        workers=workers,
        concurrency=opts.concurrency,
        n=opts.n,
        polling=opts.dbos_polling,
        **extra,
    )


def latency(opts: Options) -> dict[str, Any]:
    """Enqueue-to-start on an idle worker, NOTIFY and polling only."""
    notify = run_latency(opts.admin, listen=True, samples=opts.samples)
    polling = run_latency(opts.admin, listen=False, samples=opts.poll_samples, poll_interval=opts.poll_interval)
    opts.echo(
        table(
            "Dispatch latency, enqueue to workflow start (idle worker)",
            ["mode", "samples", "poll interval s", "p50 ms", "p99 ms", "max ms"],
            [
                [
                    r["mode"],
                    r["n"],
                    r["poll_interval_s"] if not r["listen"] else None,
                    r["p50_ms"],
                    r["p99_ms"],
                    r["max_ms"],
                ]
                for r in (notify, polling)
            ],
        )
    )
    return _save(opts, "latency", {**_context(opts), "notify": notify, "polling": polling})


def recovery(opts: Options) -> dict[str, Any]:
    """SIGKILL a worker holding M executions; time until all run again in another worker."""
    r = run_recovery(opts.admin, executions=opts.recovery_executions, lease=opts.lease)
    opts.echo(
        table(
            "Recovery after SIGKILL",
            [
                "executions",
                "lease s",
                "sweep every s",
                "lease + sweep s",
                "lease left at kill s",
                "first resumed s",
                "all resumed s",
                "target s",
                "met",
            ],
            [
                [
                    r["executions"],
                    r["lease_s"],
                    r["sweep_interval_s"],
                    r["design_bound_s"],
                    r["lease_left_at_kill_s"],
                    r["first_resumed_s"],
                    r["all_resumed_s"],
                    r["target_s"],
                    r["within_target"],
                ]
            ],
        )
    )
    return _save(opts, "recovery", {**_context(opts), **r})


def _without_reader(opts: Options, name: str) -> dict[str, Any] | None:
    """The skip, said and saved, of a benchmark that reads through the console's Reader when
    that cannot be imported (bench without the console installed); None when it can."""
    reason = reader_available()
    if not reason:
        return None
    opts.echo(f"{name} benchmark skipped: {reason}")
    return _save(opts, name, {"skipped": reason})


def console(opts: Options) -> dict[str, Any]:
    """Dashboard refresh on a big history."""
    skipped = _without_reader(opts, "console")
    if skipped is not None:
        return skipped
    r = run_console(
        opts.admin,
        finished=opts.finished,
        live=opts.live,
        samples=opts.dashboard_samples,
        query_samples=opts.query_samples,
    )
    d = r["dashboard"]
    rows = [["dashboard() (all reads, one round trip)", d["p50_ms"], d["p95_ms"], d["max_ms"]]]
    rows += [[key, q["p50_ms"], q["p95_ms"], q["max_ms"]] for key, q in r["queries"].items()]
    opts.echo(
        table(
            f"Console refresh at {r['finished']:,} finished + {r['live']:,} live executions "
            f"(seeded in {r['seed_s']} s)",
            ["query", "p50 ms", "p95 ms", "max ms"],
            rows,
        )
    )
    budgeted = [
        [
            f"{kind}: {name}",
            q.get("filter", ""),
            q["p50_ms"],
            q["p95_ms"],
            q["budget_ms"],
            "yes" if q["within"] else "NO",
        ]
        for kind in ("screens", "searches", "pages")
        for name, q in r.get(kind, {}).items()
    ]
    opts.echo(
        table(
            f"Console screens, searches and pages through the Reader at {r['finished']:,} finished",
            ["what", "filter", "p50 ms", "p95 ms", "budget ms", "within"],
            budgeted,
        )
    )
    return _save(opts, "console", {**_context(opts), **r})


def metrics(opts: Options) -> dict[str, Any]:
    """One scrape of the metrics endpoint on a big history."""
    skipped = _without_reader(opts, "metrics")
    if skipped is not None:
        return skipped
    r = run_metrics(opts.admin, finished=opts.finished, live=opts.live, samples=opts.dashboard_samples)
    rows = [
        [what, r[key]["p50_ms"], r[key]["p95_ms"], r[key]["max_ms"]]
        for what, key in (("database read (one snapshot)", "snapshot"), ("whole scrape (read + exposition)", "scrape"))
    ]
    opts.echo(
        table(
            f"Metrics scrape at {r['finished']:,} finished + {r['live']:,} live executions "
            f"({r['finishes_per_window']} finishes and {r['step_attempts_seeded']:,} attempts in the last hour; "
            f"{r['exposition_bytes']:,} bytes)",
            ["part", "p50 ms", "p95 ms", "max ms"],
            rows,
        )
    )
    return _save(opts, "metrics", {**_context(opts), **r})


def enqueue(opts: Options) -> dict[str, Any]:
    """Single enqueues against a plain INSERT (workers running), bulk enqueue rows/s, and a
    worker's memory at concurrency 32."""
    ingest = run_ingest(opts.admin, opts.ingest)
    opts.echo(
        table(
            f"Single enqueue calls, {ingest['workers']} worker process(es) running "
            f"({ingest['rounds']} x {ingest['seconds']:g} s each, alternated; ratios to the plain "
            "INSERT: the median of the rounds' ratios)",
            [
                "source",
                "plain INSERT/s",
                "enqueue/s",
                "enqueue/plain",
                "rows/batch",
                "one commit per call/s",
                "per call/plain",
            ],
            [
                [
                    r["source"],
                    r["plain_per_s"],
                    r["kestrel_per_s"],
                    r["kestrel_vs_plain"],
                    r["rows_per_batch"],
                    r.get("per_call_per_s"),
                    r.get("per_call_vs_plain"),
                ]
                for r in ingest["rows"]
            ],
        )
    )
    e = run_enqueue(opts.admin, rows=opts.enqueue_rows, batch=opts.enqueue_batch)
    m = run_rss(opts.admin, concurrency=opts.rss_concurrency, load=opts.rss_load)
    opts.echo(
        table(
            "Enqueue and worker memory",
            ["measure", "value"],
            [
                [f"enqueue_many, batches of {e['batch']} (rows/s)", e["bulk_rows_per_s"]],
                ["enqueue one by one (rows/s)", e["single_rows_per_s"]],
                [f"worker RSS idle, concurrency {m['concurrency']} (MiB)", m["idle_rss_mib"]],
                [f"worker RSS after {m['load']} 5-step workflows (MiB)", m["rss_mib"]],
                ["worker peak RSS (MiB)", m["peak_rss_mib"]],
            ],
        )
    )
    return _save(opts, "enqueue", {**_context(opts), "ingest": ingest, "enqueue": e, "memory": m})


def mvcc(opts: Options) -> dict[str, Any]:
    """Full load, then one REPEATABLE READ snapshot held: last minute of the hold / baseline."""
    r = run_mvcc(opts.admin, opts.load(), opts.phases, opts.echo)
    return _save(opts, "mvcc", {**_context(opts), **r})


def soak(opts: Options) -> dict[str, Any]:
    """Full load with retention on: first vs last minutes, on-disk size per interval."""
    r = run_soak(opts.admin, opts.load(), opts.soak, opts.echo)
    return _save(opts, "soak", {**_context(opts), **r})


def migration(opts: Options) -> dict[str, Any]:
    """Today's schema seeded with executions, migrated while a probe writes; every row checked."""
    r = run_migration(opts.admin, executions=opts.migrate_executions, echo=opts.echo)
    rows = [
        ["schema version", f"{r['from_version']} (commit {r['old_commit']}) -> {r['to_version']}"],
        ["executions seeded (+ as many checkpoints and attempts)", f"{r['executions']:,} in {r['seed_s']} s"],
        ["migrate, wall time (s)", r["migrate_s"]],
        ["workflow_executions is now", {"p": "partitioned", "r": "a plain table"}.get(r["workflow_executions_kind"])],
        ["probe operations during the migration", r["probe_ops_during"]],
        ["longest probe operation (ms): the longest a writer waited", r["probe_max_ms"]],
        ["probe p99 (ms)", r["probe_p99_ms"]],
        ["probe errors", r["probe_error_count"]],
        ["every seeded row as before (counts, ids)", r["rows_unchanged"]],
        ["an old idempotency key still deduplicates", r["old_key_deduplicated"]],
    ]
    rows += [[f"  {name}: before / after", f"{b:,} / {a:,}"] for name, (b, a) in r["checks"].items()]
    opts.echo(table("Migration of a populated database while it is written to", ["measure", "value"], rows))
    for error in r["probe_errors"]:
        opts.echo(f"probe error: {error}")
    return _save(opts, "migration", {**_context(opts), **r})


def workers(opts: Options) -> dict[str, Any]:
    """``fleet.count`` worker identities against 10: heartbeat, claim and sweep cost, claim
    latency, lock waits (fleet.py)."""
    r = run_fleets(opts.fleet, opts.echo)
    opts.echo(fleet_table(r))
    return _save(opts, "workers", {**_context(opts), **r})


BENCHMARKS: dict[str, Callable[[Options], dict[str, Any]]] = {
    "throughput": throughput,
    "latency": latency,
    "recovery": recovery,
    "console": console,
    "enqueue": enqueue,
    "mvcc": mvcc,
    "soak": soak,
    "migration": migration,
    "metrics": metrics,
    "workers": workers,
}
# Long runs (minutes at full load, or a big seed, or hundreds of workers): only when named.
ON_REQUEST = ("mvcc", "soak", "migration", "metrics", "workers")
DEFAULT = tuple(name for name in BENCHMARKS if name not in ON_REQUEST)


def run(names: list[str], opts: Options) -> dict[str, dict[str, Any]]:
    """Run the named benchmarks in order; print the targets table at the end."""
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        opts.echo(f"== {name}")
        results[name] = BENCHMARKS[name](opts)
    rows = targets(results)
    if rows:
        opts.echo(table("Targets", ["target", "measured", "met"], rows))
        _save(
            opts, "summary", {**_context(opts), "targets": [dict(zip(("target", "measured", "met"), r)) for r in rows]}
        )
    return results
