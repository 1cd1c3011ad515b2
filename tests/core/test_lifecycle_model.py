"""A model-based test of the execution lifecycle against real worker processes (issue 43).

Hypothesis's stateful testing drives three worker processes of ``tests/core/lifecycle_app.py``
with random sequences of enqueues (plain chains, approval gates, event waits, two event waits
gathered, a deadline that passes before the first step, steps raising ``CancelledError`` or
``SystemExit``), cancels, requeues, approvals and rejections, events, freezes (SIGSTOP at a
random moment, or at a claim between its statement and its commit), kills (SIGKILL, a
replacement started at once) and outside row locks (another session holding ``SELECT ... FOR
UPDATE`` on an execution). A model follows what each acknowledged action means for each
execution. After every sequence (``teardown``) it checks, on the engine's records and the
side-effect ledger the steps write:

- every execution reaches the state the model predicts (success, cancelled, error, or waiting
  at its gate or event) with the output it predicts, within a bound: nothing stays running or
  enqueued while live workers could take it;
- no step started after its claim ended (the ledger's runs and ``step_attempts`` against when
  each claim ended, read from a trigger on ``workflow_executions``);
- a step ran twice only when a kill, a freeze, a cancel, a requeue or a lock on that very
  execution explains it; a deadline that passed before the first step ran no step.

While a worker is frozen at its claim, the executions enqueued for it must be taken by a live
worker within the recovery bound (a lease and a sixth, plus slack).

CI runs a few short sequences; by hand, longer and more (see docs/development.md)::

    KESTREL_MODEL_EXAMPLES=50 KESTREL_MODEL_STEPS=25 .venv/bin/python -m pytest -n 0 \
        tests/core/test_lifecycle_model.py --hypothesis-seed=7
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from kestrel_core import Kestrel, KestrelError
from tests.chaos.checks import stalled
from tests.waiting import wait_for
from tests.worker_processes import NumberedProcesses, stop_worker_processes

from .lifecycle_app import LEDGER_DDL, TIMED_OUT_S

pytestmark = pytest.mark.slow
T = TypeVar("T")
PICK = st.integers(0, 1 << 16)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("KESTREL_MODEL_EXAMPLES", "3"))
STEPS = int(os.environ.get("KESTREL_MODEL_STEPS", "8"))
LEASE_S = float(os.environ.get("KESTREL_MODEL_LEASE", "3"))
SHRINK = os.environ.get("KESTREL_MODEL_SHRINK") == "1"
WORKERS = 3
CONCURRENCY = 3
# How late a step's first line may run after the fence that let it start (thread hand-offs on a
# loaded machine): a run later than this after its claim ended is a violation.
START_SLACK_S = 0.2
# The longest a step runs (work_ms) plus its boundary: a kill or freeze explains a rerun of a
# run that started at most this long before it.
IN_FLIGHT_S = 6.0
# How long the executions of a frozen claim may wait for a live worker: the lease, a sixth of it
# (the lease sweep's period), and slack for a loaded machine.
RECOVERY_S = LEASE_S * 7 / 6 + 4.0
# How long, after the last action, every execution may take to reach its predicted state.
SETTLE_S = 4 * LEASE_S + 20.0

KINDS = ["plain", "plain", "plain", "gated", "event", "events2", "timed", "cancelled_step", "exit_step"]
TERMINAL = ("success", "error", "cancelled")

CLAIM_ENDS = """
SELECT execution_id, old_epoch, min(extract(epoch FROM at)::float8)
  FROM public.lifecycle_transitions
 WHERE old_status = 'running' AND (new_status <> 'running' OR new_epoch IS DISTINCT FROM old_epoch)
   AND execution_id = ANY(%s)
 GROUP BY execution_id, old_epoch
"""
LEDGER = """
SELECT execution_id, step_id, owner_id, claim_epoch, started
  FROM public.lifecycle_ledger WHERE execution_id = ANY(%s) ORDER BY started
"""
ATTEMPTS = """
SELECT execution_id, step_id, owner_id, claim_epoch, extract(epoch FROM started_at)::float8, outcome
  FROM kestrel.step_attempts WHERE execution_id = ANY(%s)
"""
STATES = """
SELECT e.id, e.status, e.owner_id, e.claim_epoch, e.output, e.error,
       (SELECT string_agg(w.kind || ':' || w.step_id, ',') FROM kestrel.workflow_waits w
         WHERE w.execution_id = e.id AND w.resolved_at IS NULL)
  FROM kestrel.workflow_executions e WHERE e.id = ANY(%s)
"""
PENDING_GATE = """
SELECT 1 FROM kestrel.workflow_waits w JOIN kestrel.workflow_executions e ON e.id = w.execution_id
 WHERE w.execution_id = %s AND w.kind = 'approval' AND w.resolved_at IS NULL AND e.status = 'waiting'
"""
STATUS = "SELECT status, owner_id FROM kestrel.workflow_executions WHERE id = %s"
RUNNING_BY_OWNER = """
SELECT owner_id, array_agg(id) FROM kestrel.workflow_executions
 WHERE status = 'running' AND id = ANY(%s) GROUP BY owner_id ORDER BY count(*) DESC
"""
BEATING = "SELECT worker_id FROM kestrel.workers WHERE last_heartbeat > now() - %s * interval '1 second'"
ENQUEUED = "SELECT id FROM kestrel.workflow_executions WHERE status = 'enqueued' AND id = ANY(%s)"
LOCK_ROW = "SELECT 1 FROM kestrel.workflow_executions WHERE id = %s FOR UPDATE"


@dataclass(frozen=True)
class Disruption:
    kind: str  # kill, freeze, lock
    worker: str | None  # kill, freeze
    execution: int | None  # lock
    start: float
    end: float


class Pool(NumberedProcesses):
    """The worker processes: started with a fresh id each, killed, frozen and thawed."""

    def __init__(self, dsn: str, control: Path, logs: Path) -> None:
        super().__init__("m", logs)
        self.env = dict(os.environ, KESTREL_DSN=dsn, PYTHONPATH=str(ROOT), LIFECYCLE_CONTROL=str(control))
        self.control, self.logs = control, logs
        self.frozen: dict[str, float] = {}  # worker id -> when it was stopped
        self.disruptions: list[Disruption] = []

    def start(self) -> str:
        return self.launch(
            lambda wid: (
                [sys.executable, "-m", "tests.core.lifecycle_app", "--worker-id", wid]
                + ["--concurrency", str(CONCURRENCY), "--lease", str(LEASE_S)]
            ),
            env=self.env,
        )

    def awake(self) -> list[str]:
        return [w for w in self.alive() if w not in self.frozen]

    def stopped(self, wid: str) -> bool:
        """Whether the process is stopped (SIGSTOP), from /proc."""
        try:
            stat = Path(f"/proc/{self.procs[wid].pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] == "T"

    def kill(self, wid: str) -> None:
        proc = self.forget(wid)
        t = time.time()
        proc.kill()
        proc.wait()
        self.disruptions.append(Disruption("kill", wid, None, t, t))
        if wid in self.frozen:
            self.disruptions.append(Disruption("freeze", wid, None, self.frozen.pop(wid), t))

    def freeze(self, wid: str, at: float | None = None) -> None:
        self.frozen[wid] = at or time.time()
        self.procs[wid].send_signal(signal.SIGSTOP)

    def thaw(self, wid: str) -> None:
        proc = self.procs.get(wid)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
        began = self.frozen.pop(wid, None)
        if began is not None:
            self.disruptions.append(Disruption("freeze", wid, None, began, time.time()))

    def thaw_all(self) -> None:
        for flag in self.control.glob("*.freeze-at-claim"):
            flag.unlink(missing_ok=True)
        for wid in list(self.frozen):
            self.thaw(wid)
        for proc in self.procs.values():  # a freeze at a claim asked for but never seen fired
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)

    def keep(self, n: int) -> None:
        """Start workers until ``n`` are alive."""
        for _ in range(n - len(self.alive())):
            self.start()

    def terminate(self) -> None:
        self.thaw_all()
        stop_worker_processes(self.procs.values())


@dataclass
class Execution:
    """What the model knows of one execution."""

    eid: int
    kind: str
    spec: dict[str, Any]
    cancelled: bool = False
    decided: bool | None = None  # a gate's decision
    decided_by: str | None = None
    events: int = 0  # events sent to its key
    unknown: bool = False  # the model lost track (a problem already reported): not checked
    operator: list[float] = field(default_factory=list)  # when a cancel or requeue was acknowledged

    def predicted(self) -> str:
        if self.cancelled:
            return "cancelled"
        if self.kind in ("timed", "cancelled_step", "exit_step"):
            return "error"
        if self.kind == "gated" and self.decided is None:
            return "waiting"
        if (self.kind == "event" and self.events < 1) or (self.kind == "events2" and self.events < 2):
            return "waiting"
        return "success"

    def output_problem(self, output: Any, error: str | None) -> str | None:
        """What is wrong with the finished execution's output or error, if anything."""
        state = self.predicted()
        if state == "error" and self.kind == "timed" and "timed out" not in (error or ""):
            return f"error {error!r} does not say the deadline passed"
        if state != "success":
            return None
        want_len = self.spec.get("steps", 1) + bool(self.spec.get("gate") or self.spec.get("event"))
        if self.kind == "events2":
            return None if output == [1, 2] else f"output {output!r}: the gathered waits must receive events 1 and 2"
        if not isinstance(output, list) or len(output) != want_len:
            return f"output {output!r} is not the {want_len} results of its steps"
        if self.kind == "gated":
            want = "approved" if self.decided else f"rejected by {self.decided_by}"
            return None if output[1] == want else f"gate result {output[1]!r}, expected {want!r}"
        if self.kind == "event":
            return None if output[1] == 1 else f"event payload {output[1]!r}, expected 1"
        return None


class Env:
    """What the sequences share: the database, the app the operator acts through, the workers."""

    def __init__(self, dsn: str, tmp: Path) -> None:
        self.dsn = dsn
        with psycopg.connect(dsn, autocommit=True) as conn:  # ids restart with each test: so do these
            conn.execute("DROP TABLE IF EXISTS public.lifecycle_ledger, public.lifecycle_transitions")
            conn.execute(LEDGER_DDL)
        # The operator's calls wait at most this long for a row that someone holds.
        self.app = Kestrel(dsn + " options='-c lock_timeout=20000'")
        self.conn = psycopg.connect(dsn, autocommit=True)
        (tmp / "control").mkdir()
        (tmp / "logs").mkdir()
        self.pool = Pool(dsn, tmp / "control", tmp / "logs")
        self.pool.keep(WORKERS)
        wait_for(  # a loaded machine takes seconds to start them
            lambda: len(self.conn.execute(BEATING, (LEASE_S,)).fetchall()) >= WORKERS,
            timeout=120,
            what=f"{WORKERS} workers to start",
        )

    def close(self) -> None:
        self.pool.terminate()
        self.app.close()
        self.conn.close()


class LifecycleModel(RuleBasedStateMachine):
    env: ClassVar[Env]

    def __init__(self) -> None:
        super().__init__()
        self.execs: dict[int, Execution] = {}
        self.lockers: list[threading.Thread] = []
        self.timers: list[threading.Timer] = []
        self.locks: list[Disruption] = []
        self.holding: set[int] = set()  # executions whose rows a lock_row thread holds now
        self.first_disruption = len(self.env.pool.disruptions)
        # What a rule found wrong, reported with the rest at the end: an assertion raised in a
        # rule would be hidden by the teardown's own, which runs after it in any case.
        self.problems: list[str] = []

    # -- helpers ---------------------------------------------------------------------------------

    def _enqueue(self, kind: str, steps: int = 1, work_ms: int = 30, pre_ms: int = 0) -> Execution:
        spec: dict[str, Any] = {"steps": steps, "work_ms": work_ms, "pre_ms": pre_ms}
        name = kind
        if kind in ("plain", "gated", "event"):
            name = "chain"
            spec["gate"] = kind == "gated"
            spec["event"] = f"ev-{uuid.uuid4().hex[:12]}" if kind == "event" else None
        elif kind == "events2":
            spec["event"] = f"ev-{uuid.uuid4().hex[:12]}"
        elif kind == "timed":
            # the step comes soon after the deadline's sweep: before a heartbeat would say so
            spec["pre_ms"] = int((TIMED_OUT_S + 0.5) * 1000)
        eid = self.env.app.enqueue(name, spec)
        self.execs[eid] = ex = Execution(eid, kind, spec)
        return ex

    def _status(self, eid: int) -> tuple[str, str | None]:
        return self.env.conn.execute(STATUS, (eid,)).fetchone()

    def _live(self) -> list[Execution]:
        return [ex for ex in self.execs.values() if not ex.cancelled]

    @staticmethod
    def _pick(items: list[T], pick: int) -> T | None:
        """The ``pick``-th of ``items`` (modulo), None if there are none. Every rule draws the same
        kind of data whatever the state: a replay that meets other timings stays the same test."""
        return sorted(items, key=str)[pick % len(items)] if items else None

    # -- rules -----------------------------------------------------------------------------------

    @rule(
        kind=st.sampled_from(KINDS),
        steps=st.integers(1, 3),
        work_ms=st.sampled_from([30, 150, 400, 1500]),
        pre_ms=st.sampled_from([0, 0, 1200]),
    )
    def enqueue(self, kind: str, steps: int, work_ms: int, pre_ms: int) -> None:
        self._enqueue(kind, steps, work_ms, pre_ms)

    @rule(seconds=st.sampled_from([0.1, 0.4, 1.0, 2.0]))
    def let_time_pass(self, seconds: float) -> None:
        time.sleep(seconds)

    @rule(pick=PICK)
    def cancel(self, pick: int) -> None:
        ex = self._pick([e for e in self._live() if not e.unknown], pick)
        if ex is not None:
            self.cancel_one(ex)

    def cancel_one(self, ex: Execution) -> None:
        try:
            self.env.app.cancel(ex.eid, by="model")
        except KestrelError:
            status, _ = self._status(ex.eid)
            if status not in TERMINAL or status != ex.predicted():
                self.problems.append(
                    f"cancel of execution {ex.eid} ({ex.kind}) refused while it is {status}; "
                    f"the model predicts {ex.predicted()}"
                )
                ex.unknown = True
            return
        ex.cancelled = True
        ex.operator.append(time.time())

    @rule(pick=PICK)
    def requeue(self, pick: int) -> None:
        ex = self._pick(list(self.execs.values()), pick)
        if ex is not None:
            self.requeue_one(ex)

    def requeue_one(self, ex: Execution) -> None:
        try:
            before = self.env.app.requeue(ex.eid, by="model")
        except KestrelError:
            return  # not in a state that allows it: nothing changed
        ex.operator.append(time.time())
        if before == "cancelled":
            ex.cancelled = False

    @rule(pick=PICK, approve=st.booleans())
    def decide(self, pick: int, approve: bool) -> None:
        ex = self._pick([e for e in self._live() if e.kind == "gated" and e.decided is None and not e.unknown], pick)
        if ex is not None:
            self.decide_one(ex, approve)

    def decide_one(self, ex: Execution, approve: bool) -> None:
        deadline = time.monotonic() + SETTLE_S
        while self.env.conn.execute(PENDING_GATE, (ex.eid,)).fetchone() is None:
            if time.monotonic() > deadline:
                self.problems.append(
                    f"execution {ex.eid} never reached its approval gate in {SETTLE_S:.0f} s: {self._status(ex.eid)}"
                )
                ex.unknown = True  # reported; its end is no longer predicted
                return
            time.sleep(0.05)
        (self.env.app.approve if approve else self.env.app.reject)(ex.eid, "gate", by="model")
        ex.decided, ex.decided_by = approve, "model"

    @rule(pick=PICK)
    def send_event(self, pick: int) -> None:
        ex = self._pick([e for e in self.execs.values() if e.kind in ("event", "events2") and e.events < 2], pick)
        if ex is not None:
            self.send_event_to(ex)

    def send_event_to(self, ex: Execution) -> None:
        ex.events += 1
        self.env.app.send_event(ex.spec["event"], ex.events, by="model")

    @rule(pick=PICK, hold=st.sampled_from([0.3, 1.0, LEASE_S * 1.5, LEASE_S * 2.5]))
    def freeze(self, pick: int, hold: float) -> None:
        """SIGSTOP a worker at a random moment (one stays awake); thawed after ``hold`` s or by ``thaw``."""
        pool = self.env.pool
        wid = self._pick(pool.awake(), pick)
        if wid is not None and len(pool.awake()) >= 2:
            self.freeze_one(wid, hold)

    def freeze_one(self, wid: str, hold: float) -> None:
        pool = self.env.pool
        pool.freeze(wid)
        timer = threading.Timer(hold, pool.thaw, (wid,))
        timer.start()
        self.timers.append(timer)

    @rule(pick=PICK)
    def thaw(self, pick: int) -> None:
        wid = self._pick(list(self.env.pool.frozen), pick)
        if wid is not None:
            self.env.pool.thaw(wid)

    @rule(pick=PICK)
    def freeze_at_claim(self, pick: int) -> None:
        """Freeze a worker between its claim statement and its commit; while it stays frozen,
        what it took must reach a live worker within the recovery bound."""
        pool = self.env.pool
        wid = self._pick(pool.awake(), pick)
        if wid is not None and len(pool.awake()) >= 2:
            self.freeze_one_at_claim(wid)

    def freeze_one_at_claim(self, wid: str) -> None:
        pool = self.env.pool
        flag = pool.control / f"{wid}.freeze-at-claim"
        began = time.time()
        flag.touch()
        fresh = []
        deadline = time.monotonic() + 8
        while not pool.stopped(wid) and time.monotonic() < deadline:
            fresh.append(self._enqueue("plain", 1, 30, 0))  # work for its next claim
            time.sleep(0.15)
        if not pool.stopped(wid):
            flag.unlink(missing_ok=True)  # it never claimed: the others took everything
            return
        pool.freeze(wid, at=began)
        try:
            # what the frozen claim holds: rows that read enqueued but are locked
            with self.env.conn.transaction():
                enqueued = {eid for (eid,) in self.env.conn.execute(ENQUEUED, (list(self.execs),))}
                free = {
                    eid for (eid,) in self.env.conn.execute(ENQUEUED + " FOR UPDATE SKIP LOCKED", (list(self.execs),))
                }
            self._await_progress(sorted({ex.eid for ex in fresh} | (enqueued - free - self.holding)), wid)
        finally:
            pool.thaw(wid)

    def _await_progress(self, eids: list[int], frozen: str) -> None:
        deadline = time.monotonic() + RECOVERY_S
        while True:
            rows = self.env.conn.execute(STATES, (eids,)).fetchall()
            awake = set(self.env.pool.awake())
            beating = {w for (w,) in self.env.conn.execute(BEATING, (LEASE_S,))}
            if not awake & beating:  # the awake ones are still starting (a kill's replacements)
                deadline = time.monotonic() + RECOVERY_S
            stuck = [
                (eid, status, owner)
                for eid, status, owner, *_ in rows
                if not (status in TERMINAL or (status == "running" and owner in awake))
                and self.execs[eid].predicted() not in ("waiting", "cancelled")
            ]
            if not stuck:
                return
            if time.monotonic() > deadline:
                self.problems.append(
                    f"worker {frozen} frozen between its claim and its commit: executions "
                    f"{stuck} (id, status, owner) reached no live worker in {RECOVERY_S:.1f} s"
                )
                return
            time.sleep(0.1)

    @rule(pick=PICK)
    def kill(self, pick: int) -> None:
        pool = self.env.pool
        wid = self._pick(pool.alive(), pick)
        if wid is not None:
            self.kill_one(wid)

    def kill_one(self, wid: str) -> None:
        self.env.pool.kill(wid)
        self.env.pool.start()

    @rule(pick=PICK, hold=st.sampled_from([0.5, LEASE_S * 1.5, LEASE_S * 2]))
    def lock_row(self, pick: int, hold: float) -> None:
        """Another session holds one execution's row (FOR UPDATE) for ``hold`` s: preferably
        one of the worker running the most of this sequence's executions."""
        running = self.env.conn.execute(RUNNING_BY_OWNER, (list(self.execs),)).fetchall()
        eid = self._pick(list(running[0][1]) if running else list(self.execs), pick)
        if eid is not None:
            self.lock_one(eid, hold)

    def lock_one(self, eid: int, hold: float) -> None:
        taken = threading.Event()
        owner = self._status(eid)[1]  # whose step boundaries (one writer per process) it may hold up

        def hold_it() -> None:
            with psycopg.connect(self.env.dsn, application_name="lifecycle-locker") as conn:
                conn.execute("SET lock_timeout = '20s'")
                self.holding.add(eid)
                conn.execute(LOCK_ROW, (eid,))
                start = time.time()
                taken.set()
                time.sleep(hold)
                conn.commit()
                self.holding.discard(eid)
                self.locks.append(Disruption("lock", owner, eid, start, time.time()))

        locker = threading.Thread(target=hold_it, name=f"lock-{eid}", daemon=True)
        locker.start()
        self.lockers.append(locker)
        taken.wait(timeout=20)

    # -- after every sequence ----------------------------------------------------------------------

    def teardown(self) -> None:
        env = self.env
        for timer in self.timers:
            timer.cancel()
        for locker in self.lockers:
            locker.join(timeout=60)
        env.pool.thaw_all()
        env.pool.keep(WORKERS)
        if not self.execs:
            assert not self.problems, "\n".join(self.problems)
            return
        eids = sorted(self.execs)
        rows = self._settle(eids)
        violations = self.problems + [v for eid, *row in rows if (v := self._state_problem(eid, *row))]
        violations += self._fencing_problems(eids)
        assert not violations, "\n".join(
            [f"{len(violations)} violation(s) of the lifecycle model:", *violations[:30], self._history(eids)]
        )

    def _settle(self, eids: list[int]) -> list[tuple]:
        """The executions' rows once each is in its predicted state, or at the bound."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            rows = self.env.conn.execute(STATES, (eids,)).fetchall()
            if all(self._state_problem(eid, *row) is None for eid, *row in rows):
                return rows
            if time.monotonic() > deadline:
                return rows
            time.sleep(0.1)

    def _state_problem(
        self, eid: int, status: str, owner: str | None, epoch: int, output: Any, error: str | None, waits: str | None
    ) -> str | None:
        ex = self.execs[eid]
        if ex.unknown:
            return None
        want = ex.predicted()
        where = f"execution {eid} ({ex.kind} {ex.spec})"
        if status != want:
            alive = owner in self.env.pool.alive()
            return (
                f"{where} is {status} (owner {owner} epoch {epoch}, owner alive: {alive}, open waits {waits}); "
                f"the model predicts {want} (SETTLE_S {SETTLE_S:.0f} s)"
                + (f": {error.splitlines()[-1]}" if error else "")
            )
        if status == "waiting":
            need = "approval:gate" if ex.kind == "gated" else "event:"
            return None if waits and need in waits else f"{where} is waiting on {waits}, not on {need}"
        problem = ex.output_problem(output, error)
        return f"{where}: {problem}" if problem else None

    def _fencing_problems(self, eids: list[int]) -> list[str]:
        conn = self.env.conn
        ends = {(eid, epoch): at for eid, epoch, at in conn.execute(CLAIM_ENDS, (eids,))}
        ledger = conn.execute(LEDGER, (eids,)).fetchall()
        opened: dict[tuple[int, str, str, int], list[float]] = defaultdict(list)
        failed: set[tuple[int, str]] = set()
        problems = []
        for eid, step, owner, epoch, started, outcome in conn.execute(ATTEMPTS, (eids,)):
            opened[(eid, step, owner, epoch)].append(started)
            # (abandoned: closed by the next claim's replay, as 'error' before schema version 34)
            failed.update([(eid, step)] if outcome in ("error", "abandoned") else [])
            end = ends.get((eid, epoch))
            if end is not None and started > end + START_SLACK_S:
                problems.append(
                    f"execution {eid} step {step}: attempt opened under claim ({owner}, {epoch}) "
                    f"{started - end:.2f} s after that claim ended"
                )
        runs: dict[tuple[int, str], list[tuple[str, int, float]]] = defaultdict(list)
        for eid, step, owner, epoch, at in ledger:
            runs[(eid, step)].append((owner, epoch, at))
            end = ends.get((eid, epoch))
            fenced_before = (
                any(s <= end + START_SLACK_S for s in opened.get((eid, step, owner, epoch), [])) if end else True
            )
            if end is not None and at > end + START_SLACK_S and not fenced_before:
                problems.append(
                    f"execution {eid} step {step} started under claim ({owner}, epoch {epoch}) "
                    f"{at - end:.2f} s after that claim ended"
                )
        disruptions = self.env.pool.disruptions[self.first_disruption :] + self.locks
        for (eid, step), seen in runs.items():
            ex = self.execs[eid]
            if ex.kind == "timed":
                problems.append(f"execution {eid} (deadline before its first step) ran step {step}: {seen}")
            for owner, epoch, at in seen[:-1]:
                if not self._explained(ex, owner, at, disruptions, (eid, step) in failed):
                    problems.append(
                        f"execution {eid} step {step} ran again after a run under ({owner}, epoch {epoch}) at "
                        f"{at:.3f} that no kill, freeze, cancel, requeue or lock on it explains: {seen}"
                    )
        return problems

    @staticmethod
    def _explained(ex: Execution, owner: str, at: float, disruptions: list[Disruption], failed: bool) -> bool:
        """Whether the run of ``owner`` at ``at`` may have been cut off (or failed) legitimately."""
        if failed or any(t >= at - START_SLACK_S for t in ex.operator):
            return True
        for d in disruptions:
            if d.kind == "lock" and d.execution == ex.eid and d.start - IN_FLIGHT_S <= at <= d.end:
                return True
            held = stalled(owner, at, d.start, disruptions)
            if (
                d.kind in ("kill", "freeze")
                and d.worker == owner
                and d.start - IN_FLIGHT_S - held <= at <= d.start + 0.5
            ):
                return True
        return False

    def _history(self, eids: list[int]) -> str:
        ds = self.env.pool.disruptions[self.first_disruption :] + self.locks
        return (
            "disruptions: "
            + ", ".join(f"{d.kind} {d.worker or d.execution} {d.start:.3f}-{d.end:.3f}" for d in ds)
            + f"; worker logs in {self.env.pool.logs}"
        )


@pytest.fixture
def model_env(dsn: str, tmp_path: Path) -> Any:
    env = Env(dsn, tmp_path)
    try:
        yield env
    finally:
        env.close()


def test_the_lifecycle_holds_under_random_actions_and_faults(model_env: Env) -> None:
    LifecycleModel.env = model_env
    phases = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if SHRINK else [])
    run_state_machine_as_test(
        LifecycleModel,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            phases=phases,
            database=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        ),
    )


RUNNING_ON = "SELECT owner_id FROM kestrel.workflow_executions WHERE id = %s AND status = 'running'"
LAPSED = "SELECT lease_expires < now() FROM kestrel.workflow_executions WHERE id = %s AND status = 'running'"


def test_a_tour_of_every_action_and_fault(model_env: Env) -> None:
    """One fixed sequence, each part aimed at one of issue 43's breaks, checked as every random
    sequence is: the random ones may miss a narrow window, this one does not."""
    LifecycleModel.env = model_env
    m = LifecycleModel()
    conn, pool = model_env.conn, model_env.pool
    try:
        # a cancel while the workflow's code runs before its first step
        early = m._enqueue("plain", 2, 30, 1200)
        wait_for(lambda: conn.execute(RUNNING_ON, (early.eid,)).fetchone(), timeout=60, what="the first claim")
        time.sleep(0.85)  # late in that code: less time for a heartbeat to tell the worker first
        m.cancel_one(early)
        # a deadline that passes before the first step; steps raising CancelledError, SystemExit
        for kind in ("timed", "cancelled_step", "exit_step"):
            m._enqueue(kind)
        # two event waits on one key gathered; an approval and a rejection
        both = m._enqueue("events2")
        m.send_event_to(both)
        m.send_event_to(both)
        approved, rejected = m._enqueue("gated"), m._enqueue("gated", 2)
        # a worker frozen before the first step, the execution requeued once its lease lapsed
        frozen = m._enqueue("plain", 1, 30, 1200)
        owner = wait_for(lambda: conn.execute(RUNNING_ON, (frozen.eid,)).fetchone(), timeout=60, what="a claim")[0]
        m.freeze_one(owner, LEASE_S * 3)
        wait_for(lambda: conn.execute(LAPSED, (frozen.eid,)).fetchone() != (False,), timeout=LEASE_S + 10)
        m.requeue_one(frozen)
        time.sleep(1.0)  # claimed elsewhere meanwhile
        pool.thaw(owner)
        # an outside lock on one execution of a worker running several steps longer than the
        # lease: no boundary of theirs comes before their leases would lapse
        chains = [m._enqueue("plain", 1, int(LEASE_S * 1000) + 1000, 0) for _ in range(4)]
        busy = wait_for(
            lambda: [r for r in conn.execute(RUNNING_BY_OWNER, ([c.eid for c in chains],)) if len(r[1]) >= 2],
            timeout=60,
            what="a worker running two chains",
        )
        # its first row in the order its heartbeat locks them (by id): the others stay free to sweep
        held = dict(conn.execute(RUNNING_BY_OWNER, (list(m.execs),)).fetchall())
        m.lock_one(min(held[busy[0][0]]), LEASE_S * 2)
        # another worker frozen between its claim and its commit, then killed: the lock alone
        # explains no rerun on the busy worker's other executions
        other = min(w for w in pool.awake() if w != busy[0][0])
        m.freeze_one_at_claim(other)
        m.decide_one(approved, True)
        m.decide_one(rejected, False)
        m.kill_one(other)
    finally:
        m.teardown()
