"""The chaos run: worker processes, a producer, an approver, and a killer; then the checks.

Phases: (1) chaos for ``chaos_s`` seconds: executions are enqueued steadily (chains of sync
steps, every third one on a queue with limits, half of those under a concurrency key; and
async fan-outs that gather steps, then sleep) while the killer SIGKILLs random workers (a
replacement starts at once), SIGSTOPs one past its lease then SIGCONTs it, freezes every
worker (SIGSTOP past the lease, the operator requeues what they held, SIGCONT: each may claim
again what its own frozen threads still run), and restarts the PostgreSQL server (a clean
restart, then a crash); (2) calm: the
producer stops and the remaining work drains; (3) the workers get SIGTERM; (4) checks.py runs
every invariant on what is left in the database, and on the running counts of the limited
queue that a sampler thread read from the table every few milliseconds throughout.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from kestrel_console.embedded_pg import LocalCluster
from kestrel_core import ActionRefused, Kestrel, KestrelError
from tests.waiting import wait_until_none_left

from .checks import Disruption, Verdict, verify
from .sampler import LimitSampler
from .workers import REPO, WorkerPool
from .workload import DEADLINE_S, LEDGER_DDL, LIMITED_CONCURRENCY, LIMITED_QUEUE

if TYPE_CHECKING:
    import pytest

PENDING_GATES = """
SELECT w.execution_id, w.step_id, e.input->>'gate'
  FROM kestrel.workflow_waits w JOIN kestrel.workflow_executions e ON e.id = w.execution_id
 WHERE w.kind = 'approval' AND w.resolved_at IS NULL AND e.status = 'waiting'
"""
RUNNING = "SELECT owner_id, id, claim_epoch FROM kestrel.workflow_executions WHERE status = 'running'"
STILL_HELD = """
SELECT count(*) FROM kestrel.workflow_executions
 WHERE id = ANY(%s)
   AND (status = 'enqueued' OR (status = 'running' AND owner_id = %s AND claim_epoch = ANY(%s)))
"""
DECLARED = "SELECT concurrency FROM kestrel.queues WHERE name = %s"
STATUS = "SELECT status FROM kestrel.workflow_executions WHERE id = %s"
LOCK_ROW = "SELECT 1 FROM kestrel.workflow_executions WHERE id = %s FOR UPDATE"
UNFINISHED = "SELECT count(*) FROM kestrel.workflow_executions WHERE status IN ('enqueued', 'running', 'waiting')"


@dataclass
class ChaosConfig:
    chaos_s: float = 35.0  # how long the killer and the producer run
    drain_stall_s: float = 60.0  # then the rest finishes, unless no execution ends for this long
    workers: int = 3
    concurrency: int = 4
    lease_s: float = 4.0
    rate: float = 8.0  # executions enqueued per second during chaos
    kill_every_s: tuple[float, float] = (2.0, 4.0)
    restarts: int = 2  # database restarts (alternating clean restart and crash)
    stops: int = 2  # SIGSTOP/SIGCONT rounds
    freezes: int = 2  # SIGSTOP every worker / operator requeue / SIGCONT rounds
    fan_every: int = 4  # every n-th execution is an async fan-out (0: none)
    early_cancel_every: int = 10  # every n-th: a chain cancelled while its code runs before its first step
    failing_every: int = 12  # every n-th: a deadline before the first step, a SystemExit or a CancelledError step
    lock_every_s: tuple[float, float] = (1.0, 3.0)  # between outside row locks on running executions
    seed: int | None = None
    worker_dsn: str | None = None  # where workers connect (PgBouncer); default: the cluster
    transaction_pooling: bool = False
    keep_logs: bool = False  # worker logs are kept anyway when a check fails
    log: Callable[[str], None] = print


@dataclass
class ChaosReport:
    verdict: Verdict
    kills: int = 0
    stops: int = 0
    freezes: int = 0
    operator_requeues: int = 0  # executions a freeze's operator requeued
    restarts: int = 0
    early_cancels: int = 0  # cancels acknowledged while the chain's code ran before its first step
    locks: int = 0  # outside row locks held on running executions
    enqueued: int = 0
    refused_writes: int = 0
    leases_expired: int = 0
    seconds: float = 0.0
    log_dir: Path | None = None  # the worker logs (deleted after a clean run)
    disruptions: list[Disruption] = field(default_factory=list)

    def summary(self) -> str:
        v = self.verdict
        causes = ", ".join(f"{k} {n}" for k, n in sorted(v.duplicates_by_cause.items())) or "none"
        return (
            f"executions {v.executions} ({dict(v.statuses)}; async fan-outs {v.fan_outs}), "
            f"kills {self.kills}, stops {self.stops}, "
            f"freezes {self.freezes} (operator requeues {self.operator_requeues}), "
            f"restarts {self.restarts}, early cancels {self.early_cancels}, outside locks {self.locks}, "
            f"meant to fail and failed {v.failed_as_meant}, side effects {v.side_effects}, duplicated side effects "
            f"{v.duplicates} (by cause: {causes}), refused stale writes {self.refused_writes}, "
            f"leases swept {self.leases_expired}, attempts left open {v.open_attempts} / lost {v.attempts_lost}, "
            f"schedule ticks {v.ticks}, limited queue: {v.limited} executions, most running "
            f"{v.max_running} (limit {LIMITED_CONCURRENCY}) / per key {v.max_per_key} in "
            f"{v.limit_samples} samples, {self.seconds:.0f} s, "
            f"{'OK' if v.ok else f'{len(v.violations)} VIOLATION(S)'}"
        )


def prepare_database(cluster: LocalCluster, name: str) -> str:
    """A fresh database on the cluster, migrated, with the ledger table; returns its DSN."""
    dsn = cluster.create_database(name)
    with Kestrel(dsn) as app:
        app.migrate()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(LEDGER_DDL)
    return dsn


def run_chaos(cluster: LocalCluster, cfg: ChaosConfig, database: str = "chaos") -> ChaosReport:
    """One chaos run against ``cluster`` (which it restarts); returns the counts and the verdict."""
    return ChaosRun(cluster, cfg, database).run()


# The suite's short run (about a minute): pinned here, not left to the defaults (the long run's),
# because the tests' assertions count its disruptions.
SHORT_RUN = ChaosConfig(
    chaos_s=40.0, drain_stall_s=60.0, workers=3, concurrency=4, lease_s=4.0, rate=8.0, restarts=2, stops=2, freezes=2
)


def run_checked(
    cluster: LocalCluster, cfg: ChaosConfig, *, database: str, title: str, capsys: pytest.CaptureFixture[str]
) -> ChaosReport:
    """A chaos run in the suite: its summary printed under ``title``; its invariants must hold
    (else the violations, the run's log and where the worker logs are)."""
    lines: list[str] = []
    report = run_chaos(cluster, replace(cfg, log=lines.append), database=database)
    with capsys.disabled():
        print(f"\n{title}: {report.summary()}")
    assert report.verdict.ok, "\n".join(
        ["chaos run broke invariants:", *report.verdict.violations[:30], *lines, f"worker logs: {report.log_dir}"]
    )
    return report


class ChaosRun:
    """One run: its threads (producer, approver, killer) share the state kept here."""

    def __init__(self, cluster: LocalCluster, cfg: ChaosConfig, database: str) -> None:
        logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)  # outages are the point
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.started = time.monotonic()
        self.admin_dsn = prepare_database(cluster, database)
        worker_dsn = cfg.worker_dsn or self.admin_dsn
        # A fixed-port handle: a restart must come back where every DSN points.
        self.server = LocalCluster(cluster.data_dir, port=cluster.port, durable=cluster.durable)
        self.log_dir = Path(tempfile.mkdtemp(prefix="kestrel-chaos-logs-"))
        env = {
            **os.environ,
            "KESTREL_CHAOS_DSN": worker_dsn,
            "KESTREL_CHAOS_POOLING": "1" if cfg.transaction_pooling else "0",
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        self.pool = WorkerPool(env, self.log_dir, concurrency=cfg.concurrency, lease_s=cfg.lease_s)
        self.app = Kestrel(
            worker_dsn, transaction_pooling=cfg.transaction_pooling, application_name="kestrel-chaos-harness"
        )
        self.disruptions: list[Disruption] = []
        self.keys: set[str] = set()
        self.limited_keys: set[str] = set()  # those enqueued on the limited queue
        self.cancelled_keys: set[str] = set()  # those whose cancel was acknowledged
        self.sampler = LimitSampler(self.admin_dsn)
        self.counts: Counter = Counter()
        self.stop_chaos = threading.Event()
        self.stop_feeding = threading.Event()
        self.stop_approving = threading.Event()
        self.errors: list[BaseException] = []
        self.resumers: list[threading.Thread] = []

    def run(self) -> ChaosReport:
        cfg = self.cfg
        try:
            for _ in range(cfg.workers):
                self.pool.start_one()
            self._await_declared()  # else the first claims of the limited queue are unlimited
            self.sampler.start()
            feeder, approver, killer, locker = (
                self._thread(f) for f in (self.feed, self.approve, self.chaos, self.lock_rows)
            )
            killer.join()  # the chaos phase
            self.stop_feeding.set()
            feeder.join()
            self.stop_chaos.set()
            locker.join()
            for resumer in self.resumers:
                resumer.join()
            cfg.log(f"chaos: calm; {len(self.keys)} enqueued, waiting for them to finish")
            self._pause_schedule()  # its ticks would keep the queue from draining
            _drain(self.admin_dsn, cfg.drain_stall_s)
            self.stop_approving.set()
            approver.join()
            samples = self.sampler.stop()
            exited = self.pool.exited()  # a worker must survive every outage: nothing restarts it
        finally:
            self.stop_chaos.set()
            self.stop_feeding.set()
            self.stop_approving.set()
            self.pool.terminate_all()
            self.app.close()
            if self.sampler.is_alive():
                self.sampler.stop()
        if self.errors:
            raise RuntimeError(f"the chaos harness itself failed: {self.errors[0]!r}") from self.errors[0]
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            verdict = verify(
                conn,
                self.keys,
                self.disruptions,
                cfg.lease_s,
                limited_keys=self.limited_keys,
                samples=samples,
                cancelled_keys=self.cancelled_keys,
            )
        for wid, code in sorted(exited.items(), reverse=True):  # first: they explain the rest
            lines = (self.log_dir / f"{wid}.log").read_text(errors="replace").strip().splitlines()
            verdict.violations.insert(
                0,
                f"worker {wid} exited by itself (exit code {code}); its last "
                f"line: {lines[-1] if lines else '(no output)'}",
            )
        logs = "".join((self.log_dir / f).read_text(errors="replace") for f in sorted(os.listdir(self.log_dir)))
        if verdict.ok and not cfg.keep_logs:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        return ChaosReport(
            verdict=verdict,
            kills=self.counts["kills"],
            stops=self.counts["stops"],
            freezes=self.counts["freezes"],
            operator_requeues=self.counts["operator_requeues"],
            restarts=self.counts["restarts"],
            early_cancels=len(self.cancelled_keys),
            locks=self.counts["locks"],
            enqueued=len(self.keys),
            refused_writes=logs.count("event=write_refused"),
            leases_expired=logs.count("event=leases_expired"),
            seconds=time.monotonic() - self.started,
            log_dir=self.log_dir,
            disruptions=self.disruptions,
        )

    def _await_declared(self) -> None:
        """Until a worker has written the limited queue's declaration (workers do at start)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
                row = conn.execute(DECLARED, (LIMITED_QUEUE,)).fetchone()
            if row is not None and row[0] == LIMITED_CONCURRENCY:
                return
            time.sleep(0.1)
        raise RuntimeError(f"no worker declared queue {LIMITED_QUEUE} within 60 s")

    def _pause_schedule(self) -> None:
        from .workload import TICK_SCHEDULE

        deadline = time.monotonic() + 30
        while True:
            try:
                self.app.pause_schedule(TICK_SCHEDULE, by="chaos-harness")
                return
            except (KestrelError, psycopg.Error):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _thread(self, fn: Callable[[], None]) -> threading.Thread:
        """Start ``fn`` in a thread; an exception in it stops the run and is raised at the end."""

        def guarded() -> None:
            try:
                fn()
            except BaseException as exc:
                self.errors.append(exc)
                self.stop_chaos.set()
                self.stop_feeding.set()

        thread = threading.Thread(target=guarded, daemon=True, name=fn.__name__)
        thread.start()
        return thread

    # -- the producer and the approver -------------------------------------------------------

    def feed(self) -> None:
        """Enqueue ``rate`` executions a second, each retried under its idempotency key."""
        i = 0
        next_at = time.monotonic()
        while not self.stop_feeding.is_set():
            i += 1
            key = f"chaos-{i}"
            # now and then a long chain (about 5 s in one claim): still running a lease after a
            # frozen worker claimed it again, when a lost heartbeat would let it be swept
            spec = {
                "steps": self.rng.randint(3, 5),
                "work_ms": self.rng.choice([20, 50, 120, 400, 400, 1500]),
                "nap": self.rng.choice([None, None, 0.3, 1.0]),
                "gate": self.rng.choice([None, None, None, "approve", "approve", "reject", "timeout"]),
            }
            # every third on the limited queue, every other one of those under one of 4 keys
            place = (
                {}
                if i % 3
                else {"queue": LIMITED_QUEUE, "concurrency_key": f"customer-{i // 6 % 4}" if i % 2 else None}
            )
            if place and spec["work_ms"] > 400:
                # not on the limited queue: 3 long chains at a time would hold it longer than
                # the drain, and what was left enqueued there would read as lost work
                spec["work_ms"] = 400
            workflow = "chain"
            early = not place and self.cfg.early_cancel_every and i % self.cfg.early_cancel_every == 3
            if early:
                spec["pre_ms"] = 800  # workflow code before the first step, where the cancel lands
            if not place and self.cfg.failing_every and i % self.cfg.failing_every == 7:
                workflow = self.rng.choice(["deadline", "exit_step", "cancelled_step"])
                spec = {"expect": workflow, "pre_ms": int((DEADLINE_S + 0.7) * 1000)}
            elif not place and self.cfg.fan_every and i % self.cfg.fan_every == 1:
                workflow = "fan"
                spec = {
                    "fan": self.rng.randint(3, 6),
                    "work_ms": self.rng.choice([20, 50, 120, 400]),
                    "nap": self.rng.choice([0.3, 1.0]),
                }
            deadline = time.monotonic() + 60
            while True:  # the idempotency key makes a retried enqueue insert at most once
                try:
                    eid = self.app.enqueue(workflow, spec, idempotency_key=key, **place)
                    break
                except (KestrelError, psycopg.Error):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            self.keys.add(key)
            if place:
                self.limited_keys.add(key)
            if early and workflow == "chain":
                self._thread(lambda eid=eid, key=key: self._cancel_early(eid, key))
            next_at += 1.0 / self.cfg.rate
            self.stop_feeding.wait(max(0.0, next_at - time.monotonic()))

    def approve(self) -> None:
        """Decide every pending gate as its input asks (gates meant to time out are left alone)."""
        while not self.stop_approving.wait(0.25):
            try:
                with self.app.connection() as conn:
                    pending = conn.execute(PENDING_GATES).fetchall()
                for eid, step, gate in pending:
                    if gate == "approve":
                        self.app.approve(eid, step, by="chaos-approver", comment="chaos")
                    elif gate == "reject":
                        self.app.reject(eid, step, by="chaos-approver", comment="chaos")
            except (KestrelError, psycopg.Error):
                continue  # outage, or decided by an earlier try whose reply was lost

    def _cancel_early(self, eid: int, key: str) -> None:
        """Cancel ``eid`` once claimed, while its code runs before its first step (pre_ms)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not self.stop_approving.is_set():
            try:
                with self.app.connection() as conn:
                    row = conn.execute(STATUS, (eid,)).fetchone()
            except (KestrelError, psycopg.Error):
                row = None
            if row is not None and row[0] != "enqueued":
                break
            time.sleep(0.02)
        time.sleep(self.rng.uniform(0.05, 0.5))
        try:
            self.app.cancel(eid, by="chaos-operator", comment="early cancel")
        except ActionRefused:
            return  # it finished already, and must end as any chain
        except (KestrelError, psycopg.Error):
            pass  # an outage: whether it was cancelled is read below
        deadline = time.monotonic() + 60  # the reply may be lost in an outage: read what happened
        while time.monotonic() < deadline:
            try:
                with self.app.connection() as conn:
                    row = conn.execute(STATUS, (eid,)).fetchone()
                if row is not None and row[0] == "cancelled":
                    self.cancelled_keys.add(key)
                return
            except (KestrelError, psycopg.Error):
                time.sleep(0.5)

    def lock_rows(self) -> None:
        """Now and then, hold one running execution's row FOR UPDATE from another session for
        up to one and a half leases, as an operator's or a report's transaction might."""
        while not self.stop_chaos.wait(self.rng.uniform(*self.cfg.lock_every_s)):
            try:
                with psycopg.connect(self.admin_dsn, connect_timeout=3, application_name="chaos-locker") as conn:
                    running = conn.execute(RUNNING).fetchall()
                    if not running:
                        conn.rollback()
                        continue
                    owner, eid, _ = self.rng.choice(running)
                    conn.execute("SET LOCAL lock_timeout = '2s'")
                    conn.execute(LOCK_ROW, (eid,))
                    t0 = time.time()
                    self.stop_chaos.wait(self.rng.uniform(0.5, 1.5) * self.cfg.lease_s)
                    conn.commit()
                    self.disruptions.append(Disruption("lock", owner, t0, time.time(), execution=eid))
                    self.counts["locks"] += 1
            except psycopg.Error:
                continue  # an outage, or the row was held already

    # -- the killer ------------------------------------------------------------------------------

    def chaos(self) -> None:
        """A fixed plan for the rare events (so every run has them); random kills in between."""
        cfg = self.cfg
        end = time.monotonic() + cfg.chaos_s
        plan = sorted(
            [(cfg.chaos_s * (i + 1) / (cfg.restarts + 1), "restart", i % 2 == 1) for i in range(cfg.restarts)]
            + [(cfg.chaos_s * (0.15 + 0.6 * i / max(1, cfg.stops)), "stop", False) for i in range(cfg.stops)]
            + [(cfg.chaos_s * (0.3 + 0.6 * i / max(1, cfg.freezes)), "freeze", False) for i in range(cfg.freezes)]
        )
        t_start = time.monotonic()
        next_kill = t_start + self.rng.uniform(*cfg.kill_every_s)
        while not self.stop_chaos.is_set() and time.monotonic() < end:
            now = time.monotonic()
            if plan and now - t_start >= plan[0][0]:
                _, what, crash = plan.pop(0)
                if what == "restart":
                    self.restart_db(crash)
                elif what == "freeze":
                    if not self.freeze_all():  # every worker stopped or gone: again in a second
                        plan.append((now - t_start + 1.0, what, crash))
                        plan.sort()
                elif not self.stop_one():  # too few workers right now: try again in a second
                    plan.append((now - t_start + 1.0, what, crash))
                    plan.sort()
            elif now >= next_kill and self.kill_one():
                # A kill due while every worker is stopped or frozen waits for one to run:
                # dropped, a run with two freezes and a crash could end with a single kill.
                next_kill = now + self.rng.uniform(*cfg.kill_every_s)
            self.stop_chaos.wait(0.05)

    def restart_db(self, crash: bool) -> None:
        """A clean restart, or a crash (SIGKILL) that keeps the server down past the lease."""
        t0 = time.time()
        if crash:  # every running execution is swept when it is back
            self.server.kill()
            self.stop_chaos.wait(self.cfg.lease_s + 1.0)
            self.server.start()
        else:
            self.server.restart()
        self.disruptions.append(Disruption("outage", None, t0, time.time()))
        self.counts["restarts"] += 1
        self.cfg.log(f"chaos: database {'crashed and restarted' if crash else 'restarted'} in {time.time() - t0:.1f} s")

    def kill_one(self) -> bool:
        """SIGKILL a random running worker and start a replacement; False if none runs."""
        candidates = [w for w in self.pool.alive() if w not in self.pool.stopped]
        if not candidates:
            return False
        wid = self.rng.choice(candidates)
        t0 = time.time()
        self.pool.kill(wid)
        self.disruptions.append(Disruption("kill", wid, t0, t0))
        self.counts["kills"] += 1
        new = self.pool.start_one()
        self.cfg.log(f"chaos: SIGKILL {wid}, started {new}")
        return True

    def stop_one(self) -> bool:
        """SIGSTOP a worker (one in the middle of executions if any); False if too few run."""
        busy: dict[str, list[tuple[int, int]]] = {}
        try:
            with psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=3) as conn:
                for owner, eid, epoch in conn.execute(RUNNING):
                    busy.setdefault(owner, []).append((eid, epoch))
        except psycopg.Error:
            pass
        candidates = [w for w in self.pool.alive() if w not in self.pool.stopped]
        if len(candidates) < 2:
            return False  # keep one running
        wid = self.rng.choice([w for w in candidates if w in busy] or candidates)
        t0 = time.time()
        self.pool.stop(wid)
        held = busy.get(wid, [])
        self.counts["stops"] += 1
        self.cfg.log(f"chaos: SIGSTOP {wid} (running {len(held)} execution(s))")
        resumer = threading.Thread(target=self._resume, args=(wid, held, t0), daemon=True)
        resumer.start()
        self.resumers.append(resumer)
        return True

    def _resume(self, wid: str, held: list[tuple[int, int]], t0: float) -> None:
        """SIGCONT past the lease, as soon as another worker re-claimed what it held: so the
        frozen worker wakes up as a zombie while the new owner is still at work."""
        deadline = time.monotonic() + self.cfg.lease_s + 5.0
        self.stop_chaos.wait(self.cfg.lease_s)
        while held and not self.stop_chaos.is_set() and time.monotonic() < deadline:
            if _all_reclaimed(self.admin_dsn, wid, held):
                break
            self.stop_chaos.wait(0.05)
        self.pool.cont(wid)
        self.disruptions.append(Disruption("stop", wid, t0, time.time()))
        self.cfg.log(f"chaos: SIGCONT {wid} after {time.time() - t0:.1f} s")

    def freeze_all(self) -> bool:
        """SIGSTOP every running worker (the issue-17 sequence, on all of them at once): past
        the lease, requeue what they held as an operator would, then SIGCONT. Each worker may
        then claim again, under a newer epoch, what its own frozen threads are still running."""
        wids = [w for w in self.pool.alive() if w not in self.pool.stopped]
        if not wids:
            return False
        t0 = time.time()
        for wid in wids:
            self.pool.stop(wid)
        self.counts["freezes"] += 1
        self.cfg.log(f"chaos: SIGSTOP every worker ({', '.join(wids)})")
        thaw = threading.Thread(target=self._thaw, args=(wids, t0), daemon=True)
        thaw.start()
        self.resumers.append(thaw)
        return True

    def _thaw(self, wids: list[str], t0: float) -> None:
        """Past the lease of everything the frozen workers hold, requeue it through the operator
        API (nobody else is awake to sweep it), then SIGCONT them all."""
        try:
            self.stop_chaos.wait(self.cfg.lease_s)
            deadline = time.monotonic() + self.cfg.lease_s + 10.0
            while not self.stop_chaos.is_set() and time.monotonic() < deadline:
                expired, live = _frozen_claims(self.admin_dsn, wids)
                for eid in expired or []:
                    try:
                        self.app.requeue(eid, by="chaos-operator", comment="worker frozen")
                        self.counts["operator_requeues"] += 1
                    except (KestrelError, psycopg.Error):
                        pass  # an outage, or swept meanwhile by a worker started since
                if expired is not None and not expired and not live:
                    break
                self.stop_chaos.wait(0.1)
        finally:
            for wid in wids:
                self.pool.cont(wid)
            t1 = time.time()
            self.disruptions.extend(Disruption("freeze", wid, t0, t1) for wid in wids)
            self.cfg.log(f"chaos: SIGCONT every frozen worker after {t1 - t0:.1f} s")


FROZEN_CLAIMS = """
SELECT id, lease_expires < now() FROM kestrel.workflow_executions
 WHERE status = 'running' AND owner_id = ANY(%s)
"""


def _frozen_claims(dsn: str, wids: list[str]) -> tuple[list[int] | None, int]:
    """(running executions of ``wids`` whose lease lapsed, how many are still leased);
    (None, 0) when the database cannot be read."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
            rows = conn.execute(FROZEN_CLAIMS, (wids,)).fetchall()
    except psycopg.Error:
        return None, 0
    return [eid for eid, lapsed in rows if lapsed], sum(not lapsed for _, lapsed in rows)


def _all_reclaimed(dsn: str, wid: str, held: list[tuple[int, int]]) -> bool:
    """Whether every execution ``wid`` held is now running under another claim."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
            row = conn.execute(STILL_HELD, ([e for e, _ in held], wid, [ep for _, ep in held])).fetchone()
    except psycopg.Error:
        return False
    return row is not None and row[0] == 0


def _drain(dsn: str, stall_s: float) -> None:
    """Wait until no execution is live, for as long as the live ones keep getting fewer: give
    up once their count has not fallen for ``stall_s`` (lost work stalls; a slow machine only
    drains slower). The checks report what is left."""
    try:
        wait_until_none_left(lambda: _live(dsn), "the live executions", stall=stall_s, interval=0.3)
    except AssertionError:
        pass  # stalled: the checks that follow say what is left


def _live(dsn: str) -> int | None:
    """How many executions are live; None while the database cannot be read (a restart)."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
            return int(conn.execute(UNFINISHED).fetchone()[0])
    except psycopg.Error:
        return None


def private_cluster(data_dir: Path | None = None) -> LocalCluster:
    """A private, non-durable server for a run by hand (the test suite has a fixture)."""
    if data_dir is None:
        data_dir = Path(tempfile.mkdtemp(prefix="kestrel-chaos-pg-"))
        data_dir.chmod(0o755)  # as root the server runs as postgres, which must enter it
    cluster = LocalCluster(data_dir, durable=False)
    cluster.start()
    return cluster
