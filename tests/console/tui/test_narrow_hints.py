"""At 80x24 the executions filter's "did you mean" is read whole (issue 20): the line above the
table was one row high and cut the suggestion off."""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.executions import ExecutionsScreen

from .helpers import on_screen, screen_lines, text_of, wait_for

NAME = "nightly-billing-reconciliation-export"


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_did_you_mean_is_shown_whole(dsn, db, size):
    db.execute("INSERT INTO workflow_executions (workflow_name) VALUES (%s)", (NAME,))
    async with on_screen(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, screen):
        await pilot.press("slash", *"workflow:nightly-biling", "enter")
        where = screen.query_one("#exec-where")
        await wait_for(pilot, lambda: "did you mean" in text_of(where), what="the suggestion")
        shown = " ".join(line.strip() for line in screen_lines(tui))
        assert f"did you mean {NAME}?" in shown, shown
