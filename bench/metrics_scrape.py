"""Metrics: what one scrape of ``kestrel-console metrics`` costs on a big history.

Seeds the console benchmark's history (``bench.console.seed``: finished executions spread over
a week, live ones enqueued, running and waiting on an approval, three beating workers) plus two
step attempts per execution that finished in the last hour, then times:

- ``snapshot``: the collector's database read alone (``OperationsReader.operations``, one
  snapshot, one round trip), with the finishes of a 15-second scrape interval to count;
- ``scrape``: a whole scrape as Prometheus gets it (the read, the families, the text
  exposition), through the collector and prometheus_client's ``generate_latest``.

    python -m bench metrics --finished 1000000 --live 10000
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import psycopg

from kestrel_core.db import render

from .console import SCHEMA, beating, seed
from .databases import fresh_database
from .report import summary_ms

# Two attempts (one failed) of one step for each execution that finished in the last hour.
SEED_ATTEMPTS = """
INSERT INTO {schema}.step_attempts
       (execution_id, step_id, attempt, owner_id, claim_epoch, started_at, finished_at, outcome, error)
SELECT e.id, 'work', a.n, e.owner_id, 1, e.finished_at - interval '2 seconds' + a.n * interval '500 ms',
       e.finished_at - interval '1 second' + a.n * interval '400 ms',
       CASE WHEN a.n = 1 THEN 'error' ELSE 'success' END, CASE WHEN a.n = 1 THEN 'boom' END
  FROM {schema}.workflow_executions e, generate_series(1, 2) AS a(n)
 WHERE e.finished_at > now() - interval '1 hour'
"""
ANALYZE = "ANALYZE {schema}.step_attempts"
INTERVAL_S = 15.0  # Prometheus's usual scrape interval


def run_metrics(admin: str, *, finished: int, live: int, samples: int = 50) -> dict[str, Any]:
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    from kestrel_console.metrics import DURATION_BUCKETS, SETTLE_S, KestrelCollector
    from kestrel_console.read.operations import OperationsReader

    with fresh_database(admin) as dsn:
        seed_s = seed(dsn, finished=finished, live=live, spread_hours=24 * 7)
        with psycopg.connect(dsn, autocommit=True) as conn:
            attempts = conn.execute(render(SEED_ATTEMPTS, SCHEMA)).rowcount
            conn.execute(render(ANALYZE, SCHEMA))
        with beating(dsn), OperationsReader(dsn, statement_timeout_ms=10_000) as reader:
            collector = KestrelCollector(reader)
            registry = CollectorRegistry(auto_describe=False)
            registry.register(collector)
            snapshot_times, scrape_times, sizes = [], [], []
            for i in range(samples + 3):
                # As if the previous scrape was INTERVAL_S ago: its window of finishes to count.
                since = reader.now() - timedelta(seconds=SETTLE_S + INTERVAL_S)
                t = time.perf_counter()
                ops = reader.operations(since=since, settle_s=SETTLE_S, bounds=DURATION_BUCKETS)
                snapshot_s = time.perf_counter() - t
                collector._since = since  # the same window for the whole scrape
                t = time.perf_counter()
                text = generate_latest(registry)
                scrape_s = time.perf_counter() - t
                if i >= 3:  # warm-up first
                    snapshot_times.append(snapshot_s)
                    scrape_times.append(scrape_s)
                    sizes.append(len(text))
            counted = sum(int(r["n"]) for r in ops["finished_since"])
    return {
        "finished": finished,
        "live": live,
        "seed_s": round(seed_s, 1),
        "step_attempts_seeded": attempts,
        "finishes_per_window": counted,
        "snapshot": summary_ms(snapshot_times),
        "scrape": summary_ms(scrape_times),
        "exposition_bytes": max(sizes),
    }
