"""The limited claim: queues with a concurrency, per-worker or rate limit, or keyed executions.

Claims of one limited queue serialise on its row: the claiming worker locks the queues' rows
``FOR UPDATE`` (lock_queues), then counts and claims in a second statement (claim_limited)
whose snapshot is taken after the lock, so it sees every claim committed before it. Two
workers that each see 2 of 3 running cannot both take the last slot: the second waits for the
first's commit, then counts 3. The fast path (claim.py) never touches these queues. A worker
serving a share of the buckets (buckets.py) takes rows of its buckets only, but counts what
runs in the whole queue: a queue's limits stay global under buckets.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import render

SQL = statements_beside(__file__)

# No claim transaction may stay open across a client freeze (a SIGSTOP or a GC pause between
# the claim statement and its COMMIT would hold the rows locked and enqueued, the queues'
# rows locked, with no lease to lapse): every claim transaction first tells the server to end
# it if its client sits idle in it for IDLE_IN_CLAIM_MS (its statements are sent one at a
# time, each synced, so the server sees the idleness), and sets the planner's sort as the
# statements want it (the fast path walks its index in order: see claim.py). The bound is half
# the lease at most (``idle_in_claim_ms``): the lease is stamped by the claim statement, the last
# of the transaction, so a claim that commits still has at least half its lease ahead (a 2 s
# bound with a 1 s lease committed leases that had lapsed).
IDLE_IN_CLAIM_MS = 2000


def idle_in_claim_ms(lease: timedelta) -> int:
    """The idle-in-transaction bound of a claim transaction stamping leases of ``lease``."""
    return max(1, min(IDLE_IN_CLAIM_MS, int(lease.total_seconds() * 1000) // 2))


def claim_limited(
    conn: psycopg.Connection, schema: str, params: dict[str, Any], limited_queues: list[str]
) -> list[tuple[Any, ...]]:
    """Lock the limited queues' rows, then count and claim under that lock (one transaction,
    which the server ends if its client freezes in it: SQL.in_claim_transaction)."""
    with conn.transaction():
        conn.execute(SQL.in_claim_transaction, {"sort": "on", "idle_ms": str(idle_in_claim_ms(params["lease"]))})
        locked = [
            row[0] for row in conn.execute(render(SQL.lock_queues, schema), {"queues": limited_queues}).fetchall()
        ]
        if not locked:
            return []
        scan = max(500, 50 * params["n"])
        return conn.execute(render(SQL.claim_limited, schema), {**params, "queues": locked, "scan": scan}).fetchall()
