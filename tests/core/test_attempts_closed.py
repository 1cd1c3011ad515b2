"""An attempt its worker can no longer close is closed in storage by the transition that ended
its claim, in that transition's transaction (issue 45, "one lifecycle"): a cancel closes it
'cancelled'; a lease sweep, a hand-back, a requeue, a resume after a pause and a deadline close
it 'abandoned', so a re-claim finds it closed. Readers (the console's timeline) show what is
stored instead of deriving it. Each case is one transition of kestrel_core.lifecycle."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

from kestrel_core import AttemptOutcome, Kestrel
from kestrel_core.dispatch import lease, sweeper
from kestrel_core.dispatch.claim import claim
from kestrel_core.dispatch.deadlines import sweep_deadlines
from kestrel_core.durable import boundary, checkpoint
from kestrel_core.durable.boundary import Boundary, Finish
from kestrel_core.lifecycle import transition
from tests.core.test_fencing import expire, opened

S = "kestrel"


def _cancel(app: Kestrel, db: psycopg.Connection, eid: int, epoch: int) -> None:
    app.cancel(eid, by="alice")


def _requeue(app: Kestrel, db: psycopg.Connection, eid: int, epoch: int) -> None:
    expire(db, eid)
    app.requeue(eid, by="alice")


def _sweep(app: Kestrel, db: psycopg.Connection, eid: int, epoch: int) -> None:
    expire(db, eid)
    assert sweeper.sweep_leases(db, S) == [eid]


def _reclaim(app: Kestrel, db: psycopg.Connection, eid: int, epoch: int) -> None:
    # The lease lapsed, the sweep re-enqueued it, another worker claims it: the old attempt is
    # closed before the new claim exists (and stays so after it).
    _sweep(app, db, eid, epoch)
    (new,) = claim(db, S, worker_id="w2", names=["w"], n=1, lease=timedelta(seconds=30))
    assert new.execution_id == eid and new.claim_epoch == epoch + 1


def _release(app: Kestrel, db: psycopg.Connection, eid: int, epoch: int) -> None:
    assert checkpoint.release(db, S, eid, worker_id="w1", claim_epoch=epoch)


def _release_all(app: Kestrel, db: psycopg.Connection, eid: int, epoch: int) -> None:
    assert lease.release_all(db, S, "w1") == [eid]


def _resume(app: Kestrel, db: psycopg.Connection, eid: int, epoch: int) -> None:
    app.pause(eid, by="alice")  # the step in flight runs on: its worker may still close it
    assert db.execute("SELECT outcome FROM step_attempts WHERE execution_id = %s", (eid,)).fetchall() == [("running",)]
    # Its claim ends (the lease lapses: the worker is gone). A resume while it is alive gives the
    # execution back to that claim, which closes the attempt itself (tests/core/test_pause.py).
    db.execute("UPDATE workflow_executions SET lease_expires = now() - interval '1 second' WHERE id = %s", (eid,))
    assert app.resume(eid, by="alice") == "enqueued"  # now its writes are fenced out


def _deadline(app: Kestrel, db: psycopg.Connection, eid: int, epoch: int) -> None:
    db.execute("UPDATE workflow_executions SET deadline_at = now() - interval '1 second' WHERE id = %s", (eid,))
    assert sweep_deadlines(db, S) == [eid]


CASES: dict[str, tuple[str, Callable[[Kestrel, psycopg.Connection, int, int], None]]] = {
    "cancel": ("cancel", _cancel),
    "requeue": ("requeue", _requeue),
    "sweep-lapsed": ("sweep-lapsed", _sweep),
    "re-claim": ("sweep-lapsed", _reclaim),
    "release": ("release", _release),
    "release-all": ("release", _release_all),
    "resume": ("resume", _resume),
    "deadline": ("deadline", _deadline),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_transition_that_ends_a_claim_closes_its_open_attempt(
    app: Kestrel, db: psycopg.Connection, case: str
) -> None:
    name, act = CASES[case]
    eid = app.enqueue("w")
    (held,) = claim(db, S, worker_id="w1", names=["w"], n=1, lease=timedelta(seconds=30))
    opened(db, eid, "w1", held.claim_epoch, "a")
    act(app, db, eid, held.claim_epoch)
    rows = db.execute(
        "SELECT owner_id, outcome, finished_at >= started_at FROM step_attempts WHERE execution_id = %s",
        (eid,),
    ).fetchall()
    expected = transition(name).closes_attempts
    assert expected is not None
    assert rows == [("w1", expected, True)]
    assert expected == (AttemptOutcome.CANCELLED if name == "cancel" else AttemptOutcome.ABANDONED)


def test_a_child_cancelled_with_its_parent_has_its_attempt_closed(app: Kestrel, db: psycopg.Connection) -> None:
    parent = app.enqueue("w")
    child = app.enqueue("w")
    db.execute("UPDATE workflow_executions SET parent_id = %s WHERE id = %s", (parent, child))
    claimed = claim(db, S, worker_id="w1", names=["w"], n=2, lease=timedelta(seconds=30))
    epochs = {c.execution_id: c.claim_epoch for c in claimed}
    opened(db, child, "w1", epochs[child], "a")
    app.cancel(parent, by="alice")
    assert db.execute("SELECT outcome FROM step_attempts WHERE execution_id = %s", (child,)).fetchall() == [
        ("cancelled",)
    ]


def test_a_finished_attempt_is_left_as_its_worker_closed_it(app: Kestrel, db: psycopg.Connection) -> None:
    eid = app.enqueue("w")
    (held,) = claim(db, S, worker_id="w1", names=["w"], n=1, lease=timedelta(seconds=30))
    attempt = opened(db, eid, "w1", held.claim_epoch, "a")
    boundary.write(db, S, [Boundary(eid, "w1", held.claim_epoch, finish=Finish("a", attempt, Jsonb(1), position=1))])
    app.cancel(eid, by="alice")
    assert db.execute("SELECT outcome FROM step_attempts WHERE execution_id = %s", (eid,)).fetchall() == [("success",)]
