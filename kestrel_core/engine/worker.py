"""The worker: claims executions, runs them, heartbeats its leases and sweeps.

Threads, each with one job:
- the claim loop: claims up to the free slots in one statement, woken by NOTIFY, by a slot
  freeing, or by the poll timer (polling is the only mode with ``listen=False``, for PgBouncer);
- ``concurrency`` runner threads for sync workflows, and one asyncio loop for async ones
  (runners.py: supervised, a dead thread replaced and its claim handed back);
- the group commit writer: the step boundaries of all of them, in batches (group_commit.py);
- the listener: one connection LISTENing on the schema's channel;
- maintenance, one thread per duty so that none waits for another (maintenance.py): the
  heartbeat, the lease sweep, the sweep of waits and deadlines, the ticks, the upkeep.
Running one claimed execution (replay, call, record the outcome) is runner.py's job.
Stateless and fungible: everything it knows is in Postgres, so killing it loses nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar, Unpack

import psycopg

from kestrel_core.admin import prune as prune_mod
from kestrel_core.base.backoff import Backoff
from kestrel_core.base.errors import KestrelError
from kestrel_core.base.masking import first_line
from kestrel_core.db.connection import OwnSession, make_pool
from kestrel_core.db.retry import RETRY, Verdict
from kestrel_core.dispatch import buckets as buckets_mod
from kestrel_core.dispatch import claim as claim_mod
from kestrel_core.dispatch import lease as lease_mod
from kestrel_core.dispatch import sweeper
from kestrel_core.dispatch.limited_claim import idle_in_claim_ms
from kestrel_core.durable.boundary import Boundary, Outcome
from kestrel_core.durable.group_commit import GroupCommit, LazyOpen
from kestrel_core.engine import listener, registration
from kestrel_core.engine.fleet import Fleet
from kestrel_core.engine.maintenance import Maintenance
from kestrel_core.engine.runners import RunnerThreads
from kestrel_core.engine.settings import WorkerOptions, WorkerSettings
from kestrel_core.engine.signals import SignalRelay
from kestrel_core.engine.worker_state import Lifecycle, WorkerState
from kestrel_core.workflow import offload
from kestrel_core.workflow.contracts import Claimed, Deployment, EngineSettings, Flag, Registry

T = TypeVar("T")

log = logging.getLogger("kestrel.worker")

# The claim loop's pause after a failed claim (it claims again forever: a claim is never owed).
# Every other write retries as the connection seam's policy says (db/retry.py).
_CLAIM_RETRY = Backoff(0.2, cap=5.0)
# How long a stop lets a claim under way finish before it cancels it (one claim: milliseconds).
CLAIM_STOP_WAIT_S = 0.5
# How long a stop's release of its leases, and its retirement, wait for a lock they cannot skip
# (a LOCK TABLE, a partition being dropped, its own row locked by another session) before they
# leave the leases to lapse and be swept, and the row to stop counting once its beats lapse.
RELEASE_LOCK_MS = 2000


class Worker(RunnerThreads):
    """Runs the workflows registered on a Kestrel app. Use ``run()`` (blocking, handles
    SIGINT/SIGTERM) or ``start()`` / ``stop()``."""

    def __init__(
        self, app: Deployment, settings: WorkerSettings | None = None, /, **options: Unpack[WorkerOptions]
    ) -> None:
        """``settings``, or the same fields as keyword arguments (``Worker(app, concurrency=4)``),
        or both (the keywords replace those fields); every value is checked by WorkerSettings."""
        config = WorkerSettings.of(settings, **options)
        pooling = app.transaction_pooling if config.transaction_pooling is None else config.transaction_pooling
        # Every derived value filled in: the listen mode, the grace, the retry windows, the id.
        self.config = config.resolved(transaction_pooling=pooling, worker_id=registration.default_worker_id())
        # Only what the worker uses of the app: its registrations and its connection settings.
        self.registry = Registry(workflows=app.workflows, queues=app.queues, schedules=app.schedules)
        self.settings = EngineSettings(dsn=app.dsn, schema=app.schema, transaction_pooling=pooling)
        self.schema = app.schema
        c = self.config
        self.concurrency = c.concurrency
        self.lease = c.lease
        self.worker_id: str = c.worker_id or ""  # resolved: never empty
        self.listen = bool(c.listen)
        self.poll_interval = c.poll_interval
        self.sweep_interval = c.sweep_interval
        self.grace: timedelta = c.grace or timedelta(0)  # resolved: the lease if not given
        # How long a step boundary keeps retrying a write while the database is unreachable.
        self.db_retry_window = float(c.db_retry_window or 0.0)
        # How long start() waits for an unreachable database (a worker started during an outage,
        # or before the server is up, must not die: nothing would replace it).
        self.startup_timeout = float(c.startup_timeout or 0.0)
        # Retention on a schedule (every worker may prune; batches skip each other's rows).
        self.prune_older_than = c.prune_older_than
        self.prune_every = c.prune_every
        self.prune_max_batches = c.prune_max_batches
        self.log = log
        self.names = sorted(app.workflows)
        self.versions = [app.workflows[n].version for n in self.names]  # parallel to names
        self.queues = list(c.queues) if c.queues is not None else None  # sorted, unique; None: every queue
        # Look for limited queues with work on every claim while there are any; else once per
        # poll interval (queues limited by another deployment's declarations).
        self._limited_declared = any(q.limited for q in app.queues.values())
        self._limited_seen = False
        self._next_limited_check = 0.0
        self._claim_mark = claim_mod.ClaimMark()  # only the claim loop's thread uses it
        self._claiming = threading.Lock()  # held by the claim loop from a claim to its dispatch
        # With buckets: the share this worker serves, refreshed every third of the lease, and
        # the claim without buckets it falls back on, at most once per poll interval (the
        # least the claim loop sleeps) while that finds nothing, with a mark of its own
        # (buckets.py says why nothing starves).
        self.claims = buckets_mod.Claims(self.names, self.versions, self.queues)
        self._served = (
            None
            if c.buckets is None
            else buckets_mod.Served(
                c.buckets, self.worker_id, self.claims, refresh_every=self.lease.total_seconds() / 3
            )
        )
        # The live fleet, read at every heartbeat: its fleet-wide duties are shared (fleet.py).
        self.fleet = Fleet()
        self._fallback = buckets_mod.Fallback(every=0.8 * self.poll_interval)
        self._fallback_mark = claim_mod.ClaimMark()
        self.stats = {
            "claimed": 0,
            "succeeded": 0,
            "failed": 0,
            "parked": 0,
            "lost": 0,
            "refused_writes": 0,
            "released": 0,
            "turns_taken": 0,  # fleet-wide duties run by this worker (fleet.py)
            "turns_passed": 0,  # and left to the rest of the fleet
        }

        # Where the worker is in its life (worker_state.py: the states, the moves, what each
        # means to the threads). ``draining`` is the state the workflow contexts wait on.
        self.lifecycle = Lifecycle()
        self.draining: Flag = self.lifecycle.flag(WorkerState.DRAINING)
        # Not a state: the claim loop's doorbell (a NOTIFY, a slot freed, a stop).
        self._wake = threading.Event()
        self._maintenance: list[threading.Thread] = []  # the duties' threads (maintenance.py)
        self._listener: listener.Listener | None = None
        # Keyed by claim (execution id, claim epoch), not by execution: after a freeze this
        # worker may claim an execution again while the older claim's thread still finishes
        # its step; that thread's cleanup must not drop the newer claim from the heartbeat.
        self._inflight: dict[tuple[int, int], Claimed] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._runnable: queue.Queue[Claimed | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        # The runner threads by slot, and the claim each is running: a thread that died is
        # replaced and its claim handed back (_supervise_runners).
        self._runners: list[threading.Thread] = []
        self._running: dict[int, Claimed] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        # The async loop's engine executor: the blocking work of async workflows (engine
        # writes, plain-function steps; offload.py). Coroutine steps run on the loop and hold
        # none of these threads while they await.
        self.async_threads = 2 * self.concurrency + 4
        self._pool = make_pool(
            app.dsn,
            min_size=2,
            max_size=self.concurrency + 6,  # + claim fallback, group commit, sweeps, ticks, upkeep, prune
            application_name="kestrel-worker",
            prepare=not pooling,
            name=f"kestrel-worker-{self.worker_id}",
            check=False,  # db() retries; checking would add a round trip to every step
        )
        # The claim's session of its own (not the pool's): a stop can cancel a claim waiting on
        # a lock (stop), and it keeps the claim's plan setting, so that a claim is one statement
        # that commits on the server (claim.py). Through PgBouncer (transaction pooling) session
        # settings do not hold: each claim is then a transaction that sets them.
        self._claim_settings_hold = not pooling
        self._claim_session = OwnSession(
            app.dsn,
            application_name="kestrel-worker-claim",
            settings={}
            if pooling
            else {
                **claim_mod.CLAIM_SESSION_SETTINGS,
                "idle_in_transaction_session_timeout": str(idle_in_claim_ms(self.lease)),
            },
            prepare=not pooling,
        )
        self._duties = Maintenance(self, dsn=app.dsn, transaction_pooling=pooling)
        # Step boundaries of all running executions, written in batches (group_commit.py).
        self._group = GroupCommit(self.db, self.schema, name=f"kestrel-group-commit-{self.worker_id}")

    # -- lifecycle ---------------------------------------------------------------------------

    def run(self, on_started: Callable[[], None] | None = None) -> None:
        """Start, block until SIGINT/SIGTERM, then shut down gracefully. ``on_started`` is
        called once the worker serves (not if a signal ended its wait for the database)."""
        stop = threading.Event()

        def on_signal(_signum: int) -> None:
            # The first signal drains (and ends a start() still waiting for the database); a
            # second one stops waiting for running steps.
            self.lifecycle.move(WorkerState.HURRYING if stop.is_set() else WorkerState.DRAINING)
            stop.set()

        with SignalRelay(on_signal):
            try:
                self.start()
                if on_started is not None and self._threads:
                    on_started()
                stop.wait()
                self.log.info(
                    "event=shutdown_requested worker=%s in_flight=%s grace_s=%s",
                    self.worker_id,
                    len(self._inflight),
                    self.grace.total_seconds(),
                )
            finally:
                self.stop()

    def start(self) -> Worker:
        """Register (waiting up to ``startup_timeout`` for an unreachable database), then start
        the claim loop, runners, listener and maintenance threads."""
        if not self.names:
            raise ValueError("this app registers no workflow: decorate functions with @app.workflow")
        self.lifecycle.move(WorkerState.STARTING)
        if not registration.register(self):
            return self  # stopped while waiting for the database
        self._pool.open()  # fills in the background; db() waits for a connection and retries
        self._group.start()
        # The loop before the claim loop: its first claim may be of an async workflow (one
        # dispatched before the loop existed killed the claim thread, the claim left held).
        if any(wf.is_async for wf in self.registry.workflows.values()):
            self._loop = asyncio.new_event_loop()
            # The engine's own executor, not the loop's default, which workflow code can reach
            # and shut down (offload.py).
            engine_threads = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.async_threads, thread_name_prefix="kestrel-async"
            )
            offload.use(self._loop, engine_threads)
            self._spawn(self._run_loop, "asyncio")
        self._spawn(self._claim_loop, "claim")
        self._maintenance = self._duties.start()
        if self.listen:
            self._listener = listener.Listener(self.settings, set(self.names), self._wake, self.log, self.worker_id)
            self._spawn(self._listener.run, "listen")
        if (older_than := self.prune_older_than) is not None:  # its own thread: never delays a heartbeat
            self._spawn(lambda: self._prune_loop(older_than), "prune")
        for slot in range(self.concurrency):
            self._runners.append(self._spawn(functools.partial(self._runner_loop, slot), f"runner-{slot}"))
        self.lifecycle.advance(WorkerState.RUNNING, only_from=WorkerState.STARTING)
        self.log.info(
            "event=worker_started worker=%s workflows=%s concurrency=%s lease_s=%s listen=%s queues=%s",
            self.worker_id,
            ",".join(f"{n}@{v}" for n, v in zip(self.names, self.versions)),
            self.concurrency,
            self.lease.total_seconds(),
            self.listen,
            ",".join(self.queues or ["*"]),
        )
        return self

    def stop(self, grace: timedelta | None = None) -> None:
        """Stop claiming, let running steps finish (up to ``grace``), release the rest, exit."""
        state = self.lifecycle
        if state.reached(WorkerState.STOPPED) or not self._threads:  # stopped already, or never started
            state.move(WorkerState.DRAINING)  # a start() waiting for the database gives up
            return
        state.move(WorkerState.DRAINING)
        self._wake.set()
        deadline = time.monotonic() + (self.grace if grace is None else grace).total_seconds()
        if self._wait_for_claim(deadline):
            self._claiming.release()
        with self._idle:
            while self._inflight and time.monotonic() < deadline and not state.reached(WorkerState.HURRYING):
                self._idle.wait(timeout=max(0.0, min(0.2, deadline - time.monotonic())))
        state.move(WorkerState.PAST_GRACE)  # a write still waiting for the database fails now
        self._group.stop()
        # No heartbeat may follow the retirement: its UPDATE of the workers row clears
        # stopped_at, and one in flight when this process retires left the row looking live.
        state.move(WorkerState.QUIET)
        # The heartbeat's own (its statement gives up on a lock after a tenth of the lease) is
        # waited for: no beat may follow the retirement. A sweep or a tick waiting on a lock (a
        # LOCK TABLE) may go on after it, harmlessly: they share a second.
        heartbeat, *others = self._maintenance
        heartbeat.join(timeout=5.0)
        others_by = time.monotonic() + 1.0
        for thread in others:
            thread.join(timeout=max(0.0, others_by - time.monotonic()))
        released: list[int] = []
        try:
            released = self.db(
                lambda c: lease_mod.release_all(c, self.schema, self.worker_id, lock_timeout_ms=RELEASE_LOCK_MS),
                window=5.0,
                interruptible=False,
            )
            self.stats["released"] += len(released)
        except psycopg.Error as exc:  # whatever the database says, the stop goes on
            self.log.warning(
                "event=release_failed worker=%s error=%r (leases will lapse and be swept)",
                self.worker_id,
                first_line(exc, self.settings.dsn),
            )
        try:
            self.db(
                lambda c: registration.retire(c, self.schema, self.worker_id, lock_timeout_ms=RELEASE_LOCK_MS),
                window=5.0,
                interruptible=False,
            )
        except psycopg.Error as exc:  # whatever the database says, the stop goes on
            self.log.warning(
                "event=retire_failed worker=%s error=%r (its row stops counting as live once its beats lapse)",
                self.worker_id,
                first_line(exc, self.settings.dsn),
            )
        state.move(WorkerState.STOPPED)
        if self._listener is not None:
            self._listener.stop()
        for _ in range(self.concurrency):
            self._runnable.put(None)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=2.0)
        if self._listener is not None:
            self._listener.close()
        self._duties.close()
        self._claim_session.close()
        self._pool.close(timeout=2.0)
        self.log.info("event=worker_stopped worker=%s released=%s stats=%s", self.worker_id, len(released), self.stats)

    def _wait_for_claim(self, deadline: float) -> bool:
        """Wait for a claim under way to be dispatched (holding ``_claiming`` once it is): it
        takes milliseconds unless it waits for a lock another session holds; then it is
        cancelled, each of its statements, so that it commits nothing after the stop, whatever
        the grace (which is for running steps). False: still under way after the grace and 5 s
        of cancels (its session's close cancels it again)."""
        give_up = max(deadline, time.monotonic() + 5.0)
        while not self._claiming.acquire(timeout=CLAIM_STOP_WAIT_S):
            if time.monotonic() >= give_up:
                return False
            self._claim_session.interrupt()
        return True

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, target: Callable[[], Any], name: str) -> threading.Thread:
        thread = threading.Thread(
            target=functools.partial(self._thread_main, target), name=f"kestrel-{name}", daemon=True
        )
        thread.start()
        self._threads.append(thread)
        return thread

    def _thread_main(self, target: Callable[[], Any]) -> None:
        """Run one of the worker's threads; whatever ends it is logged here, not handed to
        ``threading.excepthook`` (which drops a SystemExit unseen): the claim loop replaces a
        runner thread that ended and hands its claim back."""
        try:
            target()
        except BaseException:
            self.log.exception("event=thread_died worker=%s thread=%s", self.worker_id, threading.current_thread().name)

    # -- database access ---------------------------------------------------------------------

    def db(
        self, fn: Callable[[psycopg.Connection], T], *, window: float | None = None, interruptible: bool = True
    ) -> T:
        """Run ``fn`` on a pooled connection, retrying as the connection seam's policy says
        (db/retry.py): while the database is unreachable (up to ``window`` seconds), a few
        times at once when the server rolled it back to end a deadlock, and after creating the
        history's ranges when an insert ran past them. Anything else the server answers (a
        statement timeout, a bad value) is raised at once. A stopping worker past its grace
        stops waiting (unless not ``interruptible``: its own last writes).

        Every write passed here is safe to repeat (fenced, ON CONFLICT, or checked).
        """
        tries = RETRY.attempts(window=self.db_retry_window if window is None else window)
        while True:
            conn: psycopg.Connection | None = None
            try:
                with self._pool.connection(timeout=max(1.0, min(10.0, tries.deadline - time.monotonic()))) as conn:
                    return fn(conn)
            except psycopg.Error as exc:
                again = tries.after(exc, conn)
                if again is None:
                    raise
                if again.verdict is Verdict.RANGES_BEHIND:
                    # a child's or a schedule's enqueue past the ranges the upkeep keeps ahead:
                    # create them now (busy or failing: the write, tried again, says so)
                    self.log.warning("event=ranges_behind worker=%s (creating them now)", self.worker_id)
                    with contextlib.suppress(psycopg.Error), self._pool.connection(timeout=10.0) as ahead:
                        sweeper.ensure_partitions(ahead, self.schema)
                else:
                    if again.verdict is Verdict.OUTAGE and self.lifecycle.reached(WorkerState.STOPPED):
                        raise
                    self.log.warning(
                        "event=%s worker=%s error=%r retry_in_s=%.2f",
                        "db_conflict_retry" if again.verdict is Verdict.CONFLICT else "db_retry",
                        self.worker_id,
                        first_line(exc, self.settings.dsn),
                        again.delay,
                    )
                if self.lifecycle.wait(WorkerState.PAST_GRACE if interruptible else WorkerState.STOPPED, again.delay):
                    raise

    def commit(self, boundary: Boundary, *, after: LazyOpen | None = None) -> Outcome:
        """Write one step boundary with the next group commit (see group_commit.py)."""
        return self._group.submit(boundary, after=after)

    def open_lazily(self, boundary: Boundary) -> LazyOpen:
        """Queue a first attempt's start without waiting (see group_commit.py)."""
        return self._group.open_lazily(boundary)

    def refused(self, execution_id: int, what: str) -> None:
        """Count and log a fenced write refused: this worker no longer holds the execution."""
        self.count("refused_writes")
        self.log.warning(
            "event=write_refused worker=%s execution_id=%s what=%r "
            "(no longer holds the claim: swept, cancelled or reclaimed)",
            self.worker_id,
            execution_id,
            what,
        )

    @property
    def buckets_served(self) -> list[int] | None:
        """The buckets this worker claims from now (with ``buckets``; kestrel_core.dispatch.buckets),
        as of its last look at the live workers; None: buckets off, it claims from every one."""
        return None if self._served is None else list(self._served.buckets)

    # -- threads -----------------------------------------------------------------------------

    def _claim_loop(self) -> None:
        # While the queue has a backlog, wait for a quarter of the slots to free before claiming
        # again: one claim statement per batch instead of one per finished execution.
        batch_floor = max(1, self.concurrency // 4)
        backlog = False
        timed_out = True
        found_none = False
        errors = 0
        while not self.draining.is_set():
            self._wake.clear()
            self._supervise_runners()
            with self._lock:
                free = self.concurrency - len(self._inflight)
            # A poll (nothing woke it, and its last claim found nothing) is shared among the
            # workers polling for the same work (fleet.py).
            if free > 0 and timed_out and found_none and not self.fleet.turn(poll=True):
                self.count("turns_passed")
            elif free > 0 and (timed_out or not backlog or free >= batch_floor):
                now = time.monotonic()
                check = self._limited_declared or self._limited_seen or now >= self._next_limited_check
                claimed = self._claim_and_dispatch(free, check)
                if claimed is None:  # keep claiming once the database is back
                    errors += 1
                    self.draining.wait(_CLAIM_RETRY.delay(errors - 1))
                    continue
                errors = 0
                if check:
                    self._next_limited_check = now + self.poll_interval
                backlog = len(claimed) == free
                found_none = not claimed
                if backlog and self.fleet.must_say_full:
                    self.fleet.say_full(self._claim_session.run, self.schema, worker_id=self.worker_id)
            timed_out = not self._wake.wait(self.poll_interval * random.uniform(0.8, 1.2))

    def _claim_and_dispatch(self, free: int, check: bool) -> list[claim_mod.Claim] | None:
        """Claim and hand what was claimed to the runners, holding ``_claiming``: a stop waits
        for a claim under way, so that what it commits is in flight before the stop waits for
        what runs (else it runs with its completion refused, and again elsewhere). None: the
        claim failed (logged)."""
        with self._claiming:
            if self.draining.is_set():  # the stop came between the loop's check and the lock
                return []
            sent = time.monotonic()  # before the claim is sent: see Claimed.fenced_at
            try:
                claimed, self._limited_seen = self._claim_free(free, check)
            except psycopg.Error as exc:
                self.log.warning(
                    "event=claim_failed worker=%s error=%r", self.worker_id, first_line(exc, self.settings.dsn)
                )
                return None
            for item in claimed:
                self._dispatch(item, sent)
            return claimed

    def _claim_free(self, free: int, check: bool) -> tuple[list[claim_mod.Claim], bool]:
        """Claim up to ``free`` executions: from every bucket, or (with buckets) from this
        worker's, then, if they came back short, from every bucket (buckets_mod.Fallback says
        how often); and whether limited queues had work."""
        call = functools.partial(
            claim_mod.claim_batch,
            schema=self.schema,
            worker_id=self.worker_id,
            names=self.names,
            lease=self.lease,
            versions=self.versions,
            queues=self.queues,
            check_limited=check,
            claim_session=self._claim_settings_hold,
        )
        served = self._served
        if served is None:
            return self._claim(functools.partial(call, n=free, mark=self._claim_mark))
        now = time.monotonic()
        if served.due(now) and self._claim(functools.partial(served.refresh, schema=self.schema, lease=self.lease)):
            self.log.info("event=buckets_served worker=%s buckets=%s", self.worker_id, served.buckets)
            self._claim_mark = claim_mod.ClaimMark()  # buckets new to it may lie behind the old mark
        claimed: list[claim_mod.Claim] = []
        limited = False
        # Once per poll interval a slot is kept for the claim without buckets, even while this
        # worker's own buckets would fill every slot (Fallback.overdue).
        own = free - 1 if self._fallback.overdue(now) else free
        if served.buckets and own > 0:
            claimed, limited = self._claim(
                functools.partial(call, n=own, mark=self._claim_mark, buckets=served.buckets)
            )
        if len(claimed) < free and self._fallback.due(now):
            try:
                more, more_limited = self._claim(
                    functools.partial(call, n=free - len(claimed), mark=self._fallback_mark)
                )
            except psycopg.Error as exc:
                # What the worker's own buckets took is committed (running, leased to it): it is
                # run all the same, as claim_batch runs what its earlier statements took.
                if not claimed:
                    raise
                self.log.warning(
                    "event=claim_partly_failed worker=%s taken=%s error=%r (running what was taken)",
                    self.worker_id,
                    len(claimed),
                    first_line(exc, self.settings.dsn),
                )
                return claimed, limited
            self._fallback.ran(now, found=bool(more))
            claimed, limited = claimed + more, limited or more_limited
        return claimed, limited

    def _claim(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """Run a claim on the claim session."""
        return self._claim_session.run(fn)

    def _dispatch(self, item: claim_mod.Claim, sent: float) -> None:
        held = Claimed(item, fenced_at=sent)
        with self._lock:
            self._inflight[(item.execution_id, item.claim_epoch)] = held
        self.count("claimed")
        self.log.info(
            "event=claimed worker=%s execution_id=%s workflow=%s epoch=%s",
            self.worker_id,
            item.execution_id,
            item.workflow_name,
            item.claim_epoch,
        )
        if self.registry.workflows[item.workflow_name].is_async:
            if (loop := self._loop) is None:  # it starts before the claim loop: an engine bug
                raise RuntimeError("an async workflow was claimed before the worker's event loop started")
            asyncio.run_coroutine_threadsafe(self._run_async(held), loop)
        else:
            self._runnable.put(held)

    def _prune_loop(self, older_than: timedelta) -> None:
        while not self.lifecycle.wait(WorkerState.STOPPED, self.prune_every * random.uniform(0.8, 1.2)):
            try:
                result = prune_mod.prune(
                    lambda fn: self.db(fn, window=0),
                    self.schema,
                    older_than=older_than,
                    by=f"worker:{self.worker_id}",
                    max_batches=self.prune_max_batches,
                )
            except (psycopg.Error, KestrelError) as exc:
                self.log.warning(
                    "event=prune_failed worker=%s error=%r", self.worker_id, first_line(exc, self.settings.dsn)
                )
                continue
            if result.deleted:
                self.log.info("event=pruned worker=%s deleted=%s", self.worker_id, result.deleted)

    def _minute_upkeep(self) -> float:
        """The once-a-minute upkeep now (maintenance.py)."""
        pause: float = self._duties.minute_upkeep()
        return pause

    def count(self, key: str) -> None:
        """Add one to ``stats[key]``."""
        with self._lock:
            self.stats[key] += 1
