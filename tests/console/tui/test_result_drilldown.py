"""``enter`` on a row of an SQL result or a report that names an execution opens it (issue 20:
drill-down where an operator expects it)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from textual.app import App, ComposeResult

from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.sql import SqlScreen
from kestrel_console.tui.widgets.results import ResultsTable
from tests.seed import seed_history

from .helpers import enter_opens_detail, on_screen, screen_lines
from .test_reports import report_by_keys
from .test_sql import run


async def enter_on_row(pilot, table: ResultsTable, row: int) -> DetailScreen:
    table.focus()
    table.move_cursor(row=row, column=0)
    return await enter_opens_detail(pilot)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_enter_on_a_result_row_opens_its_execution(dsn, reader_dsn, db, size):
    facts = seed_history(db)
    async with on_screen(dsn, "4", SqlScreen, size=size, reader_dsn=reader_dsn) as (tui, pilot, sql):
        await run(pilot, sql, "SELECT workflow_name, id FROM workflow_executions ORDER BY id DESC")
        table = sql.query_one(ResultsTable)
        wanted = int(table.result.rows[1][1])
        detail = await enter_on_row(pilot, table, 1)
        assert detail.execution_id == wanted and detail.execution["id"] == wanted
        await pilot.press("escape")
        assert tui.screen is sql

        await run(pilot, sql, "SELECT count(*) FROM workflow_executions")  # no id: enter does nothing
        table.focus()
        await pilot.press("enter")
        assert tui.screen is sql

        report, _ = await report_by_keys(pilot, "stuck-leases")
        detail = await enter_on_row(pilot, report.query_one(ResultsTable), 0)
        assert detail.execution_id == facts.id("stuck")


async def test_a_result_s_columns_are_as_wide_as_their_cells_as_soon_as_it_is_shown():
    """DataTable measures added rows only when it next goes idle: a report's result was seen
    (twice in CI) kept at its headers' widths, its cells cut, for the 10 s a test waited. The
    widths are now given with the columns."""

    class OneTable(App[None]):
        def compose(self) -> ComposeResult:
            yield ResultsTable()

    app = OneTable()
    async with app.run_test(size=(120, 10)) as pilot:
        table = app.query_one(ResultsTable)
        table.show(SimpleNamespace(columns=["step_id", "id"], rows=[["gate:rocket:[u]", 7], ["g", 12345678]]))
        padding = 2 * table.cell_padding
        assert [c.get_render_width(table) - padding for c in table.ordered_columns] == [15, 8]
        await pilot.pause()
        assert "gate:rocket:[u]" in "\n".join(screen_lines(app))
