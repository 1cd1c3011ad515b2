"""The help overlay at 80x24 (issue 20, defect 8): a screen's keys ran past the bottom of the
terminal with nothing saying so. Now every number key shares one row, and while keys are below
the frame says "more below" until the operator scrolls to the end, where the last key shows.
At 200x50 the whole help is in sight."""

from __future__ import annotations

import pytest

from kestrel_console.tui.registry import SCREENS
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.help import CLOSES, MORE_BELOW, HelpScreen
from kestrel_console.tui.screens.sql import SqlScreen
from tests.seed import seed_history

from .helpers import console, fresh, screen_lines, wait_for


async def check_help(pilot, where: str) -> None:
    tui = pilot.app
    await pilot.press("question_mark")
    await wait_for(pilot, lambda: isinstance(tui.screen, HelpScreen), what=f"the help of {where}")
    help_screen = tui.screen
    body = help_screen.query_one("#help-body")
    await pilot.pause()
    shown = "\n".join(screen_lines(tui))
    if tui.size.height >= 50:
        assert body.max_scroll_y == 0, where
    if body.max_scroll_y:
        assert MORE_BELOW in shown and "ctrl+q" not in shown, (where, shown)
        await pilot.press("end")
        await wait_for(pilot, lambda: body.scroll_y == body.max_scroll_y, what="the end of the help")
        await pilot.pause()
        shown = "\n".join(screen_lines(tui))
    assert MORE_BELOW not in shown and CLOSES in shown, (where, shown)
    assert "ctrl+q" in shown and "quit at once" in shown, (where, shown)
    await pilot.press("escape")
    await wait_for(pilot, lambda: not isinstance(tui.screen, HelpScreen), what="the help to close")


@pytest.mark.drawn_frames  # every screen drawn frame by frame, as in a terminal
@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_help_of_every_screen_can_be_read_to_its_last_key(dsn, db, size):
    facts = seed_history(db)
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        for entry in SCREENS:
            await pilot.press(entry.key)
            await wait_for(pilot, lambda entry=entry: isinstance(tui.screen, entry.screen), what=entry.label)
            if isinstance(tui.screen, SqlScreen):
                await pilot.press("escape")  # out of the editor, so ? is not typed into it
            await check_help(pilot, entry.label)
        detail = DetailScreen(facts.id("failed_recent"))
        await tui.push_screen(detail)
        await fresh(pilot, detail)
        await check_help(pilot, "Execution")
