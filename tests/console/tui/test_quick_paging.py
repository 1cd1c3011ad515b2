"""``]`` pressed quickly (issue 20, defect 8): page keys typed faster than a page loads each
moved from the rows of a page already gone, so the second said "no older executions" on a long
history and was lost. Each press now moves exactly one page, the ones typed while a page loads
once it has."""

from __future__ import annotations

import pytest
from textual import events

from kestrel_console.tui.screens.executions import PAGE_SIZE, ExecutionsScreen
from tests.seed import seed_bulk_finished

from .helpers import on_screen, text_of, wait_for


def type_quickly(pilot, *keys: str) -> None:
    """Send keys as a fast typist does: all of them before the app has handled the first
    (``pilot.press`` waits for the app to go idle after each key)."""
    for key in keys:
        event = events.Key(key, None)
        event.set_sender(pilot.app)
        pilot.app._driver.send_message(event)


async def settled_page(pilot, screen: ExecutionsScreen, page: int, newest_first: list[str]) -> None:
    """Wait until ``page`` shows, whole, with nothing left to load."""
    await wait_for(
        pilot,
        lambda: len(screen.page_starts) == page and not screen.paging and screen.table.row_count,
        what=f"page {page}",
    )
    assert screen.table.keys() == newest_first[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    assert f"page {page} " in text_of(screen.query_one("#exec-where"))


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_page_keys_typed_without_waiting(dsn, db, size):
    bulk = seed_bulk_finished(db, PAGE_SIZE * 3 + 30, analyze=False)
    newest_first = [str(i) for i in range(bulk.last_id, bulk.first_id - 1, -1)]
    async with on_screen(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, screen):
        type_quickly(pilot, *["right_square_bracket"] * 3)
        await settled_page(pilot, screen, 4, newest_first)
        assert not any("no older executions" in m for _, m in tui.notices), tui.notices
        type_quickly(pilot, "left_square_bracket", "right_square_bracket", "left_square_bracket")
        await settled_page(pilot, screen, 3, newest_first)
        type_quickly(pilot, "right_square_bracket", "right_square_bracket")  # page 4 is the last
        await settled_page(pilot, screen, 4, newest_first)
        await wait_for(pilot, lambda: any("no older executions" in m for _, m in tui.notices), what="the last page")
