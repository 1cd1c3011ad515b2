"""The TUI shows control characters from the database as escapes, never raw (issue 9)."""

from __future__ import annotations

from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.screens.schedules import SchedulesScreen
from kestrel_console.tui.screens.sql import SqlScreen
from kestrel_console.tui.widgets.confirm import ConfirmModal
from kestrel_console.tui.widgets.live_table import LiveTable
from kestrel_console.tui.widgets.results import ResultsTable
from kestrel_console.tui.widgets.timeline import Timeline
from tests.hostile_text import has_raw_control, hostile_execution, hostile_paused_things

from .helpers import fresh, on_screen, open_screen, screen_lines, text_of, wait_for
from .test_sql import run


def plain(cell) -> str:
    return cell.plain if hasattr(cell, "plain") else str(cell)


async def test_detail_list_and_sql_show_escaped_text(dsn, reader_dsn, db):
    eid = hostile_execution(db)
    async with on_screen(dsn, "2", ExecutionsScreen, reader_dsn=reader_dsn) as (tui, pilot, listing):
        table = listing.query_one("#executions", LiveTable)
        await wait_for(pilot, lambda: str(eid) in table.keys(), what="the hostile row")
        cell = plain(table.get_cell(str(eid), "workflow"))
        assert cell == "pay\\x1b[2J\\x1b[31mroll"

        screen = DetailScreen(eid)
        await pilot.app.push_screen(screen)
        await fresh(pilot, screen)
        head = text_of(screen.query_one("#detail-head"))
        assert "pay\\x1b[2J\\x1b[31mroll" in head and not has_raw_control(head)
        lines = [line.plain for line in screen.query_one(Timeline).lines(140)]
        assert any(line.startswith("rca\\x1b[1A") for line in lines), lines
        assert not any(has_raw_control(line) for line in lines)
        attempts = screen.query_one("#detail-attempts", LiveTable)
        cells = [plain(attempts.get_cell(k, c)) for k in attempts.keys() for c in ("step", "worker", "error")]
        assert "rca\\x1b[1A" in cells and "ok\\x1b[5m" in [
            plain(attempts.get_cell(k, "error")) for k in attempts.keys()
        ]
        assert not any(has_raw_control(c) for c in cells)
        code = screen.query_one("#detail-input").content.code
        assert not has_raw_control(code) and "\\u202e" in code and "\\u009b" in code
        assert not has_raw_control(text_of(screen.query_one("#detail-error")))
        await pilot.press("q")

        sql = await open_screen(pilot, "4", SqlScreen)
        await run(pilot, sql, 'SELECT workflow_name AS "n\x1b[1m" FROM workflow_executions')
        results = sql.query_one(ResultsTable)
        assert [c.label.plain for c in results.columns.values()] == ["n\\x1b[1m"]
        assert plain(results.get_row_at(0)[0]) == "pay\\x1b[2J\\x1b[31mroll"


async def test_schedules_why_line_confirmations_and_sql_errors_show_escapes(dsn, reader_dsn, db):
    # Outside the tables: the schedules screen's why-line, the pause confirmation (title and
    # question), the dashboard's notes and an SQL error that quotes a value all show escapes.
    hostile_paused_things(db)
    async with on_screen(dsn, "7", SchedulesScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        why = screen.query_one("#sched-why")
        await wait_for(pilot, lambda: "paused by" in text_of(why), what="the why-line")
        assert "nightly\\x1b]0;t\\x07: paused by mallory\\x1b[32m" in text_of(why)
        assert not any(has_raw_control(line) for line in screen_lines(tui))

        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the confirmation")
        modal = tui.screen
        assert "'0 3 * * *\\x1b[1m'" in modal.question and not has_raw_control(modal.question)
        assert not has_raw_control(modal.title_text)
        assert not any(has_raw_control(line) for line in screen_lines(tui))
        await pilot.press("n")
        await wait_for(pilot, lambda: tui.screen is screen, what="the dialog to close")

        await open_screen(pilot, "1", DashboardScreen)
        assert not any(has_raw_control(line) for line in screen_lines(tui))

        sql = await open_screen(pilot, "4", SqlScreen)
        message = await run(pilot, sql, "SELECT workflow_name::int FROM workflow_executions")
        assert message.startswith("error") and "pay\\x1b[2J\\x1b[31mroll" in message, message
        assert not has_raw_control(text_of(sql.query_one("#sql-status")))
        await pilot.press("ctrl+q")


async def test_the_did_you_mean_of_the_executions_filter_shows_escapes(dsn, db):
    hostile_execution(db)
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        where = screen.query_one("#exec-where")
        await pilot.press("slash")
        screen.query_one("#exec-filter").value = "workflow:payrol"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "did you mean" in text_of(where), what="the suggestion")
        assert "did you mean pay\\x1b[2J\\x1b[31mroll?" in text_of(where)
        assert not has_raw_control(text_of(where))
        await pilot.press("ctrl+q")
