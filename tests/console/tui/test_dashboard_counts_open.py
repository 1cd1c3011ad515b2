"""Dashboard counters open the filtered list (issue 20, drill-down): enter (or a click) on a
"status count" line opens Executions filtered by that status, and on a count in "Queue depth by
workflow" filtered by that workflow (its whole name) and status; the list shows exactly the
executions the count counted."""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.widgets.count_line import CountLine
from tests.seed import seed_history

from .helpers import console, focus, fresh, rows, wait_for

IDS_WHERE = (
    "SELECT id FROM workflow_executions WHERE status = %s AND (%s::text IS NULL OR workflow_name = %s) ORDER BY id"
)


async def listed(pilot, status: str | None, workflow: str | None) -> ExecutionsScreen:
    """Wait for the Executions list showing that filter's first page."""
    tui = pilot.app
    await wait_for(pilot, lambda: isinstance(tui.screen, ExecutionsScreen), what="the Executions list")
    screen = tui.screen
    assert (screen.filter.status, screen.filter.workflow) == (status, workflow)
    await fresh(pilot, screen)
    return screen


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_a_count_opens_the_list_it_counts(dsn, db, size):
    seed_history(db)
    # A name that starts like another: the depth count of 'remediate' must not list it.
    db.execute("INSERT INTO workflow_executions (workflow_name, status) VALUES ('remediate-db', 'waiting')")
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        dashboard = tui.screen
        assert isinstance(dashboard, DashboardScreen)
        await fresh(pilot, dashboard)
        errors = dashboard.query_one("#count-error", CountLine)
        await focus(pilot, errors)
        await pilot.press("enter")
        screen = await listed(pilot, "error", None)
        assert [int(k) for k in screen.table.keys()] == sorted(
            (r[0] for r in rows(db, IDS_WHERE, ("error", None, None))), reverse=True
        )
        assert len(screen.table.keys()) == dashboard.counts["error"]

        await pilot.press("1")
        await wait_for(pilot, lambda: tui.screen is dashboard)
        await pilot.click(dashboard.query_one("#count-waiting", CountLine))
        screen = await listed(pilot, "waiting", None)
        assert len(screen.table.keys()) == dashboard.counts["waiting"]

        await pilot.press("1")
        await wait_for(pilot, lambda: tui.screen is dashboard)
        depth = dashboard.query_one("#dash-depth")
        await focus(pilot, depth)
        depth.move_cursor(row=depth.get_row_index("remediate"), column=depth.get_column_index("waiting"))
        await pilot.pause()
        await pilot.press("enter")
        screen = await listed(pilot, "waiting", "remediate")
        wanted = [r[0] for r in rows(db, IDS_WHERE, ("waiting", "remediate", "remediate"))]
        assert sorted(int(k) for k in screen.table.keys()) == wanted
        assert "workflow:=remediate" in str(screen.filter)
