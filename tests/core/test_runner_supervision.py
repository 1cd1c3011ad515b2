"""Issue 43 (3): no runner thread can die while the worker keeps claiming for it.

runner.py ends whatever a workflow raises in an outcome and the runner loop catches the rest,
so a runner thread dies only of an engine bug; these tests inject one. The claim loop notices
the dead thread at its next turn, replaces it (the worker still runs ``concurrency``
executions at once) and hands back at once the claim it held, instead of heartbeating a claim
that no thread runs.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from kestrel_core import Kestrel
from kestrel_core.engine import runners
from kestrel_core.engine import worker as worker_mod
from tests.waiting import wait_for

CONCURRENCY = 3


def _runners_alive(worker: worker_mod.Worker, before: list[threading.Thread]) -> bool:
    return worker._runners != before and all(t.is_alive() for t in worker._runners)


def test_a_runner_thread_that_dies_is_replaced(
    app: Kestrel, start_worker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    meet = threading.Barrier(CONCURRENCY, timeout=20)

    @app.workflow("together")
    def together(ctx, _):  # succeeds only if CONCURRENCY executions run at once
        return ctx.step("meet", lambda: meet.wait() >= 0)

    @app.workflow("plain")
    def plain(ctx, _):
        return ctx.step("one", lambda: 1)

    worker = start_worker(app, concurrency=CONCURRENCY)
    before = list(worker._runners)

    def done(_held) -> None:  # an engine bug in the runner loop, once
        monkeypatch.undo()
        raise SystemExit("an engine bug in the runner loop")

    monkeypatch.setattr(worker, "_done", done)
    first = app.enqueue("plain")
    wait_for(lambda: _runners_alive(worker, before), what="the dead runner thread to be replaced")
    assert app.get(first).status == "success"
    ids = [app.enqueue("together") for _ in range(CONCURRENCY)]
    wait_for(lambda: all(app.get(eid).done for eid in ids), timeout=30, what="the executions to finish")
    assert [app.get(eid).status for eid in ids] == ["success"] * CONCURRENCY
    assert "event=runner_died" in caplog.text


def test_the_claim_of_a_runner_thread_that_died_is_handed_back_at_once(
    app: Kestrel, start_worker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    @app.workflow("plain")
    def plain(ctx, _):
        return ctx.step("one", lambda: 1)

    real_execute = runners.runner.execute
    broken = threading.Event()

    def execute(worker: worker_mod.Worker, held) -> None:
        if broken.is_set():
            return real_execute(worker, held)
        broken.set()  # the first one: the thread dies with the claim held, nothing written

        def done(_held) -> None:
            monkeypatch.undo()  # only this once
            raise SystemExit("an engine bug in the runner loop")

        monkeypatch.setattr(worker, "_done", done)
        return None

    monkeypatch.setattr(runners.runner, "execute", execute)
    worker = start_worker(app, concurrency=CONCURRENCY, lease=timedelta(seconds=60))
    eid = app.enqueue("plain")
    # Handed back and claimed again long before the 60 s lease would have lapsed.
    wait_for(lambda: app.get(eid).done, timeout=20, what="the execution to be handed back and finish")
    assert app.get(eid).status == "success"
    assert worker.stats["claimed"] == 2
    assert "event=runner_died" in caplog.text
    assert all(t.is_alive() for t in worker._runners)
