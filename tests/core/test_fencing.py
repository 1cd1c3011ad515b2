"""Fencing: writes under a stale claim are refused, even under the same owner id."""

from __future__ import annotations

from datetime import timedelta

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core import Kestrel
from kestrel_core import checkpoint, completion, lease, sweeper, waits
from kestrel_core.claim import claim

S = "kestrel"


def expire(db: psycopg.Connection, eid: int) -> None:
    db.execute("UPDATE workflow_executions SET lease_expires = now() - interval '1 second' WHERE id = %s", (eid,))


def test_stale_claim_cannot_checkpoint_park_or_complete(app: Kestrel, db: psycopg.Connection) -> None:
    eid = app.enqueue("w")
    (old,) = claim(db, S, owner="w1", names=["w"], n=1, lease=timedelta(seconds=30))
    attempt = checkpoint.start_attempt(db, S, execution_id=eid, step_id="a", owner="w1", epoch=old.epoch)
    assert attempt is not None
    expire(db, eid)
    assert sweeper.sweep_leases(db, S) == [eid]
    # The same owner id claims it again: a new epoch, and the old claim is now stale.
    (new,) = claim(db, S, owner="w1", names=["w"], n=1, lease=timedelta(seconds=30))
    assert new.epoch == old.epoch + 1
    stale = dict(execution_id=eid, owner="w1", epoch=old.epoch)
    assert checkpoint.finish_step(db, S, step_id="a", attempt=attempt, output=Jsonb(1), error=None, **stale) is None
    assert checkpoint.start_attempt(db, S, step_id="b", **stale) is None
    assert waits.park(db, S, step_id="nap", kind="sleep", after=timedelta(seconds=1), **stale) is False
    assert completion.complete(db, S, status="success", output=Jsonb("zombie"), **stale) is False
    assert db.execute("SELECT count(*) FROM operation_outputs").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM workflow_waits").fetchone() == (0,)
    assert app.get(eid).status == "running"
    # The current claim writes fine.
    current = dict(execution_id=eid, owner="w1", epoch=new.epoch)
    fresh = checkpoint.start_attempt(db, S, step_id="a", **current)
    stored = checkpoint.finish_step(db, S, step_id="a", attempt=fresh, output=Jsonb(2), error=None, **current)
    assert stored is not None and stored.output == 2
    assert completion.complete(db, S, status="success", output=Jsonb("real"), **current) is True
    assert app.get(eid).output == "real"


def test_checkpoint_written_once_first_result_wins(app: Kestrel, db: psycopg.Connection) -> None:
    eid = app.enqueue("w")
    (held,) = claim(db, S, owner="w1", names=["w"], n=1, lease=timedelta(seconds=30))
    mine = dict(execution_id=eid, owner="w1", epoch=held.epoch)
    one = checkpoint.start_attempt(db, S, step_id="a", **mine)
    two = checkpoint.start_attempt(db, S, step_id="a", **mine)
    first = checkpoint.finish_step(db, S, step_id="a", attempt=one, output=Jsonb("first"), error=None, **mine)
    second = checkpoint.finish_step(db, S, step_id="a", attempt=two, output=Jsonb("second"), error=None, **mine)
    assert first.output == "first" and second.output == "first"
    assert db.execute("SELECT output FROM operation_outputs").fetchall() == [("first",)]


def test_heartbeat_renews_only_current_claims(app: Kestrel, db: psycopg.Connection) -> None:
    a, b = app.enqueue("w"), app.enqueue("w")
    claimed = claim(db, S, owner="w1", names=["w"], n=2, lease=timedelta(seconds=2))
    app.cancel(b, by="op")
    held = lease.heartbeat(db, S, "w1", timedelta(seconds=60), [a, b])
    epochs = {c.execution_id: c.epoch for c in claimed}
    assert held == {(a, epochs[a])}
    remaining = db.execute("SELECT lease_expires - now() > interval '50 seconds' FROM workflow_executions"
                           " WHERE id = %s", (a,)).fetchone()[0]
    assert remaining


def test_sweeper_is_idempotent_and_leaves_live_leases(app: Kestrel, db: psycopg.Connection) -> None:
    live, dead = app.enqueue("w"), app.enqueue("w")
    claim(db, S, owner="w1", names=["w"], n=2, lease=timedelta(seconds=30))
    expire(db, dead)
    assert sweeper.sweep_leases(db, S) == [dead]
    assert sweeper.sweep_leases(db, S) == []
    assert app.get(live).status == "running" and app.get(dead).status == "enqueued"
