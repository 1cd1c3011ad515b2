"""Claim: move up to N due ``enqueued`` rows to ``running`` for one worker.

Two paths, each one short transaction:

- the fast path (every queue without limits): one statement, ``FOR UPDATE SKIP LOCKED``, so
  any number of workers claim concurrently without blocking or double-claiming; it takes rows
  out of ``executions_ready`` (the claimable work alone, kept by triggers), walking past the
  worker process's mark (ClaimMark), so that its cost does not grow with the dead rows a held
  snapshot leaves behind;
- the limited path (queues with a concurrency, per-worker or rate limit, or with keyed
  executions): the claiming worker first locks the queues' rows ``FOR UPDATE``, then counts and claims
  in a second statement whose snapshot is taken after the lock, so it sees every claim
  committed before it. Claims of one limited queue therefore serialise and its limits hold
  across all workers (limited_claim.py); the fast path never touches those queues (nor
  paused ones).

Each claim bumps ``claim_epoch``; (owner_id, claim_epoch) identifies the claim and fences
every later write (see checkpoint.py). A worker claims only the (workflow, version) pairs it
has: a row's ``version`` NULL means any, and the first claim stamps the claiming worker's version.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from kestrel_core.db.statements import render
from kestrel_core.dispatch.limited_claim import LIMITED_WITH_WORK, claim_limited

# The fast path. It walks executions_ready (migration 0015: the enqueued executions, in claim
# order, nothing else) past the key (after_p, after_at, after_id): the highest key this worker
# process took (its mark, ClaimMark), or the start. It deletes the rows it takes and moves
# their executions to 'running'. Besides
# due and registered, a row must be of a version this worker has (the names and versions
# parameters are parallel arrays; NULL = any), of a queue it serves (NULL = all), and not of a
# paused or limited queue (the tiny queues table, read once per statement). The first claim
# stamps the worker's version on a row that had none. A ready row whose execution is no longer
# enqueued (stale: see migration 0015) is deleted and claims nothing.
CLAIM = """
WITH picked AS (
    SELECT r.ctid AS tid FROM {schema}.executions_ready r
     WHERE (r.neg_priority, r.run_at, r.id) > (%(after_p)s::bigint, %(after_at)s::timestamptz, %(after_id)s::bigint)
       AND r.run_at <= now() AND r.workflow_name = ANY(%(names)s::text[])
       AND {version_matches}
       AND (%(queues)s::text[] IS NULL OR r.queue = ANY(%(queues)s::text[]))
       AND r.queue <> ALL (ARRAY(
             SELECT q.name FROM {schema}.queues q WHERE q.paused OR {queue_is_limited}))
     ORDER BY r.neg_priority, r.run_at, r.id
     LIMIT %(n)s
     FOR UPDATE SKIP LOCKED
), taken AS (
    DELETE FROM {schema}.executions_ready r USING picked
     WHERE r.ctid = picked.tid
    RETURNING r.id, r.neg_priority, r.run_at
)
UPDATE {schema}.workflow_executions e
   SET {take_claim}
  FROM taken
 WHERE e.id = taken.id AND e.status = 'enqueued'
RETURNING e.id, e.workflow_name, e.input, e.claim_epoch, e.claims, taken.neg_priority, taken.run_at
"""
# The claim must walk the ready index in order and stop after N rows. The planner may
# believe the queue is tiny and sort the whole backlog instead (13-16 ms instead of 0.2-0.4 ms
# at 36-40k rows): when its statistics predate a burst of enqueues (autovacuum analyzes up to
# a minute later), and, even with fresh statistics, when every row has the same queue (the
# "not a limited queue" filter is then estimated to keep ~0 rows). Ruling out the sort for
# this one transaction keeps the plan right at any size.
ORDERED_PLAN = "SET LOCAL enable_sort = off"


# The key before every ready row: a walk from here is a walk from the start.
START_KEY: tuple[int, datetime, int] = (-(2**63), datetime.min.replace(tzinfo=UTC), 0)
RESCAN_EVERY_S = 1.0
# A walk from the start crosses the dead index entries of every row claimed since the vacuum
# horizon last moved: under a held snapshot, millions (bench mvcc at 5,000 wf/s: 2 ms a walk
# before the hold, 30 ms a minute into it, and growing). So those walks are paced by what the
# last one cost: the next waits RESCAN_COST_FACTOR times as long as the last took, which keeps
# them under 1/RESCAN_COST_FACTOR of the claim loop's time. A walk under RESCAN_PACED_FROM_S
# is cheap and paces nothing (a fresh connection's first one plans and loads catalogs: ~5 ms):
# a short walk past the mark then still looks behind it at once. A walk's time also counts
# what it waited for (a lock held by a prune, a stalled machine), so the pace is capped at
# RESCAN_MAX_PACE_S: a row behind the mark is never left longer than that.
RESCAN_COST_FACTOR = 20
RESCAN_PACED_FROM_S = 0.05
RESCAN_MAX_PACE_S = 5.0


def paced_by_cost(took: float, *, cap: float, paced_from: float = 0.0) -> float:
    """The least time before a read that crosses dead index entries runs again, after one that
    took ``took`` s: RESCAN_COST_FACTOR times that, at most ``cap`` (a read's time also counts
    what it waited for); nothing for one under ``paced_from``. The claim's walks from the start
    and the workers' lease sweep are paced by it."""
    if took < paced_from:
        return 0.0
    return min(RESCAN_COST_FACTOR * took, cap)


@dataclass
class ClaimMark:
    """A worker process's high-water mark in claim order: the highest (neg_priority, run_at,
    id) it claimed. Its claims walk executions_ready from there, so that they never cross the
    dead index entries of the rows already claimed (which pile up while any snapshot holds the
    vacuum horizon back). A row can become claimable behind the mark (a claim rolled back, a
    higher priority, a row skipped as locked, a queue resumed, a version now served, an enqueue
    that committed late); it is found by the walk from the start that runs once a second, and
    whenever a walk from the mark comes back short: at once while such walks are cheap, and
    never more than RESCAN_COST_FACTOR times as often as they cost (a held snapshot makes them
    dear)."""

    key: tuple[int, datetime, int] = START_KEY
    rescanned_at: float = float("-inf")  # time.monotonic() of the last walk from the start
    rescan_s: float = 0.0  # how long that walk took

    def next_walk(self, now: float) -> tuple[int, datetime, int]:
        """Where the next claim starts: the mark, or the start once a second (or once every
        RESCAN_COST_FACTOR times the last walk from the start, if that is longer)."""
        if now - self.rescanned_at >= max(RESCAN_EVERY_S, self._pace()):
            self.rescanned_at = now
            return START_KEY
        return self.key

    def may_look_behind(self, now: float) -> bool:
        """Whether a walk past the mark that came back short may walk from the start now."""
        return now - self.rescanned_at >= self._pace()

    def _pace(self) -> float:
        """The least time between walks from the start that their cost asks for."""
        return paced_by_cost(self.rescan_s, cap=RESCAN_MAX_PACE_S, paced_from=RESCAN_PACED_FROM_S)

    def rescanned(self, started: float, ended: float) -> None:
        """A walk from the start ran from ``started`` to ``ended`` (time.monotonic())."""
        self.rescanned_at = started
        self.rescan_s = ended - started

    def passed(self, keys: Sequence[tuple[int, datetime, int]]) -> None:
        """The claim took rows at these keys: the mark moves to the highest."""
        if keys:
            self.key = max(self.key, *keys)


@dataclass(frozen=True)
class Claim:
    """One execution this worker now holds."""

    execution_id: int
    workflow_name: str
    input: Any
    claim_epoch: int
    claims: int  # 1 on the first run: nothing to replay (a fork starts at 1: it has checkpoints)

    @property
    def first_run(self) -> bool:
        return self.claims == 1


def claim(
    conn: psycopg.Connection,
    schema: str,
    *,
    worker_id: str,
    names: Sequence[str],
    n: int,
    lease: timedelta,
    versions: Sequence[str | None] | None = None,
    queues: Sequence[str] | None = None,
) -> list[Claim]:
    """Claim up to ``n`` due executions of the given workflow names for ``worker_id``.

    ``versions[i]`` is the code version this worker has for ``names[i]`` (None: any);
    ``queues`` None serves every queue.
    """
    return claim_batch(
        conn, schema, worker_id=worker_id, names=names, n=n, lease=lease, versions=versions, queues=queues
    )[0]


def claim_batch(
    conn: psycopg.Connection,
    schema: str,
    *,
    worker_id: str,
    names: Sequence[str],
    n: int,
    lease: timedelta,
    versions: Sequence[str | None] | None = None,
    queues: Sequence[str] | None = None,
    check_limited: bool = True,
    mark: ClaimMark | None = None,
) -> tuple[list[Claim], bool]:
    """``claim``, and whether limited queues had work for this worker.

    ``check_limited=False`` runs the fast path alone (one statement, as without queues): the
    worker skips the limited check while it has seen no limited queue lately. The limits
    never depend on it: the fast path leaves limited queues alone either way. ``mark``, the
    worker process's ClaimMark, makes the fast path walk past what it already claimed; None
    walks from the start.
    """
    if n <= 0 or not names:
        return [], False
    params = {
        "names": list(names),
        "n": n,
        "worker_id": worker_id,
        "lease": lease,
        "versions": list(versions) if versions is not None else [None] * len(names),
        "queues": list(queues) if queues is not None else None,
    }
    now = time.monotonic()
    walk_from = mark.next_walk(now) if mark is not None else START_KEY
    with conn.pipeline(), conn.transaction():
        conn.execute(ORDERED_PLAN)
        fast = conn.execute(render(CLAIM, schema), {**params, **_after(walk_from)})
        limited = conn.execute(render(LIMITED_WITH_WORK, schema), params) if check_limited else None
    rows = fast.fetchall()
    limited_queues = [row[0] for row in limited.fetchall()] if limited is not None else []
    if mark is not None and walk_from == START_KEY:
        mark.rescanned(now, time.monotonic())
    elif mark is not None and len(rows) < n and mark.may_look_behind(now := time.monotonic()):
        # Short past the mark: the rest may be behind it.
        with conn.transaction():
            conn.execute(ORDERED_PLAN)
            rows += conn.execute(render(CLAIM, schema), {**params, "n": n - len(rows), **_after(START_KEY)}).fetchall()
        mark.rescanned(now, time.monotonic())
    if mark is not None:
        mark.passed([(row[5], row[6], row[0]) for row in rows])
    rows = [row[:5] for row in rows]
    if limited_queues and len(rows) < n:
        rows += claim_limited(conn, schema, {**params, "n": n - len(rows)}, limited_queues)
    return [Claim(*row) for row in rows], bool(limited_queues)


def _after(key: tuple[int, datetime, int]) -> dict[str, Any]:
    """The claim statement's start key (exclusive) as its parameters."""
    return {"after_p": key[0], "after_at": key[1], "after_id": key[2]}
