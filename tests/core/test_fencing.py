"""Fencing: writes under a stale claim are refused, even under the same worker id."""

from __future__ import annotations

from datetime import timedelta

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core import Kestrel
from kestrel_core.dispatch import lease, sweeper
from kestrel_core.dispatch.claim import claim
from kestrel_core.durable import boundary, checkpoint, waits
from kestrel_core.durable.boundary import Attempt, Boundary, Completion, Finish, Outcome

S = "kestrel"


def expire(db: psycopg.Connection, eid: int) -> None:
    db.execute("UPDATE workflow_executions SET lease_expires = now() - interval '1 second' WHERE id = %s", (eid,))


def opened(db: psycopg.Connection, eid: int, worker_id: str, claim_epoch: int, step: str) -> Attempt:
    (outcome,) = boundary.write(db, S, [Boundary(eid, worker_id, claim_epoch, open_step=step)])
    assert outcome.held and outcome.opened is not None
    return outcome.opened


def test_stale_claim_cannot_checkpoint_park_or_complete(app: Kestrel, db: psycopg.Connection) -> None:
    eid = app.enqueue("w")
    (old,) = claim(db, S, worker_id="w1", names=["w"], n=1, lease=timedelta(seconds=30))
    attempt = opened(db, eid, "w1", old.claim_epoch, "a")
    expire(db, eid)
    assert sweeper.sweep_leases(db, S) == [eid]
    # The same worker id claims it again: a new claim epoch, and the old claim is now stale.
    (new,) = claim(db, S, worker_id="w1", names=["w"], n=1, lease=timedelta(seconds=30))
    assert new.claim_epoch == old.claim_epoch + 1
    refused = boundary.write(
        db,
        S,
        [
            Boundary(
                eid,
                "w1",
                old.claim_epoch,
                finish=Finish("a", attempt, Jsonb(1)),
                open_step="b",
                complete=Completion("success", Jsonb("zombie")),
            )
        ],
    )
    assert refused == [Outcome(held=False)]
    stale_nap = checkpoint.Fence(eid, "w1", old.claim_epoch, "nap", 1)
    assert waits.park(db, S, stale_nap, kind="sleep", after=timedelta(seconds=1)) is False
    assert db.execute("SELECT count(*) FROM operation_outputs").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM workflow_waits").fetchone() == (0,)
    # The sweep closed the stale claim's attempt (abandoned), and the stale write left it so.
    assert db.execute("SELECT step_id, outcome FROM step_attempts").fetchall() == [("a", "abandoned")]
    assert app.get(eid).status == "running"
    # The current claim writes fine.
    fresh = opened(db, eid, "w1", new.claim_epoch, "a")
    assert fresh.number == 2  # the stale claim's attempt 1 is still there
    (done,) = boundary.write(
        db,
        S,
        [
            Boundary(
                eid,
                "w1",
                new.claim_epoch,
                finish=Finish("a", fresh, Jsonb(2)),
                complete=Completion("success", Jsonb("real")),
            )
        ],
    )
    assert done.held and done.written and done.completed and done.checkpoint == (2, None, 2)
    assert app.get(eid).output == "real"


def test_checkpoint_written_once_first_result_wins(app: Kestrel, db: psycopg.Connection) -> None:
    eid = app.enqueue("w")
    (held,) = claim(db, S, worker_id="w1", names=["w"], n=1, lease=timedelta(seconds=30))
    one = opened(db, eid, "w1", held.claim_epoch, "a")
    (first,) = boundary.write(db, S, [Boundary(eid, "w1", held.claim_epoch, finish=Finish("a", one, Jsonb("first")))])
    # A claim runs one attempt of a step at a time (opening it again while it runs returns it:
    # a retried write, boundary.py), so the second writer's attempt opens after the first ended.
    two = opened(db, eid, "w1", held.claim_epoch, "a")
    assert two.number == 2
    (second,) = boundary.write(db, S, [Boundary(eid, "w1", held.claim_epoch, finish=Finish("a", two, Jsonb("second")))])
    assert first.written and first.checkpoint == ("first", None, 1)
    assert not second.written and second.held and second.checkpoint == ("first", None, 1)
    assert db.execute("SELECT output FROM operation_outputs").fetchall() == [("first",)]


def test_one_batch_two_executions_one_fenced_out(app: Kestrel, db: psycopg.Connection) -> None:
    """Two executions' boundaries in ONE statement: the one whose claim was swept and taken
    by another worker is refused and writes nothing; the other is written whole."""
    kept, swept = app.enqueue("w"), app.enqueue("w")
    claims = {c.execution_id: c for c in claim(db, S, worker_id="w1", names=["w"], n=2, lease=timedelta(seconds=30))}
    started = {eid: opened(db, eid, "w1", claims[eid].claim_epoch, "a") for eid in (kept, swept)}
    expire(db, swept)
    assert sweeper.sweep_leases(db, S) == [swept]
    (other,) = claim(db, S, worker_id="w2", names=["w"], n=1, lease=timedelta(seconds=30))
    assert other.execution_id == swept
    batch = [
        Boundary(
            eid,
            "w1",
            claims[eid].claim_epoch,
            finish=Finish("a", started[eid], Jsonb(f"out-{eid}"), position=1),
            open_step="b",
        )
        for eid in (kept, swept)
    ]
    outcomes = boundary.write(db, S, batch)
    assert outcomes[0].held and outcomes[0].written and outcomes[0].opened.number == 1
    assert outcomes[1] == Outcome(held=False)
    assert db.execute("SELECT execution_id, step_id, output FROM operation_outputs").fetchall() == [
        (kept, "a", f"out-{kept}")
    ]
    attempts = db.execute("SELECT execution_id, step_id, outcome FROM step_attempts ORDER BY id").fetchall()
    assert attempts == [(kept, "a", "success"), (swept, "a", "abandoned"), (kept, "b", "running")]
    assert [app.get(kept).status, app.get(swept).status] == ["running", "running"]
    assert db.execute("SELECT owner_id FROM workflow_executions WHERE id = %s", (swept,)).fetchone() == ("w2",)
    # Completions batched the same way: only the holder's lands.
    done = boundary.write(
        db,
        S,
        [
            Boundary(kept, "w1", claims[kept].claim_epoch, complete=Completion("success", Jsonb(1))),
            Boundary(swept, "w1", claims[swept].claim_epoch, complete=Completion("success", Jsonb(2))),
        ],
    )
    assert [o.completed for o in done] == [True, False]
    assert [app.get(kept).status, app.get(swept).status] == ["success", "running"]


def test_heartbeat_renews_only_current_claims(app: Kestrel, db: psycopg.Connection) -> None:
    a, b = app.enqueue("w"), app.enqueue("w")
    claimed = claim(db, S, worker_id="w1", names=["w"], n=2, lease=timedelta(seconds=2))
    app.cancel(b, by="op")
    beat = lease.heartbeat(db, S, "w1", timedelta(seconds=60), [a, b])
    epochs = {c.execution_id: c.claim_epoch for c in claimed}
    assert beat.renewed == beat.held == {(a, epochs[a])}
    remaining = db.execute(
        "SELECT lease_expires - now() > interval '50 seconds' FROM workflow_executions WHERE id = %s", (a,)
    ).fetchone()[0]
    assert remaining


def test_sweeper_is_idempotent_and_leaves_live_leases(app: Kestrel, db: psycopg.Connection) -> None:
    live, dead = app.enqueue("w"), app.enqueue("w")
    claim(db, S, worker_id="w1", names=["w"], n=2, lease=timedelta(seconds=30))
    expire(db, dead)
    assert sweeper.sweep_leases(db, S) == [dead]
    assert sweeper.sweep_leases(db, S) == []
    assert app.get(live).status == "running" and app.get(dead).status == "enqueued"


def test_a_stale_claim_loading_checkpoints_closes_none_of_the_new_claims_attempts(
    app: Kestrel, db: psycopg.Connection
) -> None:
    eid = app.enqueue("w")
    (old,) = claim(db, S, worker_id="w1", names=["w"], n=1, lease=timedelta(seconds=30))
    left_open = opened(db, eid, "w1", old.claim_epoch, "a")
    expire(db, eid)
    assert sweeper.sweep_leases(db, S) == [eid]
    # The sweep closed the old claim's attempt in its own transaction.
    assert db.execute("SELECT outcome FROM step_attempts").fetchall() == [("abandoned",)]
    (new,) = claim(db, S, worker_id="w2", names=["w"], n=1, lease=timedelta(seconds=30))
    assert checkpoint.load(db, S, eid, worker_id="w2", claim_epoch=new.claim_epoch) == {}
    running = opened(db, eid, "w2", new.claim_epoch, "a")
    assert running.number == left_open.number + 1
    # The first claim's worker comes back and replays: refused, and the new attempt stays running.
    assert checkpoint.load(db, S, eid, worker_id="w1", claim_epoch=old.claim_epoch) is None
    assert db.execute("SELECT attempt, owner_id, outcome FROM step_attempts ORDER BY attempt").fetchall() == [
        (1, "w1", "abandoned"),
        (2, "w2", "running"),
    ]
