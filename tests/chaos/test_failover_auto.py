"""Failover with an HA manager doing the promotion (issue 48): a pg_auto_failover formation (a
monitor, a primary and its synchronous standby) while three chaos workers run chains and async
fan-outs (part of them on the limited queue) and a thread enqueues, all on the multi-host URI
the monitor gives (``pg_autoctl show uri --formation default``). The primary's node dies
(SIGKILL of its pg_autoctl and PostgreSQL: its host gone); the monitor promotes the standby.

Checked: every enqueue that returned an id is on the new primary; every checkpoint a worker
went past (the next step of the same claim ran, which it does only once the boundary holding
that checkpoint committed) holds that run's result; every execution finishes; the chaos checks
(checks.py: one checkpoint per step, outputs match, no stale claim completed or checkpointed,
no step started after its claim ended, schedule ticks once each, queue membership); no worker
exits; and every worker writes checkpoints on the new primary within ``BACK_WITHIN_S`` of the
kill (measured 6.8-6.9 s on 2 busy cores: 4.0-4.8 s of detection and promotion, then 2-3 s
of the workers' reconnect backoff).

Skipped when pg_autoctl is not installed (Debian: ``postgresql-15-auto-failover``); in CI
(``$CI`` set, .ci/run installs it) that fails instead.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from kestrel_core import Kestrel, KestrelError
from tests.conftest import in_ci
from tests.waiting import wait_for, wait_until_none_left

from .auto_failover import AutoFailoverFormation, AutoFailoverUnavailable
from .checks import Disruption, verify
from .workers import REPO, WorkerPool
from .workload import LEDGER_DDL, LIMITED_QUEUE, TICK_SCHEDULE

pytestmark = pytest.mark.slow

LEASE_S = 4.0
RATE = 10.0  # enqueues per second
BACK_WITHIN_S = 20.0  # kill -> every worker checkpointing on the new primary (measured 6.8-6.9 s)
UNFINISHED = "SELECT count(*) FROM kestrel.workflow_executions WHERE status IN ('enqueued', 'running', 'waiting')"
# Per worker, its first checkpoint written on the new primary.
BACK = """
SELECT owner_id, extract(epoch FROM min(created_at))::float8 FROM kestrel.operation_outputs
 WHERE created_at > to_timestamp(%s) AND owner_id = ANY(%s) GROUP BY owner_id
"""
# Executions finished per second between two times (the 3 s before the kill, the 3 s after
# every worker was back).
RATE_IN = """
SELECT count(*) / 3.0 FROM kestrel.workflow_executions
 WHERE status = 'success' AND updated_at BETWEEN to_timestamp(%s) AND to_timestamp(%s)
   AND coalesce(idempotency_key, '') LIKE 'paf-%%'
"""
CHAIN_RUNS = """
SELECT l.execution_id, l.step_id, l.owner_id, l.claim_epoch, l.nonce, l.started, o.output
  FROM public.chaos_ledger l
  JOIN kestrel.workflow_executions e ON e.id = l.execution_id AND e.input ? 'steps'
  LEFT JOIN kestrel.operation_outputs o ON o.execution_id = l.execution_id AND o.step_id = l.step_id
"""


@pytest.fixture
def formation() -> Iterator[AutoFailoverFormation]:
    try:
        paf = AutoFailoverFormation()
    except AutoFailoverUnavailable as exc:
        if in_ci():
            pytest.fail(f"{exc} ($CI is set: .ci/run installs it, the failover test must run)", pytrace=False)
        pytest.skip(str(exc))
    try:
        paf.start()
        yield paf
    finally:
        paf.destroy()


class Feeder(threading.Thread):
    """Enqueues ``RATE`` a second (chains and fan-outs, every third on the limited queue), each
    retried under its idempotency key while the database is away; keeps what was acknowledged."""

    def __init__(self, app: Kestrel) -> None:
        super().__init__(name="paf-feed", daemon=True)
        self.app, self.rng = app, random.Random(48)
        self.acknowledged: dict[str, int] = {}
        self.limited: set[str] = set()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._feed()
        except BaseException as exc:
            self.error = exc

    def _feed(self) -> None:
        i, next_at = 0, time.monotonic()
        while not self.stop.is_set():
            i += 1
            key = f"paf-{i}"
            place = {"queue": LIMITED_QUEUE} if i % 3 == 0 else {}
            if i % 4 == 1 and not place:
                workflow = "fan"
                spec: dict = {"fan": self.rng.randint(2, 4), "work_ms": self.rng.choice([20, 50]), "nap": 0.3}
            else:
                workflow = "chain"
                spec = {"steps": self.rng.randint(3, 4), "work_ms": self.rng.choice([20, 50, 120]), "nap": None}
            deadline = time.monotonic() + 60
            while True:
                try:
                    self.acknowledged[key] = self.app.enqueue(workflow, spec, idempotency_key=key, **place)
                    break
                except (KestrelError, psycopg.Error):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            if place:
                self.limited.add(key)
            next_at += 1 / RATE
            self.stop.wait(max(0.0, next_at - time.monotonic()))


def acknowledged_checkpoints(conn: psycopg.Connection, near: float) -> tuple[int, int, list[str]]:
    """Every chain step a claim went past (that claim ran the next step, which it does only once
    the boundary holding this step's checkpoint committed) must keep that claim's result.
    Returns (checked, checked within 10 s before ``near``, violations)."""
    runs: dict[tuple[int, str, int], dict[str, tuple[int, float, object]]] = defaultdict(dict)
    for eid, step, owner, epoch, nonce, started, output in conn.execute(CHAIN_RUNS):
        prior = runs[(eid, owner, epoch)].get(step)
        if prior is None or started > prior[1]:  # the claim's last run of the step
            runs[(eid, owner, epoch)][step] = (nonce, started, output)
    checked = recent = 0
    bad: list[str] = []
    for (eid, owner, epoch), steps in runs.items():
        for step, (nonce, started, output) in steps.items():
            following = steps.get(f"s{int(step[1:]) + 1}")
            if following is None or following[1] < started:
                continue
            checked += 1
            recent += near - 10 <= following[1] <= near
            if output != nonce:
                bad.append(f"execution {eid} {step}: {owner} epoch {epoch} went on past {nonce}, checkpoint {output}")
    return checked, recent, bad


def test_pg_auto_failover_promotes_the_standby_and_nothing_acknowledged_is_lost(
    formation: AutoFailoverFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(formation.node_dsn("node1"), autocommit=True) as conn:
        conn.execute("CREATE DATABASE chaos")
    dsn = make_conninfo(formation.uri(), dbname="chaos")
    with Kestrel(dsn) as admin:
        admin.migrate()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(LEDGER_DDL)
    log_dir = Path(tempfile.mkdtemp(prefix="kestrel-paf-logs-"))
    env = {
        **os.environ,
        "KESTREL_CHAOS_DSN": dsn,
        "KESTREL_CHAOS_POOLING": "0",
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    pool = WorkerPool(env, log_dir, concurrency=4, lease_s=LEASE_S)
    app = Kestrel(dsn, application_name="kestrel-paf-feed")
    feeder = Feeder(app)
    workers = [pool.start_one() for _ in range(3)]
    ok = False
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            wait_for(lambda: conn.execute("SELECT 1 FROM kestrel.queues WHERE name = %s", (LIMITED_QUEUE,)).fetchone())
            feeder.start()
            done = "SELECT count(*) FROM kestrel.workflow_executions WHERE status = 'success'"
            wait_for(lambda: conn.execute(done).fetchone()[0] >= 30, timeout=60, what="work before the failover")
        assert formation.state()["node1"] == ("primary", "primary"), formation.state()
        killed_at, killed = time.time(), time.monotonic()
        formation.kill("node1")
        formation.wait(lambda: formation.promoted("node2"), 60, "the monitor to promote node2")
        promoted = time.monotonic() - killed
        with psycopg.connect(dsn, autocommit=True) as conn:

            def all_back() -> dict[str, float] | None:
                rows = dict(conn.execute(BACK, (killed_at, workers)).fetchall())
                return rows if rows.keys() == set(workers) else None

            back = wait_for(all_back, timeout=120, what="every worker to checkpoint on the new primary")
            back_s = max(back.values()) - killed_at
            acked = len(feeder.acknowledged)
            wait_for(lambda: len(feeder.acknowledged) >= acked + 30, timeout=60, what="enqueues on the new primary")
            feeder.stop.set()
            feeder.join()
            assert feeder.error is None, repr(feeder.error)
            wait_for(lambda: _pause(app), timeout=30, what="the schedule to pause")
            wait_until_none_left(lambda: conn.execute(UNFINISHED).fetchone()[0], "unfinished executions", stall=60)
        exited = pool.exited()
        pool.terminate_all()
        with psycopg.connect(dsn, autocommit=True) as conn:
            stored = {row[0] for row in conn.execute("SELECT id FROM kestrel.workflow_executions")}
            lost = set(feeder.acknowledged.values()) - stored
            checked, near_kill, bad = acknowledged_checkpoints(conn, killed_at)
            outage = Disruption("outage", None, killed_at, killed_at + back_s)
            verdict = verify(conn, set(feeder.acknowledged), [outage], LEASE_S, limited_keys=feeder.limited)
            names = conn.execute("SHOW synchronous_standby_names").fetchone()[0]
            before_rate = conn.execute(RATE_IN, (killed_at - 3, killed_at)).fetchone()[0]
            after_rate = conn.execute(RATE_IN, (killed_at + back_s, killed_at + back_s + 3)).fetchone()[0]
        logs = "".join(p.read_text(errors="replace") for p in sorted(log_dir.iterdir()))
        summary = (
            f"pg_auto_failover: node2 promoted {promoted:.1f} s after node1 died; every worker checkpointing "
            f"on it {back_s:.1f} s after; {len(feeder.acknowledged)} acknowledged enqueues, {len(lost)} lost; "
            f"{checked} acknowledged checkpoints checked ({near_kill} in the 10 s before the kill), {len(bad)} lost; "
            f"successes/s {before_rate:.1f} before, {after_rate:.1f} after; "
            f"refused stale writes {logs.count('event=write_refused')}; duplicates by cause "
            f"{dict(verdict.duplicates_by_cause)}; {dict(verdict.statuses)}; ticks {verdict.ticks}; "
            f"new primary's synchronous_standby_names {names!r}"
        )
        with capsys.disabled():
            print(f"\n{summary}")
        assert not exited, f"workers exited by themselves: {exited}"
        assert not lost, f"{len(lost)} acknowledged enqueues lost: {sorted(lost)[:10]}"
        assert not bad, "\n".join(["acknowledged checkpoints lost:", *bad[:20]])
        assert checked >= 50 and near_kill >= 5, summary  # the check had something to bite on
        assert verdict.ok, "\n".join(["chaos checks broken across the failover:", *verdict.violations[:30], summary])
        assert verdict.statuses["success"] == len(feeder.acknowledged), summary
        assert back_s <= BACK_WITHIN_S, summary
        ok = True
    finally:
        feeder.stop.set()
        pool.terminate_all()
        app.close()
        if ok:
            shutil.rmtree(log_dir, ignore_errors=True)
        else:
            print(f"worker logs: {log_dir}\nmonitor events:\n{_events(formation)}")


def _pause(app: Kestrel) -> bool:
    try:
        app.pause_schedule(TICK_SCHEDULE, by="paf-test")
        return True
    except (KestrelError, psycopg.Error):
        return False


def _events(formation: AutoFailoverFormation) -> str:
    try:
        return formation.events()
    except psycopg.Error as exc:
        return repr(exc)
