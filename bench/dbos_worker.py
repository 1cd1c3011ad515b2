"""A DBOS Transact worker process for the comparison: ``python -m bench.dbos_worker --url URL``.

It launches DBOS with the bench workflows, registers the queue with the given per-process
concurrency, prints ``ready`` and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dbos_worker", description=__doc__)
    parser.add_argument("--url", required=True, help="system database URL (postgresql+psycopg://...)")
    parser.add_argument("--executor-id", required=True)
    parser.add_argument("--concurrency", type=int, default=8, help="worker_concurrency of the queue")
    parser.add_argument("--polling", type=float, default=0.05, help="queue polling interval, seconds")
    parser.add_argument(
        "--pool-size",
        type=int,
        default=None,
        help="system database pool (default: concurrency + 4, at most DBOS's own default of 20, "
        "so that 4 processes fit in a default server's 100 connections)",
    )
    args = parser.parse_args(argv)

    from dbos import DBOS

    from . import dbos_workloads

    DBOS(
        config={
            "name": "kestrel-bench",
            "system_database_url": args.url,
            "executor_id": args.executor_id,
            "application_version": "bench",
            "log_level": "WARNING",
            "sys_db_pool_size": args.pool_size or min(args.concurrency + 4, 20),
        }
    )
    DBOS.launch()
    DBOS.register_queue(
        dbos_workloads.QUEUE,
        worker_concurrency=args.concurrency,
        polling_interval_sec=args.polling,
        on_conflict="always_update",
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print("ready", flush=True)
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=2)
    sys.exit(0)


if __name__ == "__main__":
    main()
