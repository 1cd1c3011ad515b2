"""The worker's maintenance: one thread per duty, so that none waits for another.

The heartbeat (one UPDATE renews every lease it can lock, skipping rows another session holds
locked, on a session of its own), the lease sweep, the sweep of waits and deadlines, the
schedules' ticks and the once-a-minute upkeep: a duty stuck on a lock or a slow statement (a
held snapshot, a statement timeout) delays no other, above all no heartbeat.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from logging import Logger
from typing import Any, Protocol, TypeVar

import psycopg

from kestrel_core.base.masking import first_line
from kestrel_core.db.connection import OwnSession
from kestrel_core.dispatch import claim as claim_mod
from kestrel_core.dispatch import deadlines, sweeper
from kestrel_core.dispatch import lease as lease_mod
from kestrel_core.dispatch.buckets import Claims
from kestrel_core.engine import scheduler
from kestrel_core.engine.fleet import Fleet
from kestrel_core.engine.worker_state import Lifecycle, WorkerState
from kestrel_core.workflow.contracts import Claimed, EngineSettings

T = TypeVar("T")


class Maintained(Protocol):
    """What the duties use of their worker (engine/worker.py's Worker)."""

    schema: str
    worker_id: str
    lease: timedelta
    sweep_interval: float
    settings: EngineSettings
    log: Logger
    lifecycle: Lifecycle
    concurrency: int
    claims: Claims
    fleet: Fleet
    _wake: threading.Event
    _lock: threading.Lock
    _inflight: dict[tuple[int, int], Claimed]

    def count(self, key: str) -> None: ...

    def db(
        self, fn: Callable[[psycopg.Connection], T], *, window: float | None = None, interruptible: bool = True
    ) -> T: ...

    def _spawn(self, target: Callable[[], Any], name: str) -> threading.Thread: ...


# How soon the heartbeat tries again for a lease whose row another session held locked (or
# after a failed beat).
HEARTBEAT_BUSY_RETRY_S = 0.2


class Maintenance:
    """A worker's duties besides claiming and running."""

    def __init__(self, worker: Maintained, *, dsn: str, transaction_pooling: bool) -> None:
        self.w = worker
        # The heartbeat's session of its own: it never waits for a pooled connection, nor long
        # for a lock (a relation lock of a partition being dropped): its statement skips locked
        # rows, and gives up on any other lock after a tenth of the lease. Through PgBouncer
        # (transaction pooling) a session setting does not hold: each beat is then a
        # transaction that sets the bound for itself (lease.py, in_bounded_transaction).
        lock_ms = max(100, int(worker.lease.total_seconds() * 1000 / 10))
        self._beat_lock_ms = lock_ms if transaction_pooling else None
        self._session = OwnSession(
            dsn,
            application_name="kestrel-worker-heartbeat",
            settings={} if transaction_pooling else {"lock_timeout": str(lock_ms)},
            prepare=not transaction_pooling,
        )
        self._lease_sweep = sweeper.LeaseSweep()
        self._busy_before: set[tuple[int, int]] = set()  # the heartbeat thread's own

    def close(self) -> None:
        """Close the heartbeat's session."""
        self._session.close()

    def start(self) -> list[threading.Thread]:
        """One thread per duty, so that a duty waiting on the database (a lock, a slow walk
        under a held snapshot, a statement timeout) delays no other: above all, no lease goes
        unrenewed because a sweep or a tick is stuck. The heartbeat's thread comes first (the
        stop waits for it alone: Worker.stop)."""
        duties: tuple[tuple[str, Callable[[], float]], ...] = (
            ("heartbeat", self.heartbeat),
            ("sweep-leases", self.sweep_leases),
            ("sweep-waits", self.sweep_waits),
            ("ticks", self.tick_schedules),
            ("upkeep", self.minute_upkeep),
        )
        first = time.monotonic()
        threads: list[threading.Thread] = []
        for name, duty in duties:
            later = sweeper.FOLD_EVERY_S * random.uniform(0.1, 1.0) if name == "upkeep" else 0.0
            threads.append(self.w._spawn(functools.partial(self._duty_loop, duty, first + later), name))
        return threads

    def _duty_loop(self, duty: Callable[[], float], first: float) -> None:
        """Run ``duty`` until the worker goes quiet; it returns how long until its next run.
        Every duty goes on while the worker drains: its executions still run, and it still
        counts in the fleet whose sweeps and ticks it takes turns at (fleet.py)."""
        state = self.w.lifecycle
        state.wait(WorkerState.QUIET, max(0.0, first - time.monotonic()))
        while not state.reached(WorkerState.QUIET):
            try:
                pause = duty()
            except Exception:  # a bug or an unexpected error: log it, never lose the duty's thread
                self.w.log.exception("event=maintenance_crashed worker=%s duty=%s", self.w.worker_id, duty.__name__)
                pause = 1.0
            state.wait(WorkerState.QUIET, max(0.01, pause))

    def heartbeat(self) -> float:
        """Renew the leases; returns the seconds until the next beat: a third of the lease, or
        HEARTBEAT_BUSY_RETRY_S while a lease could not be renewed because another session held
        its row locked (renewed as soon as the lock is gone)."""
        beat_every = self.w.lease.total_seconds() / 3
        with self.w._lock:
            before = dict(self.w._inflight)
        # none while draining: it polls no more (fleet.py)
        free = 0 if self.w.lifecycle.reached(WorkerState.DRAINING) else max(0, self.w.concurrency - len(before))
        try:
            beat = self._session.run(
                lambda c: lease_mod.heartbeat(
                    c,
                    self.w.schema,
                    self.w.worker_id,
                    self.w.lease,
                    sorted({eid for eid, _ in before}),
                    free_slots=free,
                    lock_timeout_ms=self._beat_lock_ms,
                )
            )
        except psycopg.Error as exc:
            self.w.log.warning(
                "event=heartbeat_failed worker=%s error=%r", self.w.worker_id, first_line(exc, self.w.settings.dsn)
            )
            return min(beat_every, HEARTBEAT_BUSY_RETRY_S)
        self.w.fleet.full_said = free == 0
        self._read_fleet()
        held = beat.held
        # A row mid-boundary (this worker's own group commit) is locked for milliseconds: busy
        # at one beat is normal. Busy at two beats in a row, someone holds it: say so, and try
        # again soon rather than in a third of the lease.
        lingering, self._busy_before = beat.busy & self._busy_before, beat.busy
        if lingering:
            self.w.log.warning(
                "event=lease_busy worker=%s execution_ids=%s (its row locked by another session; "
                "the sweep leaves it to this worker, which renews it once the lock is gone)",
                self.w.worker_id,
                sorted(eid for eid, _ in lingering),
            )
        for key, claimed in before.items():
            if key not in held and not claimed.lost.is_set():
                with self.w._lock:
                    still_running = key in self.w._inflight
                if still_running:
                    claimed.lost.set()
                    self.w.log.warning(
                        "event=claim_lost worker=%s execution_id=%s epoch=%s (swept, "
                        "cancelled or reclaimed; stopping at the next step)",
                        self.w.worker_id,
                        key[0],
                        key[1],
                    )
        return min(beat_every, HEARTBEAT_BUSY_RETRY_S) if lingering else beat_every

    def _read_fleet(self) -> None:
        """Count the live fleet on the heartbeat's session (fleet.py); on an error the last count
        stands, until the next beat."""
        w = self.w
        try:
            self._session.run(
                lambda c: w.fleet.read(c, w.schema, worker_id=w.worker_id, lease=w.lease, claims=w.claims)
            )
        except psycopg.Error as exc:
            w.log.warning("event=fleet_read_failed worker=%s error=%r", w.worker_id, first_line(exc, w.settings.dsn))

    def _passes_turn(self) -> bool:
        """Whether this worker leaves this turn at a fleet-wide duty to the rest of the fleet."""
        taken = self.w.fleet.turn()
        self.w.count("turns_taken" if taken else "turns_passed")
        return not taken

    def sweep_leases(self) -> float:
        """Re-enqueue lapsed leases; returns the seconds until the next sweep. The sweep reads
        every running row's index entry, and under a held snapshot every dead one of each past
        claim: every sixth of the lease, paced by its cost as the claim's walks from
        the start are, but once a lease at least; a sweep the server cancels goes on owner by
        owner (sweeper.LeaseSweep)."""
        every = max(self.w.sweep_interval, self.w.lease.total_seconds() / 6)
        if self._passes_turn():
            return every * random.uniform(0.8, 1.2)
        started = time.monotonic()
        try:
            expired = self.w.db(lambda c: self._lease_sweep.run(c, self.w.schema), window=0)
        except psycopg.Error as exc:
            self.w.log.warning(
                "event=sweep_failed worker=%s error=%r", self.w.worker_id, first_line(exc, self.w.settings.dsn)
            )
            expired = []
        if expired:
            self.w.log.warning("event=leases_expired worker=%s reenqueued=%s", self.w.worker_id, expired)
            self.w._wake.set()
        if self._lease_sweep.by_owner:  # full sweeps cancelled: the dead owners every interval
            return self.w.sweep_interval
        took = time.monotonic() - started
        return max(every, claim_mod.paced_by_cost(took, cap=self.w.lease.total_seconds()))

    def sweep_waits(self) -> float:
        """Wake due waits and end executions past their deadline; returns the seconds until the
        next sweep."""
        if self._passes_turn():
            return self.w.sweep_interval * random.uniform(0.8, 1.2)
        try:
            woken = self.w.db(lambda c: sweeper.sweep_waits(c, self.w.schema), window=0)
            late = self.w.db(lambda c: deadlines.sweep_deadlines(c, self.w.schema), window=0)
        except psycopg.Error as exc:
            self.w.log.warning(
                "event=sweep_failed worker=%s error=%r", self.w.worker_id, first_line(exc, self.w.settings.dsn)
            )
        else:
            if late:
                self.w.log.warning("event=deadline_passed worker=%s ended=%s", self.w.worker_id, late)
            if woken:
                self.w.log.info("event=waits_due worker=%s reenqueued=%s", self.w.worker_id, woken)
                self.w._wake.set()
        return self.w.sweep_interval * random.uniform(0.8, 1.2)

    def minute_upkeep(self) -> float:
        """About once a minute: fold the counters of old id blocks, record the
        dashboard's closed activity minutes, drop ready rows gone stale, create the history's
        id ranges ahead. A fleet-wide duty (fleet.py)."""
        if self._passes_turn():
            return sweeper.FOLD_EVERY_S * random.uniform(0.8, 1.2)
        jobs: tuple[tuple[str, Callable[[psycopg.Connection, str], int]], ...] = (
            ("ensure_partitions", sweeper.ensure_partitions),
            ("fold_counts", sweeper.fold_counts),
            ("fold_activity", sweeper.fold_activity),
            ("drop_stale_ready", sweeper.drop_stale_ready),
        )
        for event, job in jobs:
            try:
                done = self.w.db(functools.partial(_on_schema, job, self.w.schema), window=0)
            except psycopg.Error as exc:
                self.w.log.warning(
                    "event=%s_failed worker=%s error=%r", event, self.w.worker_id, first_line(exc, self.w.settings.dsn)
                )
                continue
            if event == "drop_stale_ready" and done:
                self.w.log.info("event=stale_ready_dropped worker=%s rows=%s", self.w.worker_id, done)
            if event == "ensure_partitions" and done:
                self.w.log.info("event=partitions_created worker=%s ranges=%s", self.w.worker_id, done)
        return sweeper.FOLD_EVERY_S * random.uniform(0.8, 1.2)

    def tick_schedules(self) -> float:
        # Every worker ticks every schedule, its workflow registered here or not: the run waits
        # for a worker that has the code (``status`` says when none does).
        if self._passes_turn():
            return self.w.sweep_interval * random.uniform(0.8, 1.2)
        try:
            if self.w.db(lambda c: scheduler.tick_due(c, self.w.schema, worker=self.w.worker_id), window=0).enqueued:
                self.w._wake.set()
        except psycopg.Error as exc:
            self.w.log.warning(
                "event=schedule_tick_failed worker=%s error=%r", self.w.worker_id, first_line(exc, self.w.settings.dsn)
            )
        return self.w.sweep_interval * random.uniform(0.8, 1.2)


def _on_schema(job: Callable[[psycopg.Connection, str], int], schema: str, conn: psycopg.Connection) -> int:
    return job(conn, schema)
