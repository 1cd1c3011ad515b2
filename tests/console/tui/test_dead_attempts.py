"""A re-enqueued execution's attempt whose worker died is shown abandoned, not running (issue
20): the step attempt of the earlier claim kept outcome 'running' on the detail screen, in its
timeline and in ``show``, while the execution waited in the queue or ran again elsewhere. Since
schema version 34 the requeue closes it in storage, and the readers show what is stored."""

from __future__ import annotations

import json

import pytest

from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.widgets.timeline import Timeline
from tests.cli import script

from .helpers import console, fresh

ATTEMPT = (
    "INSERT INTO step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch, started_at, outcome) "
    "VALUES (%s, 'fix', %s, %s, %s, now() - %s::interval, 'running')"
)


def requeued(db, *, claimed_again: bool) -> int:
    """An execution whose worker died mid-step (attempt 1 of claim 1 left 'running', its lease
    expired), then re-enqueued by an operator, which closes the attempt in storage;
    ``claimed_again``: claim 2 runs attempt 2 now."""
    eid = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, claim_epoch, claims, started_at, owner_id, "
        "lease_expires, updated_at) VALUES ('remediate', 'running', 1, 1, now() - interval '60 s', 'w-1', "
        "now() - interval '5 s', now() - interval '5 s') RETURNING id"
    ).fetchone()[0]
    db.execute(ATTEMPT, (eid, 1, "w-1", 1, "50 s"))
    db.execute("SELECT requeue_execution(%s, 'alice', NULL)", (eid,))
    if claimed_again:
        db.execute(
            "UPDATE workflow_executions SET status = 'running', claim_epoch = 2, claims = 2, owner_id = 'w-2', "
            "lease_expires = now() + interval '30 s' WHERE id = %s",
            (eid,),
        )
        db.execute(ATTEMPT, (eid, 2, "w-2", 2, "10 s"))
    return eid


@pytest.mark.parametrize("claimed_again", [False, True], ids=["enqueued", "claimed-again"])
async def test_the_dead_attempt_of_a_requeued_execution_is_abandoned(dsn, db, claimed_again):
    eid = requeued(db, claimed_again=claimed_again)
    expected = ["abandoned", "running"] if claimed_again else ["abandoned"]
    tui = console(dsn)
    async with tui.run_test(size=(200, 50)) as pilot:
        screen = DetailScreen(eid)
        await pilot.app.push_screen(screen)
        await fresh(pilot, screen)
        attempts = screen.query_one("#detail-attempts")
        assert [attempts.shown(k, "outcome") for k in attempts.keys()] == expected
        [lane] = screen.query_one(Timeline).lanes
        assert [s.outcome for s in lane.segments] == expected
        assert lane.segments[0].end is not None  # its bar ends: it is not drawn as running to now
    done = script.console("show", str(eid), "--format", "json", dsn=dsn)
    assert [t["outcome"] for t in json.loads(done.stdout)[0]["timeline"]] == expected
