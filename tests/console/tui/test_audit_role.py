"""The execution screen shows who decided a gate twice: the name given and the database role
that acted (issue 9)."""

from __future__ import annotations

from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.widgets.live_table import LiveTable
from kestrel_console.tui.widgets.timeline import Timeline
from kestrel_core import Kestrel
from tests.cli.test_audit_db_user import ops_login  # noqa: F401  (fixture)
from tests.seed import waiting_on_gate

from .helpers import SIZE, console, fresh


async def who_decided(dsn: str, eid: int) -> list[str]:
    """The detail screen's worker column of execution ``eid``'s attempts (a gate: who decided)."""
    async with console(dsn).run_test(size=SIZE) as pilot:
        screen = DetailScreen(eid)
        await pilot.app.push_screen(screen)
        await fresh(pilot, screen)
        attempts = screen.query_one("#detail-attempts", LiveTable)
        return [attempts.shown(k, "worker") for k in attempts.keys()]


async def test_detail_shows_the_name_given_and_the_database_role(dsn, db, ops_login):
    role, ops_dsn = ops_login
    eid = waiting_on_gate(db)
    with Kestrel(ops_dsn) as ops:
        ops.approve(eid, "approve-fix", by="alice", comment="lgtm")
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen = DetailScreen(eid)
        await pilot.app.push_screen(screen)
        await fresh(pilot, screen)
        lines = [line.plain for line in screen.query_one(Timeline).lines(160)]
        gate = next(line for line in lines if "approve-fix" in line)
        assert "approved by alice (db role " in gate  # the lane's summary column may cut the rest
        attempts = screen.query_one("#detail-attempts", LiveTable)
        assert [attempts.shown(k, "worker") for k in attempts.keys()] == [f"alice (db role {role})"]


async def test_detail_marks_a_decision_no_operator_action_records(dsn, db, ops_login):
    """Issue 18: written outside decide_approval (by hand, as the owner), it says so."""
    eid = waiting_on_gate(db)
    db.execute(
        "UPDATE workflow_waits SET decision = 'approved', decided_by = 'alice', decided_at = now(),"
        " resolved_at = now() WHERE execution_id = %s",
        (eid,),
    )
    assert await who_decided(dsn, eid) == ["alice [UNAUDITED: no operator action records this decision]"]


async def test_detail_marks_an_audited_decision_edited_afterwards(dsn, db, ops_login):
    """Issue 44, finding 8: bob's audited rejection edited by the owner into alice's approval
    (guard_waits bypassed) no longer matches its audit row: marked."""
    role, ops_dsn = ops_login
    eid = waiting_on_gate(db)
    with Kestrel(ops_dsn) as ops:
        ops.reject(eid, "approve-fix", by="bob", comment="too risky")
    with db.transaction():
        db.execute("SET LOCAL session_replication_role = replica")
        db.execute(
            "UPDATE workflow_waits SET decision = 'approved', decided_by = 'alice' WHERE execution_id = %s", (eid,)
        )
    assert await who_decided(dsn, eid) == [
        f"alice (db role {role}) [UNAUDITED: no operator action records this decision]"
    ]
