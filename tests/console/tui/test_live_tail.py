"""The Executions list is a live tail (issue 46, finding 3): it follows the newest rows unless
the operator moved down, then counts the rows that arrived above ("N new") until ``g`` or Home
jumps back; End and G go to the last row; the line above the table never says "page 1" while
the newest rows are out of sight. And a refusal names the row the operator last saw under the
cursor, even when rows leave under it twice in a row (finding 6)."""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.executions import ExecutionsScreen
from tests.seed import seed_bulk_finished, seed_history

from .helpers import acting_on, fresh, on_screen, text_of, wait_for


def where(screen: ExecutionsScreen) -> str:
    return text_of(screen.query_one("#exec-where"))


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_list_follows_the_newest_until_the_operator_moves(dsn, db, app, size):
    seed_bulk_finished(db, 60, analyze=False)
    async with on_screen(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, screen):
        table = screen.table
        assert table.cursor_row == 0 and "page 1" in where(screen)

        # Following: new executions arrive, the cursor stays on the newest, the top in sight.
        first = app.enqueue("billing-sync", {"n": 1})
        await fresh(pilot, screen)
        assert table.cursor_key() == str(first) and not table.top_hidden()

        # Moved down (past a screenful): new rows are counted, not jumped to.
        for _ in range(30):
            await pilot.press("down")
        seen = table.cursor_key()
        newer = [app.enqueue("billing-sync", {"n": i}) for i in range(3)]
        await fresh(pilot, screen)
        assert table.cursor_key() == seen
        assert "3 new above (g: newest)" in where(screen)
        assert "page 1" not in where(screen)

        # g jumps to the newest and follows again; G and End go to the last row, Home back.
        await pilot.press("g")
        await wait_for(pilot, lambda: table.cursor_key() == str(newer[-1]), what="the newest row")
        await wait_for(pilot, lambda: "page 1" in where(screen) and "new above" not in where(screen))
        await pilot.press("G")
        await wait_for(pilot, lambda: table.cursor_row == table.row_count - 1, what="the last row")
        await wait_for(pilot, lambda: "page 1" not in where(screen), what="the header to say the top is hidden")
        await pilot.press("home")
        await wait_for(pilot, lambda: table.cursor_row == 0)
        await pilot.press("end")
        await wait_for(pilot, lambda: table.cursor_row == table.row_count - 1)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_a_refusal_names_the_row_last_seen_under_the_cursor(dsn, db, size):
    seed_history(db)
    async with acting_on(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, screen, actions):
        table = screen.table
        await pilot.press("down", "down")
        first = table.cursor_key()
        db.execute("DELETE FROM workflow_executions WHERE id = %s", (int(first),))
        await fresh(pilot, screen)
        second = table.cursor_key()
        assert second != first
        db.execute("DELETE FROM workflow_executions WHERE id = %s", (int(second),))
        await fresh(pilot, screen)
        third = table.cursor_key()
        await pilot.press("c")
        await wait_for(pilot, lambda: any("nothing done" in m for _, m in tui.notices), what="the refusal")
        said = next(m for _, m in tui.notices if "nothing done" in m)
        assert f"execution {second}, under the cursor, left the list" in said, said
        assert f"the cursor is now on execution {third}" in said
        assert actions == [] and tui.screen is screen
