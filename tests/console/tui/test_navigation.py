"""Number keys always open their screen and esc always goes one level up (issue 20, defect 5
and the SQL screen's esc): key 2 reopened the last execution instead of the list, ``/`` there
did nothing and the filter text typed next was taken as action keys (``a``, ``e``, ``r`` fired);
esc outside the SQL editor went back into it."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.screens.sql import SqlScreen
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal
from kestrel_console.tui.widgets.results import ResultsTable

from .helpers import acting_on, actions_settled, enter_opens_detail, on_screen, open_screen, wait_for


def errored_and_waiting(db) -> tuple[int, int]:
    """An errored execution (e would re-enqueue it) and one waiting on a gate (a would approve)."""
    err = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, error, finished_at) "
        "VALUES ('remediate', 'error', 'boom', now()) RETURNING id"
    ).fetchone()[0]
    wait = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, started_at) "
        "VALUES ('remediate', 'waiting', now()) RETURNING id"
    ).fetchone()[0]
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind) VALUES (%s, 'approve-fix', 'approval')", (wait,)
    )
    return err, wait


async def open_detail(pilot, listing: ExecutionsScreen, eid: int) -> DetailScreen:
    await wait_for(pilot, lambda: str(eid) in listing.table.keys(), what=f"execution {eid} listed")
    listing.table.move_cursor(row=listing.table.get_row_index(str(eid)))
    return await enter_opens_detail(pilot)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_key_2_opens_the_list_and_slash_filters_it_never_acting(dsn, db, size):
    err, wait = errored_and_waiting(db)
    async with acting_on(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, listing, asked):
        await open_detail(pilot, listing, err)
        await pilot.press("1", "2")  # away and back: the list, not the last execution
        assert tui.screen is listing
        await open_detail(pilot, listing, wait)
        await pilot.press("2")  # on the detail itself
        assert tui.screen is listing

        for eid in (err, wait):
            await open_detail(pilot, listing, eid)
            await pilot.press("slash", *"area", "y")  # filter text, not a, e, r, y
            box = listing.query_one("#exec-filter", Input)
            assert tui.screen is listing and box.has_focus and box.value.endswith("areay")
            assert not isinstance(tui.screen, (ConfirmModal, CommentModal))
            await pilot.press("escape")
            assert not box.display
        await actions_settled(pilot, listing)
        assert asked == []


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_esc_goes_one_level_up(dsn, db, size):
    err, _ = errored_and_waiting(db)
    async with on_screen(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, listing):
        await open_detail(pilot, listing, err)
        await pilot.press("escape")  # the detail: back to the list it was opened from
        assert tui.screen is listing

        sql = await open_screen(pilot, "4", SqlScreen)
        assert sql.editor.has_focus
        await pilot.press("escape")  # out of the editor ...
        assert sql.query_one(ResultsTable).has_focus
        await pilot.press("escape")  # ... and no further: not back into it
        assert not sql.editor.has_focus
        await pilot.press("1")  # the number keys work there
        assert isinstance(tui.screen, DashboardScreen)
