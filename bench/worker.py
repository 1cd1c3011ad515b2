"""A Kestrel worker process for the benchmarks: ``python -m bench.worker --dsn DSN ...``."""

from __future__ import annotations

import argparse
import logging
from datetime import timedelta
from pathlib import Path

from .profiling import run_profiled
from .workloads import app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.worker", description=__doc__)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--lease", type=float, default=30.0, help="seconds")
    parser.add_argument("--worker-id", default=None)
    parser.add_argument("--no-listen", action="store_true", help="poll only (Worker listen=False)")
    parser.add_argument("--poll-interval", type=float, default=1.0, help="seconds")
    parser.add_argument("--sweep-interval", type=float, default=1.0, help="seconds")
    parser.add_argument(
        "--prune-older-than", type=float, help="retention on: prune finished executions older than this many seconds"
    )
    parser.add_argument("--prune-every", type=float, default=600.0, help="seconds between prune runs")
    parser.add_argument("--buckets", type=int, help="serve a share of this many bucket groups (WorkerSettings.buckets)")
    parser.add_argument("--profile", type=Path, help="run under cProfile, write the stats to this .pstats file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    served = app.with_settings(dsn=args.dsn)
    retention = (
        {}
        if args.prune_older_than is None
        else {
            "prune_older_than": timedelta(seconds=args.prune_older_than),
            "prune_every": args.prune_every,
            "prune_max_batches": 1000,
        }
    )

    def run() -> None:
        served.run_worker(
            concurrency=args.concurrency,
            lease=timedelta(seconds=args.lease),
            worker_id=args.worker_id,
            listen=not args.no_listen,
            poll_interval=args.poll_interval,
            sweep_interval=args.sweep_interval,
            buckets=args.buckets,
            **retention,
        )

    if args.profile:
        run_profiled(run, args.profile)
    else:
        run()


if __name__ == "__main__":
    main()
