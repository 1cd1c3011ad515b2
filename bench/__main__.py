"""``python -m bench [BENCHMARK ...] [options]``: run the benchmarks, print tables, write JSON.

Benchmarks: throughput (Kestrel vs the pgbench ceiling vs DBOS), latency, recovery, console,
enqueue; none named = all of them. ``mvcc`` (a held snapshot) and ``soak`` (retention on) run
minutes at full load, and ``migration`` (today's schema seeded with 1M executions, migrated
while a probe writes) minutes of seeding, ``workers`` (``--count`` worker identities against 10
on a private server) minutes of start-up, and ``metrics`` (one scrape of the metrics endpoint
on the console's seeded history) too: only when named. ``--quick`` runs tiny sizes (a smoke run).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from .suite import BENCHMARKS, DEFAULT, ON_REQUEST, Options, run


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("expected positive numbers")
    return values


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "benchmarks",
        nargs="*",
        metavar="BENCHMARK",
        help=f"any of: {', '.join(BENCHMARKS)} (default: all but {', '.join(ON_REQUEST)})",
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of a few seconds each")
    p.add_argument(
        "--admin-dsn",
        help="server where fresh databases are created (default $KESTREL_BENCH_DSN, else host=127.0.0.1 user=postgres)",
    )
    p.add_argument("--results", type=Path, help="folder for the JSON files (default bench/results)")
    g = p.add_argument_group("throughput")
    g.add_argument("--workers", type=_ints, help="worker process counts, e.g. 1,2,4")
    g.add_argument("--concurrency", type=int, help="executions at once per worker process")
    g.add_argument("-n", "--n", type=int, help="workflows per measurement")
    g.add_argument("--ceiling-seconds", type=float, help="pgbench -T")
    g.add_argument("--no-ceiling", action="store_true", help="skip the pgbench ceiling")
    g.add_argument("--no-dbos", action="store_true", help="skip DBOS Transact")
    g.add_argument("--dbos-polling", type=float, help="DBOS queue polling interval, seconds")
    g.add_argument(
        "--feed-threads",
        type=int,
        help="threads of single enqueues feeding the one-step "
        "workload in the 'fed' table (0: no such table; default 8)",
    )
    g.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="run each Kestrel worker under cProfile: one .pstats per process in DIR, "
        "and the top 15 functions printed (profiled runs are slower: not for the figures)",
    )
    g.add_argument(
        "--buckets",
        type=_ints,
        metavar="N,M",
        help="instead: today's claim against these counts of bucket groups (e.g. 1,16), interleaved "
        "(bench/buckets.py; --workers: its first count, default 2)",
    )
    g.add_argument("--window", type=float, help="--buckets: seconds of each measured window (at least 10; default 12)")
    g.add_argument("--rounds", type=int, help="--buckets: times each variant runs, interleaved (default 2)")
    g = p.add_argument_group("latency, recovery, console, enqueue")
    g.add_argument("--samples", type=int, help="dispatch probes with NOTIFY")
    g.add_argument("--poll-samples", type=int, help="dispatch probes polling only")
    g.add_argument("--poll-interval", type=float, help="worker poll interval for the polling probes")
    g.add_argument("--recovery-executions", type=int, help="executions held by the killed worker")
    g.add_argument("--lease", type=float, help="lease seconds in the recovery test")
    g.add_argument("--finished", type=int, help="finished executions seeded for the console")
    g.add_argument("--live", type=int, help="live executions seeded for the console")
    g.add_argument("--enqueue-rows", type=int, help="rows for the bulk enqueue measure")
    g = p.add_argument_group("mvcc and soak (full load, a feeder keeps the backlog)")
    g.add_argument("--load-workers", type=int, help="worker processes (default 2)")
    g.add_argument("--backlog", type=int, help="live executions the feeder keeps (default 8000)")
    g.add_argument("--baseline", type=float, metavar="SECONDS", help="baseline phase (default 60)")
    g.add_argument(
        "--hold", type=float, metavar="SECONDS", help="how long the REPEATABLE READ snapshot is held (default 300)"
    )
    g.add_argument("--after", type=float, metavar="SECONDS", help="phase after the release (default 30)")
    g.add_argument("--interval", type=float, metavar="SECONDS", help="mvcc sampling interval (default 10)")
    g.add_argument("--minutes", type=float, help="soak duration (default 30)")
    g.add_argument("--soak-interval", type=float, metavar="SECONDS", help="soak sampling interval (default 60)")
    g.add_argument(
        "--retention",
        type=float,
        metavar="SECONDS",
        help="soak: prune finished executions older than this (default 120)",
    )
    g.add_argument(
        "--range-size",
        type=int,
        metavar="IDS",
        help="soak: ids per history range, so that the retention spans several (default 100,000)",
    )
    g = p.add_argument_group("workers (worker identities on a private server, against 10)")
    g.add_argument("--count", type=int, help="worker identities (default 500)")
    g.add_argument("--fleet-seconds", type=float, help="seconds of the idle window and of the loaded one (default 20)")
    g.add_argument("--fleet-rate", type=float, help="one-step workflows a second in the loaded window (default 50)")
    g.add_argument(
        "--through-pgbouncer",
        action="store_true",
        default=None,
        help="workers connect through a PgBouncer (transaction pooling) started for the run",
    )
    g = p.add_argument_group("migration (today's schema, seeded, migrated while written to)")
    g.add_argument(
        "--migrate-executions", type=int, metavar="N", help="finished executions seeded before (default 1,000,000)"
    )
    return p


def _given(**values: Any) -> dict[str, Any]:
    """The options named on the command line (argparse leaves the others None)."""
    return {key: value for key, value in values.items() if value is not None}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    unknown = [b for b in args.benchmarks if b not in BENCHMARKS]
    if unknown:
        parser().error(f"unknown benchmark {unknown[0]!r}: choose from {', '.join(BENCHMARKS)}")
    overrides = _given(
        admin=args.admin_dsn,
        results=args.results,
        workers=args.workers,
        concurrency=args.concurrency,
        n=None if args.buckets else args.n,
        ceiling_seconds=args.ceiling_seconds,
        dbos_polling=args.dbos_polling,
        profile=args.profile,
        samples=args.samples,
        poll_samples=args.poll_samples,
        poll_interval=args.poll_interval,
        recovery_executions=args.recovery_executions,
        lease=args.lease,
        finished=args.finished,
        live=args.live,
        enqueue_rows=args.enqueue_rows,
        feed_threads=args.feed_threads,
        load_workers=args.load_workers,
        backlog=args.backlog,
        migrate_executions=args.migrate_executions,
    )
    if args.no_ceiling:
        overrides["ceiling"] = False
    if args.no_dbos:
        overrides["dbos"] = False
    opts = Options.quick(**overrides) if args.quick else Options(**overrides)
    # The options of a benchmark's own dataclass, over its full or quick sizes.
    opts.buckets = replace(
        opts.buckets,
        **_given(groups=args.buckets, n=args.n if args.buckets else None, window=args.window, rounds=args.rounds),
    )
    opts.phases = replace(
        opts.phases, **_given(baseline=args.baseline, hold=args.hold, after=args.after, interval=args.interval)
    )
    opts.soak = replace(
        opts.soak,
        **_given(
            minutes=args.minutes, interval=args.soak_interval, retention=args.retention, range_size=args.range_size
        ),
    )
    opts.fleet = replace(
        opts.fleet,
        **_given(
            count=args.count,
            idle_s=args.fleet_seconds,
            load_s=args.fleet_seconds,
            rate=args.fleet_rate,
            through_pgbouncer=args.through_pgbouncer,
        ),
    )
    try:
        run(args.benchmarks or list(DEFAULT), opts)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a benchmark that cannot run says why, without a traceback
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
