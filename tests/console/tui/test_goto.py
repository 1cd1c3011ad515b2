"""``:`` then an id opens that execution from the Executions and Approvals lists (issue 46, as
in k9s), even when the id and enter are typed faster than the prompt takes the focus; a word
that is no id is refused in the prompt; esc gives up."""

from __future__ import annotations

import pytest
from textual import events

from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.widgets.goto import GotoModal, parse_id
from tests.seed import seed_history

from .helpers import console, on_screen, open_screen, screen_lines, wait_for


def burst(app, *keys: str) -> None:
    """Queue the keys at once, none waiting for the one before to be handled."""
    for key in keys:
        char = {"colon": ":", "enter": "\r", "escape": "\x1b", "backspace": "\x7f"}.get(
            key, key if len(key) == 1 else None
        )
        app.post_message(events.Key(key, char))


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
@pytest.mark.parametrize(("key", "kind"), [("2", ExecutionsScreen), ("3", ApprovalsScreen)])
async def test_colon_and_an_id_typed_at_full_speed_open_it(dsn, db, size, key, kind):
    facts = seed_history(db)
    wanted = facts.id("failed_old")
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        await open_screen(pilot, key, kind)
        burst(tui, "colon", *str(wanted), "enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen), what="the execution's detail")
        assert tui.screen.execution_id == wanted
        await wait_for(pilot, lambda: any(f"execution {wanted}" in line for line in screen_lines(tui)), what="its head")


async def test_a_word_that_is_no_id_is_refused_and_esc_gives_up(dsn, db):
    seed_history(db)
    async with on_screen(dsn, "2", ExecutionsScreen, size=(80, 24)) as (tui, pilot, screen):
        await pilot.press("colon")
        assert isinstance(tui.screen, GotoModal)
        await pilot.press(*"ord-9", "enter")
        assert isinstance(tui.screen, GotoModal)
        assert any("not an execution id: 'ord-9'" in line for line in screen_lines(tui))
        await pilot.press("escape")
        assert tui.screen is screen


def test_ids_as_lists_and_links_show_them():
    assert parse_id("1234") == parse_id("#1234") == parse_id(" 1,234 ") == 1234
    assert parse_id("0") is None and parse_id("x1") is None and parse_id("") is None and parse_id(str(2**63)) is None
