"""Run the chaos harness by hand: ``python -m tests.chaos --minutes 10``.

Starts its own private PostgreSQL server (deleted afterwards), runs the chaos phase for the
given time, lets the work drain, checks every invariant, prints the counts, and exits 1 if any
invariant broke (the violations are printed, and the worker logs kept).
"""

from __future__ import annotations

import argparse
import os
import sys

from .harness import ChaosConfig, private_cluster, run_chaos


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the chaos phase")
    parser.add_argument("--workers", type=int, default=4, help="worker processes at any time")
    parser.add_argument("--concurrency", type=int, default=4, help="executions per worker")
    parser.add_argument("--rate", type=float, default=8.0, help="executions enqueued per second")
    parser.add_argument("--seed", type=int, default=None, help="random seed (targets, timings)")
    parser.add_argument(
        "--worker-dsn",
        default=None,
        help="where workers connect instead of the private server (e.g. a PgBouncer "
        "in front of it); the server's own DSN is printed at start",
    )
    parser.add_argument(
        "--transaction-pooling", action="store_true", help="workers run with transaction_pooling=True (PgBouncer)"
    )
    parser.add_argument(
        "--break-fence",
        action="store_true",
        help="mutation test: workers run with the claim fences removed; the run must then report violations (exit 1)",
    )
    args = parser.parse_args()
    if args.break_fence:
        os.environ["KESTREL_CHAOS_BREAK_FENCE"] = "1"  # read by the worker processes
    chaos_s = args.minutes * 60
    cfg = ChaosConfig(
        chaos_s=chaos_s,
        drain_stall_s=120.0,
        workers=args.workers,
        concurrency=args.concurrency,
        rate=args.rate,
        seed=args.seed,
        restarts=max(2, int(chaos_s // 30)),
        stops=max(2, int(chaos_s // 20)),
        freezes=max(2, int(chaos_s // 30)),
        worker_dsn=args.worker_dsn,
        transaction_pooling=args.transaction_pooling,
    )
    cluster = private_cluster()
    print(f"chaos: private server at {cluster.dsn} (data in {cluster.data_dir})", flush=True)
    try:
        report = run_chaos(cluster, cfg)
    finally:
        cluster.destroy()
    print(report.summary())
    for violation in report.verdict.violations[:50]:
        print(f"  violation: {violation}")
    if not report.verdict.ok:
        print(f"worker logs kept in {report.log_dir}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
