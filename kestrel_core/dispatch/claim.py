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

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from kestrel_core.db.sql_files import paste, statements_beside
from kestrel_core.db.statements import quote_identifier, render
from kestrel_core.dispatch import limited_claim
from kestrel_core.dispatch.limited_claim import claim_limited, idle_in_claim_ms

SQL = statements_beside(__file__)

log = logging.getLogger("kestrel.claim")

_PICKED = {"claimable": SQL.claimable, "take_picked": SQL.take_picked}
CLAIM = paste(SQL.claim, **_PICKED)
CLAIM_BEHIND = paste(SQL.claim_behind, **_PICKED)
CLAIM_BEHIND_SLICE = paste(SQL.claim_behind_slice, **_PICKED)
# Exported: the benchmarks set what the claim transaction sets.
ORDERED_PLAN = SQL.ordered_plan
CLAIM_SESSION_SETTINGS = {"enable_sort": "off", "jit": "off"}  # JIT: never worth it for a claim
# No claim transaction may stay open across a client freeze: see in_claim_transaction
# (limited_claim.sql). The worker's one-statement claims have no transaction to keep open: they
# commit on the server, with no client round trip in between.


# The key before every ready row: a walk from here is a walk from the start.
START_KEY: tuple[int, datetime, int] = (-(2**63), datetime.min.replace(tzinfo=UTC), 0)
# The key after every ready row: a look behind it covers the whole table.
END_KEY: tuple[int, datetime, int] = (2**63 - 1, datetime.max.replace(tzinfo=UTC), 2**63 - 1)
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
# A walk of the index that the server cancelled (a statement_timeout shorter than the walk: the
# dead entries of a long hold) is tried again only after WALK_RETRY_S, doubling per failure
# up to WALK_RETRY_MAX_S; meanwhile the look behind the mark goes through the table's heap in
# slices (BehindPass), each bounded by its size: SLICE_FIRST_BLOCKS to start, doubled while a
# slice takes under SLICE_TARGET_S, halved above twice that, quartered when cancelled.
WALK_RETRY_S = 5.0
WALK_RETRY_MAX_S = 60.0
SLICE_FIRST_BLOCKS = 1024
SLICE_TARGET_S = 0.025
SLICE_MAX_BLOCKS = 1 << 22


def paced_by_cost(took: float, *, cap: float, paced_from: float = 0.0) -> float:
    """The least time before a read that crosses dead index entries runs again, after one that
    took ``took`` s: RESCAN_COST_FACTOR times that, at most ``cap`` (a read's time also counts
    what it waited for); nothing for one under ``paced_from``. The claim's walks from the start
    and the workers' lease sweep are paced by it."""
    if took < paced_from:
        return 0.0
    return min(RESCAN_COST_FACTOR * took, cap)


@dataclass
class BehindPass:
    """One pass through the ready table's heap, a slice of blocks per claim: it finds every row
    that was claimable behind the mark when the pass began (and past it, ``whole``), whatever
    dead index entries a held snapshot left, each slice costing what its blocks cost."""

    blocks: int  # the table's size when the pass began
    whole: bool = False  # also past the mark: the walk from the mark itself was cancelled
    next_block: int = 0
    span: int = SLICE_FIRST_BLOCKS
    next_at: float = float("-inf")  # time.monotonic() before which no slice runs

    @property
    def done(self) -> bool:
        return self.next_block >= self.blocks

    def sliced(self, started: float, ended: float) -> None:
        """A slice from next_block ran: move on, size the next by what this one took."""
        took = ended - started
        self.next_block += self.span
        if took < SLICE_TARGET_S:
            self.span = min(SLICE_MAX_BLOCKS, self.span * 2)
        elif took > 2 * SLICE_TARGET_S:
            self.span = max(1, self.span // 2)
        self.next_at = ended + RESCAN_COST_FACTOR * took

    def cancelled(self, ended: float) -> None:
        """The server cancelled the slice (statement timeout): the same blocks, a quarter of
        them, again after a pause."""
        self.span = max(1, self.span // 4)
        self.next_at = ended + RESCAN_EVERY_S


@dataclass
class ClaimMark:
    """A worker process's high-water mark in claim order: the highest (neg_priority, run_at,
    id) it claimed. Its claims walk executions_ready from there, so that they never cross the
    dead index entries of the rows already claimed (which pile up while any snapshot holds the
    vacuum horizon back). A row can become claimable behind the mark (a claim rolled back, a
    higher priority, a row skipped as locked, a queue resumed, a version now served, an enqueue
    that committed late); it is found by the look behind the mark (a walk of the index from the
    start up to the mark) that runs once a second, and whenever a walk from the mark comes back
    short: at once while such walks are cheap, and never more than RESCAN_COST_FACTOR times as
    often as they cost (a held snapshot makes them dear). A walk the server cancels (a
    statement_timeout) is recorded, and the look behind goes on in slices of the heap
    (BehindPass) until a walk of the index may be tried again."""

    key: tuple[int, datetime, int] = START_KEY
    rescanned_at: float = float("-inf")  # time.monotonic() of the last look behind (started)
    rescan_s: float = 0.0  # how long that look took (a cancelled one: until it was cancelled)
    failed_walks: int = 0  # walks of the index cancelled in a row
    walk_again_at: float = float("-inf")  # no walk of the index before this
    slices: BehindPass | None = None  # the pass through the heap under way

    def look_behind_due(self, now: float) -> bool:
        """Whether this claim looks behind the mark first: once a second (or once every
        RESCAN_COST_FACTOR times the last look, if that is longer); a slice of a pass under way
        as soon as the last one's cost allows."""
        if self.slices is not None:
            return now >= self.slices.next_at
        if self.key == START_KEY:  # nothing is behind the start: the walk from it is the look
            return False
        return now - self.rescanned_at >= max(RESCAN_EVERY_S, self._pace())

    def may_look_behind(self, now: float) -> bool:
        """Whether a walk past the mark that came back short may look behind it now."""
        if self.slices is not None:
            return now >= self.slices.next_at
        return self.key != START_KEY and now - self.rescanned_at >= self._pace()

    def walk_index(self, now: float) -> bool:
        """Whether the look behind walks the index (else: the next slice of the heap)."""
        return self.slices is None and now >= self.walk_again_at

    def _pace(self) -> float:
        """The least time between walks from the start that their cost asks for."""
        return paced_by_cost(self.rescan_s, cap=RESCAN_MAX_PACE_S, paced_from=RESCAN_PACED_FROM_S)

    def rescanned(self, started: float, ended: float) -> None:
        """A look behind the mark ran from ``started`` to ``ended`` (time.monotonic())."""
        self.rescanned_at = started
        self.rescan_s = ended - started
        self.failed_walks = 0

    def walk_cancelled(self, started: float, ended: float, blocks: int, *, whole: bool = False) -> None:
        """The server cancelled a walk of the index (statement timeout): recorded (its time
        paces the next), and a pass through the heap in slices takes over the look behind."""
        self.rescanned_at, self.rescan_s = started, ended - started
        self.failed_walks += 1
        self.walk_again_at = ended + min(WALK_RETRY_MAX_S, WALK_RETRY_S * 2 ** (self.failed_walks - 1))
        if self.slices is None:
            self.slices = BehindPass(blocks=blocks, whole=whole)
        elif whole:  # the pass under way goes on, past the mark too
            self.slices.whole = True

    def pass_ended(self, now: float) -> None:
        """The pass through the heap is over: the next look walks the index again if it may,
        else starts another pass, in a second."""
        self.slices = None
        self.rescanned_at, self.rescan_s = now, 0.0

    def passed(self, keys: Sequence[tuple[int, datetime, int]]) -> None:
        """The claim took rows at these keys: the mark moves to the highest."""
        if keys:
            self.key = max(self.key, *keys)


@dataclass(frozen=True)
class Claim:
    """One execution this worker now holds."""

    execution_id: int
    workflow_name: str
    input: Any  # None while ``input_later``
    input_later: bool  # a large input, not in the claim's result: read afterwards (runner.py)
    claim_epoch: int
    claims: int  # 1 on the first run: nothing to replay (a fork starts at 1: it has checkpoints)

    @property
    def first_run(self) -> bool:
        return self.claims == 1


def load_input(conn: psycopg.Connection, schema: str, item: Claim, worker_id: str) -> Claim | None:
    """``item`` with its input read (one left out of the claim's result); None if the claim ended."""
    row = conn.execute(
        render(SQL.claimed_input_later, schema),
        {"eid": item.execution_id, "worker_id": worker_id, "claim_epoch": item.claim_epoch},
    ).fetchone()
    return None if row is None else replace(item, input=row[0], input_later=False)


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
    claim_session: bool = False,
    buckets: Sequence[int] | None = None,
) -> tuple[list[Claim], bool]:
    """``claim``, and whether limited queues had work for this worker.

    ``check_limited=False`` runs the fast path alone (as without queues): the worker skips the
    limited check while it has seen no limited queue lately. The limits never depend on it:
    the fast path leaves limited queues alone either way. ``mark``, the worker process's
    ClaimMark, makes the fast path walk past what it already claimed (and look behind it); None
    walks from the start. ``claim_session``: ``conn`` is an autocommit session with
    CLAIM_SESSION_SETTINGS, so each fast claim is one statement; else each is a transaction
    that sets them (limited_claim.sql, in_claim_transaction). ``buckets``: claim only from these (buckets.py),
    in both paths; None: from every bucket.
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
        "buckets": list(buckets) if buckets is not None else None,
    }
    rows: list[tuple[Any, ...]] = []  # what the statements took: committed, this worker's
    limited = check_limited
    try:
        limited = _claim_into(rows, conn, schema, params, n, check_limited, mark, claim_session)
    except psycopg.Error as exc:
        # A later statement failed after an earlier one took rows (committed: running, leased
        # to this worker): they are handed to the worker all the same, not left unheartbeated
        # until their lease lapses.
        if not rows:
            raise
        log.warning(
            "event=claim_partly_failed worker=%s taken=%s error=%s sqlstate=%s (running what was taken)",
            worker_id,
            len(rows),
            type(exc).__name__,
            exc.sqlstate,
        )
    if mark is not None:  # the fast path's rows carry their claim key (the limited path's do not)
        mark.passed([(row[6], row[7], row[0]) for row in rows if len(row) > 6])
    return [Claim(*row[:6]) for row in rows], limited


def _claim_into(
    rows: list[tuple[Any, ...]],
    conn: psycopg.Connection,
    schema: str,
    params: dict[str, Any],
    n: int,
    check_limited: bool,
    mark: ClaimMark | None,
    claim_session: bool,
) -> bool:
    """The statements of ``claim_batch``: each one's rows are added to ``rows`` as soon as it
    returns them (the caller keeps them if a later one fails); returns whether limited queues
    had work for this worker."""
    behind_looked = False
    if mark is not None and mark.look_behind_due(time.monotonic()):
        rows += _look_behind(conn, schema, params, n, mark, claim_session)
        behind_looked = True
    # While a pass through the heap covers past the mark too (the walk from the mark itself was
    # cancelled), it is the only walk: the mark's would only be cancelled again.
    if len(rows) < n and not (mark is not None and mark.slices is not None and mark.slices.whole):
        walk_from = mark.key if mark is not None else START_KEY
        started = time.monotonic()
        try:
            past = _claim_rows(
                conn, render(CLAIM, schema), {**params, "n": n - len(rows), **_after(walk_from)}, claim_session
            )
        except psycopg.errors.QueryCanceled:
            if mark is None:
                raise
            # The walk from the mark itself is too dear for the server's statement_timeout
            # (a fresh process walking from the start through a long hold's dead entries):
            # slices of the heap find what it would have, past the mark too.
            mark.walk_cancelled(started, time.monotonic(), _ready_blocks(conn, schema), whole=True)
            log.warning(
                "event=claim_walk_cancelled from=mark took_s=%.3f (going on in slices of the heap)",
                time.monotonic() - started,
            )
            past = []
        rows += past
        if mark is not None and walk_from == START_KEY and mark.slices is None:
            mark.rescanned(started, time.monotonic())  # a walk from the start looked behind everything
            behind_looked = True
        if mark is not None and not behind_looked and len(rows) < n and mark.may_look_behind(time.monotonic()):
            # Short past the mark: the rest may be behind it.
            rows += _look_behind(conn, schema, params, n - len(rows), mark, claim_session)
    limited_queues: list[str] = []
    if check_limited:
        limited_queues = [
            row[0] for row in conn.execute(render(limited_claim.SQL.limited_with_work, schema), params).fetchall()
        ]
    if limited_queues and len(rows) < n:
        rows += claim_limited(conn, schema, {**params, "n": n - len(rows)}, limited_queues)
    return bool(limited_queues)


def _look_behind(
    conn: psycopg.Connection,
    schema: str,
    params: dict[str, Any],
    n: int,
    mark: ClaimMark,
    claim_session: bool,
) -> list[tuple[Any, ...]]:
    """Claim up to ``n`` rows behind the mark: a walk of the index from the start, or, while
    such walks are cancelled by the server, the next slice of a pass through the heap."""
    started = time.monotonic()
    if mark.walk_index(started):
        try:
            rows = _claim_rows(conn, render(CLAIM_BEHIND, schema), {**params, "n": n, **_upto(mark.key)}, claim_session)
        except psycopg.errors.QueryCanceled:
            mark.walk_cancelled(started, time.monotonic(), _ready_blocks(conn, schema))
            log.warning(
                "event=claim_walk_cancelled from=start took_s=%.3f (going on in slices of the heap)",
                time.monotonic() - started,
            )
            return []
        mark.rescanned(started, time.monotonic())
        return rows
    if mark.slices is None:  # index walks barred for now: a new pass through the heap
        mark.slices = BehindPass(blocks=_ready_blocks(conn, schema))
    slices = mark.slices
    lo, hi = slices.next_block, slices.next_block + slices.span
    upto = END_KEY if slices.whole else mark.key
    try:
        rows = _claim_rows(
            conn,
            render(CLAIM_BEHIND_SLICE, schema),
            {**params, "n": n, "lo": f"({lo},0)", "hi": f"({hi},0)", **_upto(upto)},
            claim_session,
        )
    except psycopg.errors.QueryCanceled:
        slices.cancelled(time.monotonic())
        log.warning("event=claim_slice_cancelled blocks=%s-%s (a quarter of them next)", lo, hi)
        return []
    slices.sliced(started, time.monotonic())
    log.debug(
        "event=claim_slice blocks=%s-%s of=%s took_s=%.3f claimed=%s",
        lo,
        hi,
        slices.blocks,
        time.monotonic() - started,
        len(rows),
    )
    if slices.done:
        mark.pass_ended(time.monotonic())
    return rows


def _claim_rows(
    conn: psycopg.Connection, statement: Any, params: dict[str, Any], claim_session: bool
) -> list[tuple[Any, ...]]:
    """Run one claim statement: alone on the worker's claim session (it commits on the server,
    no client round trip before its COMMIT), else in a transaction that rules out the sort and
    bounds how long the server lets it sit idle."""
    if claim_session:
        return conn.execute(statement, params).fetchall()
    with conn.transaction():
        conn.execute(
            limited_claim.SQL.in_claim_transaction, {"sort": "off", "idle_ms": str(idle_in_claim_ms(params["lease"]))}
        )
        return conn.execute(statement, params).fetchall()


def _ready_blocks(conn: psycopg.Connection, schema: str) -> int:
    """The ready table's size in blocks now."""
    ready = f"{quote_identifier(schema)}.executions_ready"
    row = conn.execute(SQL.ready_blocks, {"ready": ready}).fetchone()
    return int(row[0]) if row is not None else 0


def _after(key: tuple[int, datetime, int]) -> dict[str, Any]:
    """The claim statement's start key (exclusive) as its parameters."""
    return {"after_p": key[0], "after_at": key[1], "after_id": key[2]}


def _upto(key: tuple[int, datetime, int]) -> dict[str, Any]:
    """The look behind's end key (inclusive) as its parameters."""
    return {"upto_p": key[0], "upto_at": key[1], "upto_id": key[2]}
