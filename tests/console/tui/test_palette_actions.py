"""The command palette lists the actions of the selected execution, named, and runs them
(issue 46, finding 8): ctrl+p on an errored execution offers "Re-enqueue execution N" and
"Cancel" is not offered for it; picking it asks for the reason and the confirmation as the key
does."""

from __future__ import annotations

import pytest
from textual.command import CommandList, CommandPalette

from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from tests.seed import seed_history

from .helpers import (
    acting_on,
    actions_settled,
    fresh,
    palette_pick,
    reason_then_confirmation,
    wait_for,
)


async def palette_titles(pilot) -> list[str]:
    tui = pilot.app
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(tui.screen, CommandPalette), what="the palette")
    palette = tui.screen
    commands = palette.query_one(CommandList)
    await wait_for(
        pilot,
        lambda: commands.option_count > 5 and not any(w.node is palette and not w.is_finished for w in tui.workers),
        what="the palette's commands",
    )
    return [str(commands.get_option_at_index(i).prompt).splitlines()[0] for i in range(commands.option_count)]


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_palette_names_and_runs_the_selected_executions_actions(dsn, db, size):
    facts = seed_history(db)
    failed = facts.id("failed_last_hour")
    async with acting_on(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, screen, actions):
        screen.table.move_cursor(row=screen.table.get_row_index(str(failed)))
        await pilot.pause()
        titles = await palette_titles(pilot)
        assert f"Re-enqueue execution {failed}" in titles, titles
        assert not any(t.startswith("Cancel execution") for t in titles)  # an error cannot be cancelled
        await palette_pick(pilot, f"Re-enqueue execution {failed}", typed=f"re-enqueue execution {failed}")
        await reason_then_confirmation(pilot, "from the palette")
        await pilot.press("y")
        await actions_settled(pilot, screen)
        assert actions == [("requeue", [failed], "from the palette")]

        # An execution's own screen: its actions by name too.
        tui.push_screen(DetailScreen(facts.id("stuck")))
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen))
        await fresh(pilot, tui.screen)
        titles = await palette_titles(pilot)
        assert f"Cancel execution {facts.id('stuck')}" in titles, titles
