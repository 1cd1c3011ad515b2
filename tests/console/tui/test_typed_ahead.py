"""Keys typed in one burst go where the operator is typing (issue 46, finding 1).

A terminal hands the console a burst of keys at once: they are all in the app's queue before
the first one has opened anything. Here every burst is posted in one go, as the terminal driver
does, onto a deliberately slow event loop: every screen and widget handles each key and widget message
20 ms late, and every callback of the app (a focus move among them) runs 60 ms late. Then the whole text must be
in the input that the first key opened, and no action or global key may have fired."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from textual import events
from textual.command import CommandPalette
from textual.message_pump import MessagePump
from textual.widgets import DataTable, Input

from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.screens.reports import ReportsScreen
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal
from kestrel_console.tui.widgets.count_line import CountLine
from tests.seed import seed_history

from .helpers import acting_on, console, focus, fresh, open_screen, record_actions, wait_for

HANDLER_DELAY_S = 0.02
CALLBACK_DELAY_S = 0.06
SIZES = [(80, 24), (200, 50)]
# What is handled late: keys, callbacks, and the messages widgets send (a row chosen, a filter
# entered); not the layout's and timers' own events, which would only make every test slow.
SLOWED = (events.Key, Input.Submitted, DataTable.RowSelected, DataTable.RowHighlighted)


@pytest.fixture
def slow_loop(monkeypatch):
    """Every key and widget message a widget or screen handles waits first; every callback
    the app is asked to run later (``call_later``: how Textual moves the focus) runs later
    still. The app's own queue is not slowed: keys reach it as fast as typed."""
    dispatch = MessagePump._dispatch_message
    call_later = MessagePump.call_later

    async def slow_dispatch(self: MessagePump, message: Any) -> Any:
        from textual.app import App

        if not isinstance(self, App) and isinstance(message, SLOWED):
            await asyncio.sleep(HANDLER_DELAY_S)
        return await dispatch(self, message)

    def late(self: MessagePump, callback: Any, *args: Any, **kwargs: Any) -> bool:
        from textual.app import App

        if not isinstance(self, App):
            return call_later(self, callback, *args, **kwargs)

        async def later() -> None:
            await asyncio.sleep(CALLBACK_DELAY_S)
            call_later(self, callback, *args, **kwargs)

        asyncio.get_running_loop().create_task(later())
        return True

    monkeypatch.setattr(MessagePump, "_dispatch_message", slow_dispatch)
    monkeypatch.setattr(MessagePump, "call_later", late)


def burst(app: Any, keys: str | list[str]) -> None:
    """Post every key at once, as the terminal driver does with a burst it read."""
    for key in keys:
        name = {"/": "slash", " ": "space", ":": "colon", "-": "minus", "?": "question_mark"}.get(key, key)
        app.post_message(events.Key(name, key if len(key) == 1 else None))


def nothing_fired(tui: Any, refresh: float, notices: int, actions: list[Any]) -> None:
    assert not tui.paused, "p reached the app: refresh paused"
    assert tui.refresh_interval == refresh, "+/- reached the app"
    assert actions == []
    said = [m for _, m in tui.notices[notices:]]
    assert not any("refused" in m or "not offered" in m or "cannot" in m for m in said), said


async def typed(pilot: Any, box: Input, text: str) -> None:
    await wait_for(pilot, lambda: box.value == text, what=f"{text!r} in the input (it has {box.value!r})")


@pytest.mark.parametrize("size", SIZES)
async def test_a_filter_typed_at_once_lands_in_the_filter(dsn, db, slow_loop, size):
    seed_history(db)
    async with acting_on(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, screen, actions):
        notices, refresh = len(tui.notices), tui.refresh_interval
        # e, c: re-enqueue, cancel; p pauses, + and - change the refresh, 3 and q leave.
        burst(tui, "/ec p+-3q?ci-pipeline")
        box = screen.query_one("#exec-filter", Input)
        await typed(pilot, box, "ec p+-3q?ci-pipeline")
        assert tui.screen is screen and box.has_focus
        nothing_fired(tui, refresh, notices, actions)
        burst(tui, ["ctrl+u", *"workflow:remediate", "enter"])
        await wait_for(pilot, lambda: str(screen.filter) == "workflow:remediate", what="the filter applied")
        assert not box.display and tui.screen is screen
        nothing_fired(tui, refresh, notices, actions)

        await open_screen(pilot, "3", ApprovalsScreen)
        approvals = tui.screen
        burst(tui, "/xa2")
        box = approvals.query_one("#appr-filter", Input)
        await typed(pilot, box, "xa2")
        assert tui.screen is approvals
        nothing_fired(tui, refresh, notices, actions)


@pytest.mark.parametrize("size", SIZES)
async def test_a_comment_typed_at_once_lands_in_the_prompt(dsn, db, slow_loop, size):
    """``x`` opens the comment prompt; what follows it in the same burst is the comment, even
    the keys that reach the console before the prompt exists (they crashed it: NoMatches)."""
    seed_history(db)
    async with acting_on(dsn, "3", ApprovalsScreen, size=size) as (tui, pilot, screen, actions):
        notices, refresh = len(tui.notices), tui.refresh_interval
        burst(tui, "x2q risky, p+ rollback")
        await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal), what="the comment prompt")
        prompt = tui.screen
        box = prompt.query_one(Input)
        await typed(pilot, box, "2q risky, p+ rollback")
        assert tui.screen is prompt and tui.current_mode == "approvals"
        nothing_fired(tui, refresh, notices, actions)
        # The confirmation that follows gets neither the keys typed before it opens nor q/2.
        burst(tui, ["enter", *"q2p"])
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the confirmation")
        await pilot.pause(0.3)
        assert isinstance(tui.screen, ConfirmModal) and tui.current_mode == "approvals"
        nothing_fired(tui, refresh, notices, actions)
        burst(tui, "n")
        await wait_for(pilot, lambda: tui.screen is screen, what="back to the list")
        assert actions == []


async def test_a_key_burst_after_opening_a_screen_waits_for_it(dsn, db, slow_loop):
    """``2`` then ``/zq0kxec`` at once (the crash of issue 46): the keys wait for the screen."""
    seed_history(db)
    tui = console(dsn)
    actions = record_actions(tui)
    async with tui.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        notices, refresh = len(tui.notices), tui.refresh_interval
        burst(tui, "2/zq0kxec")
        await wait_for(pilot, lambda: isinstance(tui.screen, ExecutionsScreen), what="Executions")
        box = tui.screen.query_one("#exec-filter", Input)
        await typed(pilot, box, "zq0kxec")
        nothing_fired(tui, refresh, notices, actions)


async def test_report_parameters_and_the_palette_take_a_burst(dsn, db, slow_loop):
    seed_history(db)
    async with acting_on(dsn, "5", ReportsScreen, size=(200, 50)) as (tui, pilot, screen, actions):
        notices, refresh = len(tui.notices), tui.refresh_interval
        if not screen.query("#rep-form Input"):  # the first report takes no parameters: the next does
            await pilot.press("down")
        await wait_for(pilot, lambda: screen.query("#rep-form Input"), what="a report's parameter form")
        first = screen.query("#rep-form Input").first(Input)
        screen.set_focus(first)
        await pilot.pause()
        burst(tui, ["ctrl+u", *"3 days q2p"])
        await typed(pilot, first, "3 days q2p")
        assert tui.screen is screen
        nothing_fired(tui, refresh, notices, actions)

        burst(tui, ["ctrl+p", *"go to q2p"])
        await wait_for(pilot, lambda: isinstance(tui.screen, CommandPalette), what="the palette")
        palette_input = tui.screen.query_one(Input)
        await typed(pilot, palette_input, "go to q2p")
        assert tui.current_mode == "reports"
        nothing_fired(tui, refresh, notices, actions)


async def test_keys_after_a_dashboard_count_go_to_the_list_it_opens(dsn, db, slow_loop):
    """enter on a count opens Executions; ``/abc`` typed with it is that list's filter text,
    not keys for the dashboard (whose handler asks the app to switch screens, later)."""
    seed_history(db)
    tui = console(dsn)
    actions = record_actions(tui)
    async with tui.run_test(size=(80, 24)) as pilot:
        dashboard = await fresh(pilot)
        await focus(pilot, dashboard.query_one("#count-error", CountLine))
        notices, refresh = len(tui.notices), tui.refresh_interval
        burst(tui, ["enter", *"/ec+p"])
        await wait_for(pilot, lambda: isinstance(tui.screen, ExecutionsScreen), what="Executions")
        box = tui.screen.query_one("#exec-filter", Input)
        await typed(pilot, box, "ec+p")
        assert tui.screen.filter.status == "error"
        nothing_fired(tui, refresh, notices, actions)
