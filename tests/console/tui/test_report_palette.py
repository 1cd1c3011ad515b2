"""Reports (issue 11, item 7): a report chosen from the palette runs (no old rows under a new
heading); every declared parameter has a field; timestamps read like the rest of the console."""

from __future__ import annotations

import re

from textual.command import CommandPalette

from kestrel_console.tui.screens.reports import ReportsScreen
from kestrel_console.tui.widgets.results import ResultsTable
from tests.seed import seed_history

from .helpers import console, form_labels, palette_pick, screen_lines, wait_for

RAW_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\+00:00")


async def test_palette_runs_the_report_with_every_parameter_shown(dsn, db):
    seed_history(db)
    tui = console(dsn)
    async with tui.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        screen = tui.screen
        assert isinstance(screen, ReportsScreen)
        await wait_for(pilot, lambda: screen.reports, what="the report list")
        first = screen.report.name
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: screen.message.startswith(f"{first}:"), what="the first report")

        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(tui.screen, CommandPalette))
        await palette_pick(pilot, "Report: errors-this-month", typed="errors-this-month")
        # Waits for any answer (a result, a refusal, "still running"), then says which it was.
        await wait_for(
            pilot,
            lambda: screen.message.startswith(("errors-this-month:", "error", "refused", "a report is")),
            timeout=30,
            what="errors-this-month to run",
        )
        assert screen.message.startswith("errors-this-month:"), screen.message
        table = screen.query_one(ResultsTable)
        assert table.result is screen.result and "failed_step" in table.result.columns

        # Both declared parameters have a field, and both are on screen at 80x24.
        assert list(screen.param_inputs) == ["since", "workflow"]
        assert form_labels(screen) == ["since", "workflow"]
        shown = "\n".join(screen_lines(tui))
        assert "since" in shown and "workflow (text" in shown

        # Timestamps as the rest of the console shows them, not Python's repr.
        assert not RAW_TIMESTAMP.search(shown)
        column = table.result.columns.index("finished_at")
        first_row = table.get_row_at(0)
        assert not RAW_TIMESTAMP.search(str(first_row[column]))
