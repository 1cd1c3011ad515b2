"""Claim: move up to N due ``enqueued`` rows to ``running`` for one worker.

Two paths, each one short transaction:

- the fast path (every queue without limits): one statement, ``FOR UPDATE SKIP LOCKED``, so
  any number of workers claim concurrently without blocking or double-claiming;
- the limited path (queues with a concurrency, per-worker or rate limit, or with keyed
  executions): the claimer first locks the queues' rows ``FOR UPDATE``, then counts and claims
  in a second statement whose snapshot is taken after the lock, so it sees every claim
  committed before it. Claims of one limited queue therefore serialise and its limits hold
  across all workers; the fast path never touches those queues (nor paused ones).

Each claim bumps ``claim_epoch``; (owner_id, claim_epoch) identifies the claim and fences
every later write (see checkpoint.py). A worker claims only the (workflow, version) pairs it
has: a row's ``version`` NULL means any, and the first claim stamps the claimer's version.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Sequence

import psycopg

from .statements import render

# A queue claimed only under its row lock: it has a limit, or executions with a key.
_LIMITED = "(q.keyed OR q.concurrency IS NOT NULL OR q.per_worker IS NOT NULL OR q.rate_limit IS NOT NULL)"
# The version this worker has for the row's workflow (names and versions are parallel arrays).
_MY_VERSION = "(%(versions)s::text[])[array_position(%(names)s::text[], e.workflow_name)]"
_RUNNABLE_HERE = f"""e.workflow_name = ANY(%(names)s::text[])
       AND (e.version IS NULL OR e.version = {_MY_VERSION})"""
_SERVED = "(%(queues)s::text[] IS NULL OR e.queue = ANY(%(queues)s::text[]))"
_SET_CLAIMED = f"""status = 'running', owner_id = %(owner)s, lease_expires = now() + %(lease)s,
       claim_epoch = e.claim_epoch + 1, claims = e.claims + 1,
       started_at = coalesce(e.started_at, now()), updated_at = now(),
       version = coalesce(e.version, {_MY_VERSION})"""

CLAIM = f"""
WITH candidates AS (
    SELECT e.id FROM {{schema}}.workflow_executions e
     WHERE e.status = 'enqueued' AND e.run_at <= now() AND {_RUNNABLE_HERE}
       AND {_SERVED}
       AND e.queue <> ALL (ARRAY(SELECT q.name FROM {{schema}}.queues q WHERE q.paused OR {_LIMITED}))
     ORDER BY e.priority DESC, e.run_at, e.id
     LIMIT %(n)s
     FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.workflow_executions e
   SET {_SET_CLAIMED}
  FROM candidates
 WHERE e.id = candidates.id
RETURNING e.id, e.workflow_name, e.input, e.claim_epoch, e.claims
"""

# Run in the fast path's transaction (same round trip) while limited queues exist: those
# this worker serves that hold due work it can run. Empty: no second transaction.
LIMITED_WITH_WORK = f"""
WITH limited AS MATERIALIZED (
    SELECT q.name FROM {{schema}}.queues q
     WHERE NOT q.paused AND {_LIMITED}
       AND (%(queues)s::text[] IS NULL OR q.name = ANY(%(queues)s::text[]))
)
SELECT limited.name FROM limited
 CROSS JOIN LATERAL (
        -- One probe per limited queue, walking its backlog index in claim order (the ORDER BY
        -- keeps the planner on that index rather than a scan of the table).
        SELECT 1 FROM {{schema}}.workflow_executions e
         WHERE e.status = 'enqueued' AND e.queue = limited.name AND e.run_at <= now()
           AND {_RUNNABLE_HERE}
         ORDER BY e.priority DESC, e.run_at, e.id
         LIMIT 1) AS due
"""

# The limited path's first statement: serialise with every other claimer of these queues.
# A queue paused (or unlimited) since LIMITED_WITH_WORK is not locked, hence not claimed.
LOCK_QUEUES = f"""
SELECT q.name FROM {{schema}}.queues q
 WHERE q.name = ANY(%(queues)s::text[]) AND NOT q.paused AND {_LIMITED}
 ORDER BY q.name
   FOR UPDATE
"""

# The limited path's second statement (its snapshot is newer than the locks): room left per
# queue = the least of concurrency - running, per_worker - running here, rate - claims in the
# window; per key at most per_key running; then claim in priority order and record the claim
# times for the rate window. The head of the backlog is looked at (%(scan)s rows): keys
# further back wait until the head drains.
CLAIM_LIMITED = f"""
WITH room AS MATERIALIZED (
    SELECT q.name, q.per_key,
           least(coalesce(q.concurrency - r.running, 2147483647),
                 coalesce(q.per_worker - r.mine, 2147483647),
                 coalesce(q.rate_limit - (SELECT count(*) FROM unnest(q.rate_starts) AS s(at)
                                           WHERE s.at > now() - q.rate_period), 2147483647)) AS free
      FROM {{schema}}.queues q
      CROSS JOIN LATERAL (
            SELECT count(*) AS running, count(*) FILTER (WHERE r.owner_id = %(owner)s) AS mine
              FROM {{schema}}.workflow_executions r
             WHERE r.status = 'running' AND r.queue = q.name) AS r
     WHERE q.name = ANY(%(queues)s::text[])
), busy_keys AS MATERIALIZED (
    SELECT r.queue, r.concurrency_key, count(*) AS running
      FROM {{schema}}.workflow_executions r
     WHERE r.status = 'running' AND r.queue = ANY(%(queues)s::text[]) AND r.concurrency_key IS NOT NULL
     GROUP BY 1, 2
), head AS MATERIALIZED (
    -- Per queue with room, the head of its backlog in claim order (an ordered index walk).
    SELECT e.id, e.queue, e.concurrency_key, e.priority, e.run_at,
           row_number() OVER (PARTITION BY e.queue, e.concurrency_key
                              ORDER BY e.priority DESC, e.run_at, e.id) AS nth_of_key
      FROM room
     CROSS JOIN LATERAL (
            SELECT e.id, e.queue, e.concurrency_key, e.priority, e.run_at
              FROM {{schema}}.workflow_executions e
             WHERE e.status = 'enqueued' AND e.queue = room.name AND e.run_at <= now()
               AND {_RUNNABLE_HERE}
             ORDER BY e.priority DESC, e.run_at, e.id
             LIMIT %(scan)s) AS e
     WHERE room.free > 0
), allowed AS (
    SELECT h.id, h.queue, h.priority, h.run_at,
           row_number() OVER (PARTITION BY h.queue ORDER BY h.priority DESC, h.run_at, h.id) AS nth_of_queue
      FROM head h
      JOIN room ON room.name = h.queue
      LEFT JOIN busy_keys k ON k.queue = h.queue AND k.concurrency_key = h.concurrency_key
     WHERE h.concurrency_key IS NULL OR h.nth_of_key + coalesce(k.running, 0) <= room.per_key
), chosen AS (
    SELECT a.id FROM allowed a JOIN room ON room.name = a.queue
     WHERE a.nth_of_queue <= room.free
     ORDER BY a.priority DESC, a.run_at, a.id
     LIMIT %(n)s
), claimed AS (
    UPDATE {{schema}}.workflow_executions e
       SET {_SET_CLAIMED}
      FROM chosen
     WHERE e.id = chosen.id AND e.status = 'enqueued'
    RETURNING e.id, e.workflow_name, e.input, e.claim_epoch, e.claims, e.queue
), stamped AS (
    UPDATE {{schema}}.queues q
       SET rate_starts = ARRAY(SELECT s.at FROM unnest(q.rate_starts) AS s(at)
                                WHERE s.at > now() - q.rate_period)
                         || array_fill(now(), ARRAY[c.n::int])
      FROM (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) AS c
     WHERE q.name = c.queue AND q.rate_limit IS NOT NULL
)
SELECT id, workflow_name, input, claim_epoch, claims FROM claimed
"""

# The claim must walk the enqueued index in order and stop after N rows. When the planner's
# statistics predate a burst of enqueues (autovacuum analyzes up to a minute later), it
# believes the queue is tiny and sorts the whole backlog instead: 13 ms instead of 0.4 ms at
# 36k rows. Ruling out the sort for this one transaction keeps the plan right at any size.
ORDERED_PLAN = "SET LOCAL enable_sort = off"


@dataclass(frozen=True)
class Claim:
    """One execution this worker now holds."""

    execution_id: int
    workflow_name: str
    input: Any
    epoch: int
    claims: int  # 1 on the first run: nothing to replay

    @property
    def first_run(self) -> bool:
        return self.claims == 1


def claim(
    conn: psycopg.Connection, schema: str, *, owner: str, names: Sequence[str], n: int,
    lease: timedelta, versions: Sequence[str | None] | None = None,
    queues: Sequence[str] | None = None,
) -> list[Claim]:
    """Claim up to ``n`` due executions of the given workflow names for ``owner``.

    ``versions[i]`` is the code version this worker has for ``names[i]`` (None: any);
    ``queues`` None serves every queue.
    """
    return claim_batch(conn, schema, owner=owner, names=names, n=n, lease=lease, versions=versions,
                       queues=queues)[0]


def claim_batch(
    conn: psycopg.Connection, schema: str, *, owner: str, names: Sequence[str], n: int,
    lease: timedelta, versions: Sequence[str | None] | None = None,
    queues: Sequence[str] | None = None, check_limited: bool = True,
) -> tuple[list[Claim], bool]:
    """``claim``, and whether limited queues had work for this worker.

    ``check_limited=False`` runs the fast path alone (one statement, as without queues): the
    worker skips the limited check while it has seen no limited queue lately. The limits
    never depend on it: the fast path leaves limited queues alone either way.
    """
    if n <= 0 or not names:
        return [], False
    params = {"names": list(names), "n": n, "owner": owner, "lease": lease,
              "versions": list(versions) if versions is not None else [None] * len(names),
              "queues": list(queues) if queues is not None else None}
    with conn.pipeline(), conn.transaction():
        conn.execute(ORDERED_PLAN)
        fast = conn.execute(render(CLAIM, schema), params)
        limited = conn.execute(render(LIMITED_WITH_WORK, schema), params) if check_limited else None
    rows = fast.fetchall()
    limited_queues = [row[0] for row in limited.fetchall()] if limited is not None else []
    if limited_queues and len(rows) < n:
        rows += claim_limited(conn, schema, {**params, "n": n - len(rows)}, limited_queues)
    return [Claim(*row) for row in rows], bool(limited_queues)


def claim_limited(conn: psycopg.Connection, schema: str, params: dict[str, Any],
                  limited_queues: list[str]) -> list[tuple]:
    """The limited path: lock the queues' rows, then count and claim under that lock."""
    with conn.transaction():
        locked = [row[0] for row in conn.execute(render(LOCK_QUEUES, schema),
                                                 {"queues": limited_queues}).fetchall()]
        if not locked:
            return []
        scan = max(500, 50 * params["n"])
        return conn.execute(render(CLAIM_LIMITED, schema),
                            {**params, "queues": locked, "scan": scan}).fetchall()
