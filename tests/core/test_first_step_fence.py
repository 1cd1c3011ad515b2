"""Issue 43 (1): the first step of a first claim is fenced like every other.

A claim that ended before the first step was asked for (a cancel, a deadline, a lease that
lapsed while the worker was frozen, then a requeue or a sweep) runs nothing more: the step's
function is never called. Every run of a step is counted in a ledger written by the step
itself. Each case fails on the code before the fix (the first step ran unfenced: s1 ran in
every execution).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from kestrel_core import Kestrel
from kestrel_core.db import migrate
from kestrel_core.workflow.context import CANCEL_WAITS_FOR_FRESH_CLAIMS_S, FIRST_STEP_FRESH_S
from tests.waiting import wait_for, wait_leases_lapsed
from tests.worker_processes import registered_worker, start_worker_process, stop_worker_processes

EXECUTIONS = 5
LEASE = 2  # the frozen worker's: its leases lapse soon
# In-process workers: a long lease, so that no heartbeat notices the lost claim first (that
# stops the thread at the step's start without any fence: the case to test is the step's own).
QUIET = timedelta(seconds=30)


def _record(dsn: str, execution_id: int, step_id: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, %s)", (execution_id, step_id))
    return step_id


def _s1_runs(db: psycopg.Connection, ids: list[int]) -> dict[int, int]:
    rows = db.execute(
        "SELECT execution_id, count(*) FROM public.ledger WHERE step_id = 's1' AND execution_id = ANY(%s) GROUP BY 1",
        (ids,),
    ).fetchall()
    return {eid: dict(rows).get(eid, 0) for eid in ids}


@pytest.mark.parametrize("cancelled_by", ["an operator while the workflow's code runs", "the workflow's own code"])
def test_a_cancel_committed_before_the_first_step_runs_nothing(
    app: Kestrel, dsn: str, ledger: psycopg.Connection, start_worker, cancelled_by: str
) -> None:
    reached = threading.Semaphore(0)
    go = threading.Event()
    by_itself = cancelled_by == "the workflow's own code"

    @app.workflow("first")
    def first(ctx, _):
        if by_itself:  # committed before the step is asked for: causally before it
            app.cancel(ctx.execution_id, by="itself")
        else:
            reached.release()
            go.wait(30)
        return ctx.step("s1", _record, dsn, ctx.execution_id, "s1")

    worker = start_worker(app, concurrency=EXECUTIONS, lease=QUIET)
    ids = [app.enqueue("first") for _ in range(EXECUTIONS)]
    if not by_itself:
        for _ in ids:
            assert reached.acquire(timeout=30), "every execution to reach its code before the first step"
        for eid in ids:
            app.cancel(eid, by="alice")
        go.set()
    wait_for(
        lambda: worker.stats["refused_writes"] >= EXECUTIONS,
        timeout=30,
        what="every cancelled execution's thread to be fenced out",
    )
    assert [app.get(eid).status for eid in ids] == ["cancelled"] * EXECUTIONS
    assert _s1_runs(ledger, ids) == dict.fromkeys(ids, 0)
    assert ledger.execute("SELECT count(*) FROM step_attempts WHERE execution_id = ANY(%s)", (ids,)).fetchone() == (0,)


def test_a_deadline_that_passed_before_the_first_step_runs_nothing(
    app: Kestrel, dsn: str, ledger: psycopg.Connection, start_worker
) -> None:
    @app.workflow("late", timeout=0.5)
    def late(ctx, _):
        # The workflow's own code outlives the deadline: the sweep ends the execution meanwhile.
        wait_for(lambda: app.get(ctx.execution_id).status == "error", timeout=30, what="the deadline sweep")
        return ctx.step("s1", _record, dsn, ctx.execution_id, "s1")

    worker = start_worker(app, concurrency=EXECUTIONS, lease=QUIET)
    ids = [app.enqueue("late") for _ in range(EXECUTIONS)]
    wait_for(lambda: worker.stats["refused_writes"] >= EXECUTIONS, timeout=30, what="every late thread fenced out")
    assert {(app.get(eid).status, app.get(eid).error) for eid in ids} == {
        ("error", "timed out after 0.5s (deadline from start)")
    }
    assert _s1_runs(ledger, ids) == dict.fromkeys(ids, 0)


@pytest.fixture
def frozen(dsn: str, ledger: psycopg.Connection, tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    """Worker process ``frozen`` of first_step_app (short lease), registered."""
    log = tmp_path / "frozen.log"
    with registered_worker(
        dsn, ledger, "tests.core.first_step_app:app", log, lease=LEASE, concurrency=2 * EXECUTIONS
    ) as proc:
        yield proc, log


def _freeze_before_the_first_step(
    app: Kestrel, db: psycopg.Connection, proc: subprocess.Popen, gate: Path
) -> list[int]:
    """Enqueue executions of ``gated``, wait until each waits for its gate, SIGSTOP the worker
    and wait until every lease lapsed; returns their ids (the worker is left frozen)."""
    ids = [app.enqueue("gated", str(gate)) for _ in range(EXECUTIONS)]
    wait_for(
        lambda: (
            db.execute(
                "SELECT count(DISTINCT execution_id) FROM public.ledger"
                " WHERE step_id = 'reached' AND execution_id = ANY(%s)",
                (ids,),
            ).fetchone()[0]
            == EXECUTIONS
        ),
        timeout=30,
        what="every execution to wait before its first step",
    )
    os.kill(proc.pid, signal.SIGSTOP)
    wait_leases_lapsed(db, ids)
    return ids


def test_a_worker_frozen_before_the_first_step_then_requeued_and_resumed_runs_it_once(
    app: Kestrel, ledger: psycopg.Connection, frozen, tmp_path: Path
) -> None:
    proc, log = frozen
    gate = tmp_path / "gate"
    ids = _freeze_before_the_first_step(app, ledger, proc, gate)
    try:
        for eid in ids:
            app.requeue(eid, by="operator", comment="worker frozen")
        gate.touch()
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    # The resumed worker claims them again (a newer claim) while its frozen threads go on.
    wait_for(lambda: all(app.get(eid).done for eid in ids), timeout=60, what="every execution to finish")
    wait_for(
        lambda: log.read_text().count("event=write_refused") >= EXECUTIONS,
        timeout=30,
        what="every frozen claim's thread to be fenced out",
    )
    assert [app.get(eid).status for eid in ids] == ["success"] * EXECUTIONS
    assert _s1_runs(ledger, ids) == dict.fromkeys(ids, 1), log.read_text()[-3000:]


def test_a_worker_frozen_before_the_first_step_swept_and_finished_elsewhere_runs_nothing_when_resumed(
    app: Kestrel, dsn: str, ledger: psycopg.Connection, frozen, tmp_path: Path
) -> None:
    proc, log = frozen
    gate = tmp_path / "gate"
    ids = _freeze_before_the_first_step(app, ledger, proc, gate)
    gate.touch()
    with (tmp_path / "other.log").open("w") as out:
        other = start_worker_process(
            dsn, "tests.core.first_step_app:app", "--processes", "1", "--lease", str(LEASE), out=out
        )
    try:
        # The other worker's sweep hands the lapsed leases back; it claims and finishes them.
        wait_for(lambda: all(app.get(eid).done for eid in ids), timeout=60, what="every execution to finish elsewhere")
        assert [app.get(eid).status for eid in ids] == ["success"] * EXECUTIONS
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    wait_for(
        lambda: log.read_text().count("event=write_refused") >= EXECUTIONS,
        timeout=30,
        what="every frozen claim's thread to be fenced out",
    )
    stop_worker_processes([other])
    assert _s1_runs(ledger, ids) == dict.fromkeys(ids, 1), log.read_text()[-3000:]
    assert ledger.execute(
        "SELECT DISTINCT worker FROM public.ledger WHERE step_id = 's1' AND execution_id = ANY(%s)", (ids,)
    ).fetchall() == [(str(other.pid),)]


def test_a_cancel_of_a_fresh_first_claim_commits_only_once_the_claim_no_longer_fences_alone(
    app: Kestrel, dsn: str, ledger: psycopg.Connection, start_worker
) -> None:
    """The claim alone fences a first step reached within FIRST_STEP_FRESH_S of it; a cancel
    of that claim commits only CANCEL_WAITS_FOR_FRESH_CLAIMS_S after the claim's statement,
    so it commits after every such step started, never between the claim and the step."""
    started = threading.Event()
    release = threading.Event()

    @app.workflow("fresh")
    def fresh(ctx, _):
        return ctx.step("s1", lambda: started.set() or release.wait(30))

    start_worker(app, concurrency=1, lease=QUIET)
    eid = app.enqueue("fresh")
    wait_for(lambda: app.get(eid).status == "running", interval=0.001, what="the claim")
    try:
        app.cancel(eid, by="alice")  # at once: the claim is a few ms old
        after = ledger.execute(
            "SELECT clock_timestamp() - started_at FROM workflow_executions WHERE id = %s", (eid,)
        ).fetchone()[0]
    finally:
        release.set()
    assert after >= timedelta(seconds=CANCEL_WAITS_FOR_FRESH_CLAIMS_S)
    assert app.get(eid).status == "cancelled"


def test_the_cancel_waits_longer_than_a_claim_alone_fences_a_first_step() -> None:
    text = Path(migrate.__file__).with_name("schema").joinpath("functions", "lock_live_execution.sql").read_text()
    waits = {float(ms) / 1000 for ms in re.findall(r"interval '(\d+) milliseconds'", text)}
    assert waits == {CANCEL_WAITS_FOR_FRESH_CLAIMS_S}
    assert CANCEL_WAITS_FOR_FRESH_CLAIMS_S >= FIRST_STEP_FRESH_S + 0.05  # the two clocks' margin


def test_a_coroutine_first_step_that_starts_late_on_a_held_event_loop_is_fenced(
    app: Kestrel, dsn: str, ledger: psycopg.Connection, start_worker
) -> None:
    """The coroutine of a sync workflow's first step runs on the worker's event loop: a loop
    held by another workflow's blocking code starts it long after ``_open`` found the claim
    fresh. A cancel committed meanwhile must still stop it (before the fix: s1 ran in every one)."""
    holding = threading.Event()
    release = threading.Event()

    @app.workflow("holder")
    async def holder(ctx, _):
        holding.set()
        release.wait(30)  # blocks the worker's event loop (deliberately: the case under test)
        return "released"

    async def s1(execution_id: int) -> str:
        return _record(dsn, execution_id, "s1")

    @app.workflow("coro-first")
    def coro_first(ctx, _):
        return ctx.step("s1", s1, ctx.execution_id)

    worker = start_worker(app, concurrency=EXECUTIONS + 1, lease=QUIET)
    held = app.enqueue("holder")
    assert holding.wait(30), "the holder to hold the event loop"
    ids = [app.enqueue("coro-first") for _ in range(EXECUTIONS)]
    try:
        wait_for(
            lambda: {app.get(eid).status for eid in ids} == {"running"}, timeout=30, what="every execution claimed"
        )
        for eid in ids:
            app.cancel(eid, by="alice")
    finally:
        release.set()
    wait_for(lambda: worker.stats["refused_writes"] >= EXECUTIONS, timeout=30, what="every cancelled one fenced out")
    wait_for(lambda: app.get(held).done, timeout=30, what="the holder to finish")
    assert [app.get(eid).status for eid in ids] == ["cancelled"] * EXECUTIONS
    assert _s1_runs(ledger, ids) == dict.fromkeys(ids, 0)


def test_a_first_step_past_the_fresh_claim_has_its_attempt_on_record_before_it_runs(
    app: Kestrel, dsn: str, ledger: psycopg.Connection, start_worker
) -> None:
    """Fenced by a write of its own (a workflow with a deadline never counts as fresh), the
    first step's attempt is opened by that write, before its function is called: a worker frozen
    between the two then ran a step whose start is on record (the chaos run's check of late
    starts read "started 0.45 s after its claim ended" when the fence was a write of nothing)."""
    seen: dict[int, list[tuple[str, str]]] = {}

    def look(execution_id: int) -> str:
        with psycopg.connect(dsn, autocommit=True) as conn:
            seen[execution_id] = conn.execute(
                "SELECT step_id, outcome FROM kestrel.step_attempts WHERE execution_id = %s", (execution_id,)
            ).fetchall()
        return "looked"

    @app.workflow("dated", timeout=60)
    def dated(ctx, _):
        return ctx.step("s1", look, ctx.execution_id)

    start_worker(app, concurrency=2, lease=QUIET)
    eid = app.enqueue("dated")
    wait_for(lambda: app.get(eid).done, timeout=30, what="the execution")
    assert (app.get(eid).status, seen[eid]) == ("success", [("s1", "running")])
