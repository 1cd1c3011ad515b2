"""Events: ctx.wait_for_event / app.send_event."""

from __future__ import annotations

import psycopg
import pytest

from kestrel_core import Kestrel, NotSerializable
from tests.waiting import wait_finished as finished
from tests.waiting import wait_for


def register(app: Kestrel, timeout: float | None = None) -> None:
    @app.workflow("payment")
    def payment(ctx, order):
        ev = ctx.wait_for_event(f"paid:{order}", timeout=timeout)
        if ev.timed_out:
            return {"timed_out": True}
        return {"amount": ev.payload["amount"], "by": ev.sent_by}


def test_an_event_sent_after_the_wait_parks_wakes_it(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    register(app)
    start_worker(app)
    eid = app.enqueue("payment", "A-1")
    other = app.enqueue("payment", "B-2")
    wait_for(lambda: app.get(eid).status == "waiting" and app.get(other).status == "waiting")
    assert db.execute(
        "SELECT kind, details ->> 'key' FROM workflow_waits WHERE execution_id = %s", (eid,)
    ).fetchone() == ("event", "paid:A-1")
    event_id = app.send_event("paid:A-1", {"amount": 12}, by="billing")
    assert finished(app, eid).output == {"amount": 12, "by": "billing"}
    assert app.get(other).status == "waiting"  # another key: still waiting
    assert db.execute("SELECT key, payload, sent_by FROM workflow_events WHERE id = %s", (event_id,)).fetchone() == (
        "paid:A-1",
        {"amount": 12},
        "billing",
    )


def test_an_event_sent_before_the_wait_is_not_lost(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    register(app)
    eid = app.enqueue("payment", "C-3")
    app.send_event("paid:C-3", {"amount": 5})  # before any worker runs it
    start_worker(app)
    assert finished(app, eid).output == {"amount": 5, "by": None}
    assert db.execute("SELECT count(*) FROM workflow_waits").fetchone() == (0,)  # never parked


def test_an_event_sent_before_the_execution_existed_does_not_count(app: Kestrel, start_worker) -> None:
    register(app)
    app.send_event("paid:D-4", {"amount": 1})
    eid = app.enqueue("payment", "D-4")
    start_worker(app)
    wait_for(lambda: app.get(eid).status == "waiting")
    app.send_event("paid:D-4", {"amount": 2})
    assert finished(app, eid).output == {"amount": 2, "by": None}


def test_two_waits_on_one_key_get_successive_events(app: Kestrel, start_worker) -> None:
    @app.workflow("twice")
    def twice(ctx, _):
        return [ctx.wait_for_event("tick").payload, ctx.wait_for_event("tick").payload]

    eid = app.enqueue("twice")
    app.send_event("tick", 1)
    start_worker(app)
    wait_for(lambda: app.get(eid).status == "waiting")
    app.send_event("tick", 2)
    assert finished(app, eid).output == [1, 2]


def test_a_wait_for_event_times_out(app: Kestrel, db: psycopg.Connection, start_worker) -> None:
    register(app, timeout=0.5)
    start_worker(app)
    eid = app.enqueue("payment", "E-5")
    assert finished(app, eid).output == {"timed_out": True}
    assert db.execute(
        "SELECT resolved_at IS NOT NULL FROM workflow_waits WHERE execution_id = %s", (eid,)
    ).fetchone() == (True,)
    app.send_event("paid:E-5", {"amount": 9})  # too late: changes nothing
    assert app.get(eid).output == {"timed_out": True}


def test_send_event_refuses_bad_input_and_writes_nothing(app: Kestrel, db: psycopg.Connection) -> None:
    with pytest.raises(ValueError, match="event key must be a non-empty string"):
        app.send_event("", 1)
    with pytest.raises(NotSerializable, match="payload of event 'k'"):
        app.send_event("k", object())
    assert db.execute("SELECT count(*) FROM workflow_events").fetchone() == (0,)


@pytest.mark.parametrize("sent_before", [0, 1, 2, 3])
def test_waits_on_one_key_gathered_in_an_async_workflow_get_successive_events(
    app: Kestrel, start_worker, sent_before: int
) -> None:
    """Issue 43 (8): three waits on one key gathered with asyncio.gather each get their own
    event, in the order they were started, however many were sent before the workflow ran
    (the rest arrive one by one while it is parked); not every wait the first event."""
    import asyncio

    @app.workflow("gathered")
    async def gathered(ctx, _):
        got = await asyncio.gather(*(ctx.wait_for_event("tick") for _ in range(3)))
        return [event.payload for event in got]

    eid = app.enqueue("gathered")
    for n in range(1, sent_before + 1):
        app.send_event("tick", n)
    start_worker(app)
    for n in range(sent_before + 1, 4):
        wait_for(lambda: app.get(eid).status == "waiting", what=f"the workflow to park for event {n}")
        app.send_event("tick", n)
    assert finished(app, eid).output == [1, 2, 3]
