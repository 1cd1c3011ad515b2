"""Buckets: the work cut into BUCKETS fixed slices, shared out among the live workers.

Every execution has a bucket, stored at insert (migration 0038): its concurrency key's, its
parent's, or a random one. A worker started with ``buckets=N`` (WorkerSettings) sees the
BUCKETS buckets as N groups of contiguous buckets, and serves the groups it wins by
rendezvous hashing of (group, worker id) over its peers: the live workers started with the
same N that claim what it claims (the same workflows, versions and queues), read from the
``workers`` table every third of its lease. Workers of another kind form a fleet of their own,
which serves every group too: no execution waits on a worker that cannot run it. Each group
has exactly one winner, every worker computes the same winners from the same rows, and a
worker joining or leaving moves only the groups it wins or won (about 1/W of them), not a
reshuffle.

The assignment is a division of labour, never a condition of correctness. A claim of a set of
buckets is the ordinary claim with one more filter (``bucket = ANY(...)``): ``FOR UPDATE SKIP
LOCKED``, fenced by the claim epoch, so two workers that briefly disagree on who serves a
group (one has read the table after a join, the other not yet) both claim from it safely.
The limits hold whatever the buckets: the limited path still locks the queue's row and counts
what runs in the whole queue, every bucket included (a global concurrency limit stays
global); a per-key limit is counted the same way (a key's executions also share a bucket).

Nothing starves while the groups move: a worker whose own buckets come back short of its free
slots (none served, a group whose winner died and is not yet out of the table, a row in a
bucket out of range) also runs the claim without buckets, today's claim: at most once per
poll interval while that finds nothing, and again at once while it finds work (``Fallback``:
a worker with spare slots helps with the others' backlog, as it would without buckets); and
once per poll interval in any case, for one slot at least, so that a group whose winner is
live but has no free slot is not left waiting behind its peers' own backlogs. That
claim takes the head of the whole ready table in claim order (priority, then run_at, then
id), so a row no worker serves moves up to the head as older rows go and is taken within its
place in that order: the same guarantee as without buckets, at the fallback's pace; and once
the dead worker's heartbeat is a lease old, its groups have a live winner again.

On one primary no index is added: the claim still walks executions_ready's claim-order index
and reads each candidate row's bucket with the columns it already filters on (name, queue,
version); on Citus, where a shard holds its buckets' rows alone, that same index is per bucket.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import psycopg

from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import render

# The number of buckets, fixed: the column default and bucket_assigned() (schema/functions/)
# spell it too. N groups of a fleet are N contiguous ranges of them.
BUCKETS = 64

SQL = statements_beside(__file__)


def group_of(bucket: int, groups: int) -> int:
    """The group of ``bucket`` among ``groups`` contiguous ranges of BUCKETS."""
    return bucket * groups // BUCKETS


def buckets_of(served: Iterable[int], groups: int) -> list[int]:
    """The buckets of the ``served`` groups, in order."""
    wanted = set(served)
    return [b for b in range(BUCKETS) if group_of(b, groups) in wanted]


def _score(group: int, worker_id: str) -> int:
    """Rendezvous weight of (group, worker): stable across processes and releases."""
    digest = hashlib.blake2b(f"{group}\x00{worker_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def assign(groups: int, workers: Iterable[str]) -> dict[str, list[int]]:
    """Each of ``groups`` groups to the one live worker with the highest weight for it (a tie
    of 64-bit weights, to the higher id); every worker named has an entry."""
    live = sorted(set(workers))
    served: dict[str, list[int]] = {w: [] for w in live}
    if not live:
        return served
    for g in range(groups):
        winner = max(live, key=lambda w: (_score(g, w), w))
        served[winner].append(g)
    return served


@dataclass(frozen=True)
class Claims:
    """What a worker claims, as its ``workers`` row records it (registration.upsert_worker):
    its peers in the buckets are the live workers that claim the same."""

    workflows: Sequence[str]
    versions: Sequence[str | None]
    queues: Sequence[str] | None

    def params(self) -> dict[str, object]:
        return {
            "workflows": list(self.workflows),
            "versions": [v or "" for v in self.versions],
            "queues": list(self.queues) if self.queues is not None else None,
        }


def live_peers(
    conn: psycopg.Connection, schema: str, *, worker_id: str, groups: int, lease: timedelta, claims: Claims
) -> list[str]:
    """Record that ``worker_id`` serves ``groups`` groups, and return the live workers that do
    and claim what it claims (itself included): not stopped, heartbeating within their lease."""
    params = {"worker_id": worker_id, "groups": groups, "lease": lease, **claims.params()}
    rows = conn.execute(render(SQL.live_peers, schema), params).fetchall()
    return sorted({worker_id, *(row[0] for row in rows)})


@dataclass
class Fallback:
    """When a bucketed worker also runs the claim without buckets: after its own buckets came
    back short of its free slots, at most once per ``every`` seconds (the poll interval) while
    that finds nothing; at once again while it finds work (a worker with spare slots helps
    with the backlog of buckets it does not serve, as every worker does without buckets).
    And at least once per ``every`` seconds whatever its own buckets hold (``overdue``: the
    worker keeps a slot for it): a group whose winner is live but busy (every slot on long
    steps) is otherwise served by nobody while its peers have backlogs of their own."""

    every: float
    next_at: float = float("-inf")  # time.monotonic()
    ran_at: float = float("-inf")

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def overdue(self, now: float) -> bool:
        """Not run for ``every`` seconds (then also ``due``)."""
        return now - self.ran_at >= self.every

    def ran(self, now: float, *, found: bool) -> None:
        self.ran_at = now
        self.next_at = now if found else now + self.every


@dataclass
class Served:
    """What one worker serves: its groups and their buckets, refreshed from the workers table
    every ``refresh_every`` seconds by the claim loop (whose thread alone uses it)."""

    groups: int
    worker_id: str
    claims: Claims
    refresh_every: float
    buckets: list[int] = field(default_factory=list)
    refreshed_at: float = float("-inf")  # time.monotonic()

    def due(self, now: float) -> bool:
        return now - self.refreshed_at >= self.refresh_every

    def refreshed(self, peers: Sequence[str], now: float) -> bool:
        """The live peers as read now: whether the buckets served changed."""
        self.refreshed_at = now
        mine = buckets_of(assign(self.groups, peers).get(self.worker_id, []), self.groups)
        changed = mine != self.buckets
        self.buckets = mine
        return changed

    def refresh(self, conn: psycopg.Connection, schema: str, lease: timedelta) -> bool:
        """Read the live peers and recompute (see ``refreshed``)."""
        peers = live_peers(conn, schema, worker_id=self.worker_id, groups=self.groups, lease=lease, claims=self.claims)
        return self.refreshed(peers, time.monotonic())
