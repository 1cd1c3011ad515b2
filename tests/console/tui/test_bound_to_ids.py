"""Actions are bound to execution ids, not to the cursor's position (issue 20, defect 7): a gate
decided elsewhere left the Approvals list, the cursor landed on its neighbour, and ``a`` then
asked to approve the neighbour; a row that changed while its confirmation was on screen was
acted on as it was. Marks stay on their rows through refreshes; ``c`` and ``e`` ask for a
reason as ``a`` and ``x`` do."""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal

from .helpers import (
    ACTIONS,
    OPERATOR,
    acting_on,
    actions_settled,
    fresh,
    on_screen,
    open_screen,
    pending_gates,
    reason_then_confirmation,
    rows,
    statuses,
    wait_for,
)


def gates(db, n: int = 3) -> list[int]:
    """``n`` executions, each waiting on its gate 'approve-fix', oldest first."""
    return pending_gates(db, [("remediate", "approve-fix", None)] * n)


def decide_elsewhere(db, eid: int) -> None:
    db.execute(
        "UPDATE workflow_waits SET resolved_at = now(), decision = 'approved', decided_by = 'bob', "
        "decided_at = now() WHERE execution_id = %s",
        (eid,),
    )
    db.execute("UPDATE workflow_executions SET status = 'enqueued' WHERE id = %s", (eid,))


def notices(tui) -> str:
    return "\n".join(m for _, m in tui.notices)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_a_row_that_left_under_the_cursor_is_never_replaced_by_its_neighbour(dsn, db, size):
    first, second, third = gates(db)
    async with acting_on(dsn, "3", ApprovalsScreen, size=size) as (tui, pilot, screen, asked):
        table = screen.table
        table.move_cursor(row=table.get_row_index(f"{second}:approve-fix"))
        await pilot.press("down", "up")  # the operator's own choice: the second gate
        assert table.cursor_key() == f"{second}:approve-fix"

        decide_elsewhere(db, second)
        await fresh(pilot, screen)
        assert f"{second}:approve-fix" not in table.keys()
        await pilot.press("a")  # meant for the gate that left: refused, the neighbour named
        await wait_for(
            pilot,
            lambda: f"gate 'approve-fix' of execution {second}, under the cursor, left" in notices(tui),
            what="the refusal",
        )
        assert f"now on gate 'approve-fix' of execution {table.cursor_key().split(':')[0]}" in notices(tui)
        assert not isinstance(tui.screen, (CommentModal, ConfirmModal))

        await pilot.press("a")  # again: now for the row under the cursor, named by its id
        neighbour = int(table.cursor_key().split(":")[0])
        await reason_then_confirmation(pilot, "ok")
        assert f"of execution {neighbour}" in tui.screen.question
        await pilot.press("n")
        await actions_settled(pilot, screen)
        assert asked == []


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_a_row_that_changes_while_asked_is_refused_or_asked_again(dsn, db, size):
    first, second, _ = gates(db)
    async with acting_on(dsn, "3", ApprovalsScreen, size=size) as (tui, pilot, screen, asked):
        screen.table.move_cursor(row=screen.table.get_row_index(f"{first}:approve-fix"))
        await pilot.press("a")
        await reason_then_confirmation(pilot)
        decide_elsewhere(db, first)  # decided by someone else while the question is on screen
        await fresh(pilot, screen)
        await pilot.press("y")
        await wait_for(
            pilot, lambda: f"execution {first} left the list while you were asked" in notices(tui), what="the refusal"
        )
        await actions_settled(pilot, screen)
        assert asked == []

        listing = await open_screen(pilot, "2", ExecutionsScreen)
        listing.table.move_cursor(row=listing.table.get_row_index(str(second)))
        await pilot.press("c")
        await reason_then_confirmation(pilot, "stale")
        assert f"execution {second} (remediate), now waiting" in tui.screen.question
        db.execute("UPDATE workflow_executions SET status = 'running' WHERE id = %s", (second,))
        await fresh(pilot, listing)
        await pilot.press("y")  # asked again, naming the new state
        await wait_for(
            pilot,
            lambda: isinstance(tui.screen, ConfirmModal) and "is now running (was waiting)" in tui.screen.question,
            what="the new question",
        )
        assert asked == []
        await pilot.press("y")
        await wait_for(pilot, lambda: statuses(db)[second] == "cancelled", what="the cancel")
        assert rows(db, ACTIONS) == [(OPERATOR, "cancel", second, None, "stale", "running")]


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_marks_stay_on_their_rows_through_refreshes(dsn, db, size):
    ids = gates(db, 4)
    async with on_screen(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, listing):
        table = listing.table
        for eid in (ids[0], ids[2]):
            table.move_cursor(row=table.get_row_index(str(eid)))
            await pilot.press("space")
        db.execute("INSERT INTO workflow_executions (workflow_name) VALUES ('newer')")  # a row above
        db.execute("UPDATE workflow_executions SET status = 'running' WHERE id = %s", (ids[1],))
        await fresh(pilot, listing)
        await fresh(pilot, listing)
        assert table.marks == {str(ids[0]), str(ids[2])}
        assert [k for k in table.keys() if table.get_cell(k, "mark").plain == "●"] == [str(ids[2]), str(ids[0])]
        await pilot.press("c")
        await reason_then_confirmation(pilot)
        assert tui.screen.question.startswith("Cancel 2 executions?")
        assert f"execution {ids[0]} " in tui.screen.question and f"execution {ids[2]} " in tui.screen.question
        await pilot.press("n")
