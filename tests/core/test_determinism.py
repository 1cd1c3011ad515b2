"""A replay that meets another step than the one recorded fails as a non-deterministic change."""

from __future__ import annotations

import psycopg

from kestrel_core import Kestrel
from tests.waiting import wait_for


def test_a_changed_workflow_fails_its_replay_instead_of_running_the_wrong_step(
    app: Kestrel, dsn: str, db: psycopg.Connection, start_worker
) -> None:
    @app.workflow("deploy", version="1")  # changed below without a version bump
    def deploy_v1(ctx, _):
        ctx.step("build", lambda: "image:1")
        ctx.step("test", lambda: "green")
        ctx.wait_for_approval("ship")
        return ctx.step("release", lambda: "released")

    worker = start_worker(app)
    eid = app.enqueue("deploy")
    wait_for(lambda: app.get(eid).status == "waiting", what="the first version to park at its gate")
    worker.stop()
    assert db.execute(
        "SELECT step_id, seq FROM operation_outputs WHERE execution_id = %s ORDER BY seq", (eid,)
    ).fetchall() == [("build", 1), ("test", 2)]
    assert db.execute("SELECT step_id, seq FROM workflow_waits WHERE execution_id = %s", (eid,)).fetchall() == [
        ("ship", 3)
    ]

    ran = []
    changed = Kestrel(dsn)
    try:

        @changed.workflow("deploy", version="1")
        def deploy_v2(ctx, _):
            ctx.step("build", lambda: "image:1")
            ctx.step("lint", lambda: ran.append("lint"))  # inserted in the middle
            ctx.step("test", lambda: "green")
            ctx.wait_for_approval("ship")
            return ctx.step("release", lambda: ran.append("release"))

        app.approve(eid, "ship", by="alice")
        assert db.execute(
            "SELECT seq FROM operation_outputs WHERE execution_id = %s AND step_id = 'ship'", (eid,)
        ).fetchone() == (3,)  # the decision took the gate's position
        start_worker(changed)
        wait_for(lambda: changed.get(eid).done, what="the replay to end")
        final = changed.get(eid)
        assert final.status == "error"
        assert final.error == (
            f"non-deterministic change in workflow 'deploy' (execution {eid}): replay expected step "
            "'test' at position 2, the code asked for 'lint' (was the workflow changed while "
            "executions were in flight? use version=...)"
        )
        assert ran == []  # the wrong step never ran
        assert db.execute(
            "SELECT count(*) FROM operation_outputs WHERE execution_id = %s AND step_id = 'lint'", (eid,)
        ).fetchone() == (0,)
    finally:
        changed.close()


def test_a_workflow_catching_exceptions_cannot_swallow_the_change(app: Kestrel, dsn: str, start_worker) -> None:
    @app.workflow("careful", version="1")
    def careful_v1(ctx, _):
        ctx.step("a", lambda: 1)
        ctx.sleep("nap", 60)

    worker = start_worker(app)
    eid = app.enqueue("careful")
    wait_for(lambda: app.get(eid).status == "waiting")
    worker.stop()

    changed = Kestrel(dsn)
    try:

        @changed.workflow("careful", version="1")
        def careful_v2(ctx, _):
            try:
                ctx.step("b", lambda: 2)
            except Exception:
                return "swallowed"

        with psycopg.connect(dsn, autocommit=True) as conn:  # wake it now
            conn.execute("UPDATE kestrel.workflow_waits SET wake_at = now() WHERE execution_id = %s", (eid,))
        start_worker(changed)
        wait_for(lambda: changed.get(eid).done)
        assert changed.get(eid).status == "error"
        assert "replay expected step 'a' at position 1, the code asked for 'b'" in changed.get(eid).error
    finally:
        changed.close()


def test_an_unchanged_replay_passes(app: Kestrel, start_worker) -> None:
    @app.workflow("loop")
    def loop(ctx, n):
        total = 0
        for i in range(n):
            total += ctx.step(f"add-{i}", lambda i=i: i)
            if i == 1:
                ctx.sleep("nap", 0.2)
        return total

    start_worker(app)
    eid = app.enqueue("loop", 4)
    wait_for(lambda: app.get(eid).done)
    assert (app.get(eid).status, app.get(eid).output) == ("success", 6)
