"""A list is never older than its refresh interval: the executions list keeps its filter and
keeps refreshing through screen switches, a resize and a detail screen on top of it."""

from __future__ import annotations

from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.screens.reports import ReportsScreen
from kestrel_console.tui.screens.sql import SqlScreen
from tests.seed import seed_history

from .helpers import fresh, on_screen, open_screen, text_of, wait_for

NEW_WAITING = (
    "INSERT INTO workflow_executions (workflow_name, status, input) VALUES ('remediate', 'waiting', '{}') RETURNING id"
)


def where(screen: ExecutionsScreen) -> str:
    return text_of(screen.query_one("#exec-where"))


async def test_the_filtered_list_stays_live_through_the_reported_path(dsn, db):
    """filter status:waiting, enter, 3, enter, 4, 5, 1, resize to 80x24, 2, enter, q (issue 11,
    item 2; 2 opens the list itself since issue 20)."""
    facts = seed_history(db)
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        await pilot.press("slash", *"status:waiting", "enter")
        await fresh(pilot, screen)
        waiting = {str(e.id) for e in facts.with_status("waiting")}
        assert set(screen.table.keys()) == waiting
        await pilot.press("enter")  # the first row's detail, on top of the list
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen))

        await open_screen(pilot, "3", ApprovalsScreen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen))
        await open_screen(pilot, "4", SqlScreen)
        await pilot.press("escape")  # out of the editor, so 5 is a key, not text
        await open_screen(pilot, "5", ReportsScreen)
        await open_screen(pilot, "1", DashboardScreen)
        await pilot.resize_terminal(80, 24)
        await pilot.press("2")  # the list itself, its filter kept, never the last detail (issue 20)
        assert tui.screen is screen
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen))

        # While the detail is on top, the list under it keeps reading: a new waiting
        # execution is in it before the operator goes back.
        new_id = str(db.execute(NEW_WAITING).fetchone()[0])
        await wait_for(pilot, lambda: new_id in screen.table.keys(), what="the covered list to refresh")
        await pilot.press("q")
        assert tui.screen is screen
        assert screen.table.keys()[0] == new_id
        assert where(screen).startswith("status:waiting ")

        # [ on the first page says so instead of doing nothing.
        await pilot.press("left_square_bracket")
        assert any("already on the newest page" in m for _, m in tui.notices)

        # r re-reads now; the filter holds.
        before = screen.loads
        db.execute("UPDATE workflow_executions SET status = 'cancelled' WHERE id = %s", (int(new_id),))
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.loads > before and new_id not in screen.table.keys())
        assert where(screen).startswith("status:waiting ")


async def test_the_cursor_stays_on_its_execution_when_rows_move(dsn, db, app):
    facts = seed_history(db)
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        chosen = str(facts.id("failed_recent"))
        screen.table.move_cursor(row=screen.table.get_row_index(chosen))
        await pilot.pause()
        above = screen.table.keys()[: screen.table.get_row_index(chosen)]
        for _ in range(3):  # new rows arrive above it, one above it leaves
            app.enqueue("billing-sync", {})
        db.execute("DELETE FROM workflow_executions WHERE id = %s", (int(above[-1]),))
        await fresh(pilot, screen)
        assert screen.table.cursor_key() == chosen


async def test_a_list_switched_back_to_says_it_is_refreshing_until_it_is(dsn, db):
    """Data older than the refresh interval is never shown as current: while the refresh
    started on the switch back is held up (a lock), the list is marked as refreshing."""
    import psycopg

    seed_history(db)
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        assert not screen.stale
        dashboard = await open_screen(pilot, "1", DashboardScreen)
        loads = dashboard.loads
        await wait_for(pilot, lambda: dashboard.loads >= loads + 3, what="three refresh intervals")
        with psycopg.connect(dsn) as locker:
            locker.execute("LOCK TABLE kestrel.workflow_executions IN ACCESS EXCLUSIVE MODE")
            await pilot.press("2")
            assert tui.screen is screen
            await wait_for(pilot, lambda: screen.stale and "refreshing…" in where(screen), what="the stale mark")
            assert screen.table.styles.opacity == 0.6, "the old rows are dimmed"
            before = screen.loads
        await wait_for(pilot, lambda: screen.loads > before and not screen.stale, what="the refresh")
        assert "refreshing…" not in where(screen)
        assert screen.table.styles.opacity == 1.0
