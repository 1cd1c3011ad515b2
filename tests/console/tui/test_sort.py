"""Sort by column (issue 20, "what to build"): ``s`` sorts the Executions page (and Approvals) by the next column,
``S`` reverses it, a click on a header sorts by that column (again: reversed). The sort is by the
stored value (2h after 9m), survives refreshes, and the cursor and the actions stay on the row's
id while rows move under it."""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.widgets.comment import CommentModal

from .helpers import fresh, on_screen, screen_lines, text_of, wait_for

# (workflow, running for minutes): ids 1..5 in this order
SEEDED = [("deploy", 9), ("billing", 120), ("cleanup", 30), ("audit", 2), ("billing", 45)]
RUNNING = (
    "INSERT INTO workflow_executions (workflow_name, status, started_at, owner_id, lease_expires)"
    " VALUES (%s, 'running', now() - make_interval(mins => %s), 'w1', now() + interval '1 hour') RETURNING id"
)


def header(screen) -> str:
    return " ".join(column.label.plain for column in screen.table.columns.values())


async def click_header(pilot, screen, column: str) -> None:
    """Click the header cell of ``column``, as a mouse does."""
    x = 0
    for key, shown in screen.table.columns.items():
        if key.value == column:
            break
        x += shown.get_render_width(screen.table)
    await pilot.click(screen.table, offset=(x + 1, 0))


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_sort_by_column(dsn, db, size):
    ids = [db.execute(RUNNING, spec).fetchone()[0] for spec in SEEDED]
    by_minutes = {eid: minutes for eid, (_, minutes) in zip(ids, SEEDED, strict=True)}
    async with on_screen(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, screen):
        keys = lambda: [int(k) for k in screen.table.keys()]  # noqa: E731
        assert keys() == sorted(ids, reverse=True) and "id ▼" in header(screen)

        await pilot.press("s")  # workflow, ascending; two billing rows: newest first
        assert keys() == [ids[3], ids[4], ids[1], ids[2], ids[0]]
        assert "workflow ▲" in header(screen) and "id ▼" not in header(screen)
        assert "sorted by workflow ▲" in text_of(screen.query_one("#exec-where"))
        await pilot.press("S")
        assert keys() == [ids[0], ids[2], ids[4], ids[1], ids[3]] and "workflow ▼" in header(screen)

        await click_header(pilot, screen, "duration")  # by the stored seconds: 2h0m after 45m
        await wait_for(pilot, lambda: "duration ▲" in header(screen), what="the click on the header")
        assert keys() == sorted(ids, key=by_minutes.get)
        await click_header(pilot, screen, "duration")
        await wait_for(pilot, lambda: "duration ▼" in header(screen), what="the second click")
        assert keys() == sorted(ids, key=by_minutes.get, reverse=True)

        # The cursor on "cleanup" (30 min); the rows move under it on the next refresh: the
        # sort holds, the cursor and the action stay on its id.
        chosen = ids[2]
        screen.table.move_cursor(row=screen.table.get_row_index(str(chosen)))
        await pilot.pause()
        db.execute("UPDATE workflow_executions SET started_at = now() - interval '5 hours' WHERE id = %s", (chosen,))
        await fresh(pilot, screen)
        assert keys()[0] == chosen and keys() == sorted(ids, key=lambda i: 300 if i == chosen else by_minutes[i])[::-1]
        assert screen.table.cursor_key() == str(chosen)
        assert "duration ▼" in " ".join(screen_lines(tui))
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal), what="the reason prompt")
        assert str(chosen) in text_of(tui.screen.query_one("#comment-title"))


async def test_one_click_on_a_row_only_moves_the_cursor(dsn, db):
    """A click was handled twice (LiveTable passed it on to DataTable, which Textual calls as
    well): clicking another row moved the cursor there and opened it at once."""
    ids = [db.execute(RUNNING, spec).fetchone()[0] for spec in SEEDED]
    async with on_screen(dsn, "2", ExecutionsScreen, size=(80, 24)) as (tui, pilot, screen):
        row = screen.table.get_row_index(str(ids[0]))
        await pilot.click(screen.table, offset=(4, row + 1))  # +1: the header row
        await pilot.pause()
        assert tui.screen is screen and screen.table.cursor_key() == str(ids[0])


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_sort_approvals_by_column(dsn, db, size):
    """Approvals sort too: oldest first as read, by a clicked header, reversed with S; the
    gate under the cursor stays under it."""
    gates = []
    for name, minutes in (("deploy", 5), ("audit", 50), ("cleanup", 20)):
        eid = db.execute(
            "INSERT INTO workflow_executions (workflow_name, status) VALUES (%s, 'waiting') RETURNING id", (name,)
        ).fetchone()[0]
        db.execute(
            "INSERT INTO workflow_waits (execution_id, step_id, kind, created_at)"
            " VALUES (%s, 'approve', 'approval', now() - make_interval(mins => %s))",
            (eid, minutes),
        )
        gates.append(f"{eid}:approve")
    deploy, audit, cleanup = gates
    async with on_screen(dsn, "3", ApprovalsScreen, size=size) as (tui, pilot, screen):
        assert screen.table.keys() == [audit, cleanup, deploy] and "waiting ▼" in header(screen)
        screen.table.move_cursor(row=screen.table.get_row_index(cleanup))
        await click_header(pilot, screen, "workflow")
        await wait_for(pilot, lambda: "workflow ▲" in header(screen), what="the click on the header")
        assert screen.table.keys() == [audit, cleanup, deploy]
        await pilot.press("S")
        assert screen.table.keys() == [deploy, cleanup, audit]
        await fresh(pilot, screen)
        assert screen.table.keys() == [deploy, cleanup, audit] and screen.table.cursor_key() == cleanup
        assert "sorted by workflow ▼" in text_of(screen.query_one("#appr-summary"))
        await pilot.pause()
        shown = " ".join(line.strip() for line in screen_lines(tui))  # the summary wraps at 80, never cut
        assert "sorted by workflow ▼ (s, S)" in shown, shown
