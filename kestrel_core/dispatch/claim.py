"""Claim: move up to N due ``enqueued`` rows to ``running`` for one worker.

Two paths, each one short transaction:

- the fast path (every queue without limits): one statement, ``FOR UPDATE SKIP LOCKED``, so
  any number of workers claim concurrently without blocking or double-claiming;
- the limited path (queues with a concurrency, per-worker or rate limit, or with keyed
  executions): the claimer first locks the queues' rows ``FOR UPDATE``, then counts and claims
  in a second statement whose snapshot is taken after the lock, so it sees every claim
  committed before it. Claims of one limited queue therefore serialise and its limits hold
  across all workers (limited_claim.py); the fast path never touches those queues (nor
  paused ones).

Each claim bumps ``claim_epoch``; (owner_id, claim_epoch) identifies the claim and fences
every later write (see checkpoint.py). A worker claims only the (workflow, version) pairs it
has: a row's ``version`` NULL means any, and the first claim stamps the claimer's version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg

from kestrel_core.db.statements import render
from kestrel_core.dispatch.limited_claim import LIMITED_WITH_WORK, claim_limited

# The fast path. Besides due and registered, a row must be of a version this worker has (the
# names and versions parameters are parallel arrays; NULL = any), of a queue it serves (NULL =
# all), and not of a paused or limited queue (the tiny queues table, read once per statement).
# The first claim stamps the worker's version on a row that had none.
CLAIM = """
WITH candidates AS (
    SELECT e.id FROM {schema}.workflow_executions e
     WHERE e.status = 'enqueued' AND e.run_at <= now() AND e.workflow_name = ANY(%(names)s::text[])
       AND (e.version IS NULL OR e.version = (%(versions)s::text[])[array_position(%(names)s::text[], e.workflow_name)])
       AND (%(queues)s::text[] IS NULL OR e.queue = ANY(%(queues)s::text[]))
       AND e.queue <> ALL (ARRAY(
             SELECT q.name FROM {schema}.queues q
              WHERE q.paused OR q.keyed OR q.concurrency IS NOT NULL OR q.per_worker IS NOT NULL
                 OR q.rate_limit IS NOT NULL))
     ORDER BY e.priority DESC, e.run_at, e.id
     LIMIT %(n)s
     FOR UPDATE SKIP LOCKED
)
UPDATE {schema}.workflow_executions e
   SET {take_claim}
  FROM candidates
 WHERE e.id = candidates.id
RETURNING e.id, e.workflow_name, e.input, e.claim_epoch, e.claims
"""
# The claim must walk the enqueued index in order and stop after N rows. The planner may
# believe the queue is tiny and sort the whole backlog instead (13-16 ms instead of 0.2-0.4 ms
# at 36-40k rows): when its statistics predate a burst of enqueues (autovacuum analyzes up to
# a minute later), and, even with fresh statistics, when every row has the same queue (the
# "not a limited queue" filter is then estimated to keep ~0 rows). Ruling out the sort for
# this one transaction keeps the plan right at any size.
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
    conn: psycopg.Connection,
    schema: str,
    *,
    owner: str,
    names: Sequence[str],
    n: int,
    lease: timedelta,
    versions: Sequence[str | None] | None = None,
    queues: Sequence[str] | None = None,
) -> list[Claim]:
    """Claim up to ``n`` due executions of the given workflow names for ``owner``.

    ``versions[i]`` is the code version this worker has for ``names[i]`` (None: any);
    ``queues`` None serves every queue.
    """
    return claim_batch(conn, schema, owner=owner, names=names, n=n, lease=lease, versions=versions, queues=queues)[0]


def claim_batch(
    conn: psycopg.Connection,
    schema: str,
    *,
    owner: str,
    names: Sequence[str],
    n: int,
    lease: timedelta,
    versions: Sequence[str | None] | None = None,
    queues: Sequence[str] | None = None,
    check_limited: bool = True,
) -> tuple[list[Claim], bool]:
    """``claim``, and whether limited queues had work for this worker.

    ``check_limited=False`` runs the fast path alone (one statement, as without queues): the
    worker skips the limited check while it has seen no limited queue lately. The limits
    never depend on it: the fast path leaves limited queues alone either way.
    """
    if n <= 0 or not names:
        return [], False
    params = {
        "names": list(names),
        "n": n,
        "owner": owner,
        "lease": lease,
        "versions": list(versions) if versions is not None else [None] * len(names),
        "queues": list(queues) if queues is not None else None,
    }
    with conn.pipeline(), conn.transaction():
        conn.execute(ORDERED_PLAN)
        fast = conn.execute(render(CLAIM, schema), params)
        limited = conn.execute(render(LIMITED_WITH_WORK, schema), params) if check_limited else None
    rows = fast.fetchall()
    limited_queues = [row[0] for row in limited.fetchall()] if limited is not None else []
    if limited_queues and len(rows) < n:
        rows += claim_limited(conn, schema, {**params, "n": n - len(rows)}, limited_queues)
    return [Claim(*row) for row in rows], bool(limited_queues)
