"""Samples, every few milliseconds through the whole chaos run, how many executions of the
limited queue the table shows running, in all and for the busiest concurrency key; the checks
then hold the maxima to the queue's limits (checks.check_limits). Outages are skipped over:
the sampler reconnects when the server is back."""

from __future__ import annotations

import threading
import time

import psycopg

from .workload import LIMITED_QUEUE

# One sample: running now in the limited queue, and the most running under one key there.
SAMPLE = """
SELECT count(*), coalesce(max(n), 0)
  FROM (SELECT concurrency_key,
               count(*) FILTER (WHERE concurrency_key IS NOT NULL)
                        OVER (PARTITION BY concurrency_key) AS n
          FROM kestrel.workflow_executions WHERE status = 'running' AND queue = %s) AS r
"""


class LimitSampler(threading.Thread):
    """Reads SAMPLE every ``every_s`` until ``stop()``; ``samples`` holds (running, per key max)."""

    def __init__(self, dsn: str, every_s: float = 0.005) -> None:
        super().__init__(daemon=True, name="limit-sampler")
        self.dsn = dsn
        self.every_s = every_s
        self.samples: list[tuple[int, int]] = []
        self.failures = 0  # reads lost to an outage
        self._done = threading.Event()

    def stop(self) -> list[tuple[int, int]]:
        self._done.set()
        self.join()
        return self.samples

    def run(self) -> None:
        while not self._done.is_set():
            try:
                with psycopg.connect(
                    self.dsn, autocommit=True, connect_timeout=3, application_name="kestrel-chaos-sampler"
                ) as conn:
                    while not self._done.wait(self.every_s):
                        row = conn.execute(SAMPLE, (LIMITED_QUEUE,)).fetchone()
                        self.samples.append((row[0], row[1]))
            except psycopg.Error:
                self.failures += 1
                time.sleep(0.2)
