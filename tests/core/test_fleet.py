"""Fleet-wide duties shared out among the live workers (kestrel_core/engine/fleet.py).

A fleet of N workers each sweeping, ticking and polling on its own timer made those costs grow
with N (500 idle workers: ~2,000 statements a second, bench/fleet.py). Each worker now takes
its turn with probability SHARE / N; the work still gets done, by whoever takes the turn.
"""

from __future__ import annotations

import random
from datetime import timedelta

import psycopg
import pytest

from kestrel_core import Kestrel
from kestrel_core.dispatch.buckets import Claims
from kestrel_core.engine.fleet import SHARE, Fleet
from tests.waiting import wait_for

LIVE = "now(), interval '1 hour'"  # a beat just now, a long lease: live for the test's length


def add_workers(
    db: psycopg.Connection, n: int, *, prefix: str, claims: Claims | None, beat: str = LIVE, free: int | None = None
) -> None:
    """``n`` rows of workers that beat as ``beat`` says, with ``free`` slots at that beat (None:
    not said, as an older worker); claiming what ``claims`` says (None: another workflow)."""
    params = (claims or Claims(["another"], [None], None)).params()
    for i in range(n):
        db.execute(
            "INSERT INTO workers (worker_id, workflows, versions, queues, free_slots, last_heartbeat, lease)"
            f" VALUES (%s, %s, %s, %s, %s, {beat})",
            (f"{prefix}-{i}", params["workflows"], params["versions"], params["queues"], free),
        )


def test_a_small_fleet_always_takes_its_turn() -> None:
    for n in range(1, SHARE + 1):
        fleet = Fleet(size=n, pollers=n)
        assert all(fleet.turn() and fleet.turn(poll=True) for _ in range(200))


@pytest.mark.parametrize("n", [SHARE + 1, 40, 500])
def test_a_large_fleet_takes_its_share_of_turns(n: int) -> None:
    random.seed(n)
    draws = 40_000
    taken = sum(Fleet(size=n, pollers=1).turn() for _ in range(draws))
    expected = draws * SHARE / n
    assert abs(taken - expected) < 5 * (expected * (1 - SHARE / n)) ** 0.5 + 1
    # a poll is shared among the pollers alone
    assert all(Fleet(size=n, pollers=1).turn(poll=True) for _ in range(200))
    polled = sum(Fleet(size=1, pollers=n).turn(poll=True) for _ in range(draws))
    assert abs(polled - expected) < 5 * (expected * (1 - SHARE / n)) ** 0.5 + 1


def test_the_fleet_counts_live_workers_and_pollers(app: Kestrel, db: psycopg.Connection) -> None:
    mine = Claims(["w"], [None], None)
    add_workers(db, 3, prefix="peer", claims=mine, free=2)
    add_workers(db, 2, prefix="busy-peer", claims=mine, free=0)
    add_workers(db, 1, prefix="older-peer", claims=mine)  # says nothing of its slots
    add_workers(db, 2, prefix="other-kind", claims=None, free=4)
    add_workers(db, 1, prefix="stopped", claims=mine)
    db.execute("UPDATE workers SET stopped_at = now() WHERE worker_id LIKE 'stopped-%'")
    # half its lease since its last beat: a worker beats every third, so it missed one and more
    add_workers(db, 1, prefix="silent", claims=mine, beat="now() - interval '31 minutes', interval '1 hour'")
    add_workers(db, 1, prefix="me", claims=mine)  # its own row: not counted twice
    fleet = Fleet()
    fleet.read(db, "kestrel", worker_id="me-0", lease=timedelta(seconds=30), claims=mine)
    assert (fleet.size, fleet.pollers) == (1 + 3 + 2 + 1 + 2, 1 + 3)


def sleepy(app: Kestrel) -> None:
    @app.workflow("sleepy")
    def sleepy_workflow(ctx, _input):
        ctx.sleep("nap", timedelta(milliseconds=200))
        return "woke"


@pytest.mark.parametrize("listen", [True, False])
def test_a_worker_in_a_large_fleet_passes_turns_and_the_work_is_still_done(
    app: Kestrel, db: psycopg.Connection, start_worker, listen: bool
) -> None:
    """One real worker among 40 live rows polling for the same work (which do nothing): it takes
    about one turn in five at its sweeps, ticks and polls, and still wakes a durable sleep and
    claims new work (with LISTEN, woken at once; without, by its shared polls)."""
    sleepy(app)
    add_workers(db, 40, prefix="quiet", claims=Claims(["sleepy"], [app.workflows["sleepy"].version], None), free=1)
    worker = start_worker(app, worker_id="real", listen=listen, sweep_interval=0.1, poll_interval=0.1)
    wait_for(lambda: (worker.fleet.size, worker.fleet.pollers) == (41, 41), what="the fleet read at a heartbeat")
    ids = [app.enqueue("sleepy") for _ in range(3)]
    wait_for(
        lambda: all(app.get(i).status == "success" for i in ids),
        timeout=60,
        what="every sleep woken and finished",
    )
    assert worker.stats["turns_passed"] > 0


def test_a_dead_worker_in_a_large_fleet_is_recovered(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    """An execution left running by a dead worker (its lease lapsed, its beats stopped) among 40
    live peers that do nothing: the one real worker takes about one lease sweep in five, and
    still recovers and runs it."""

    @app.workflow("w")
    def w(ctx, _input):
        return "ran"

    eid = app.enqueue("w")
    db.execute(
        "UPDATE workflow_executions SET status = 'running', owner_id = 'ghost', claim_epoch = claim_epoch + 1,"
        " claims = claims + 1, started_at = now(), lease_expires = now() - interval '1 second' WHERE id = %s",
        (eid,),
    )
    add_workers(db, 1, prefix="ghost", claims=None, beat="now() - interval '1 hour', interval '2 seconds'")
    add_workers(db, 40, prefix="quiet", claims=Claims(["w"], [app.workflows["w"].version], None))
    worker = start_worker(app, worker_id="real", lease=timedelta(seconds=2), sweep_interval=0.1)
    wait_for(lambda: worker.fleet.size == 41, what="the fleet read at a heartbeat")
    wait_for(lambda: app.get(eid).status == "success", timeout=30, what="the dead worker's execution recovered")
