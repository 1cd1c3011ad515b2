"""``esc`` and ``q`` go back one level first; ``q`` asks before a quit that would stop more than
the console (issue 46, finding 7): the demo's workers and server, an operator action still
running."""

from __future__ import annotations

import threading

import pytest

from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.widgets.confirm import ConfirmModal
from kestrel_console.tui.widgets.count_line import CountLine
from tests.seed import seed_history

from .helpers import console, focus, fresh, wait_for


async def from_the_error_count(pilot) -> ExecutionsScreen:
    tui = pilot.app
    dashboard = tui.screen
    assert isinstance(dashboard, DashboardScreen)
    await fresh(pilot, dashboard)
    await focus(pilot, dashboard.query_one("#count-error", CountLine))
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(tui.screen, ExecutionsScreen), what="the Executions list")
    screen = tui.screen
    await fresh(pilot, screen)
    assert screen.filter.status == "error"
    return screen


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
@pytest.mark.parametrize("key", ["escape", "q"])
async def test_a_list_opened_from_a_count_goes_back_to_the_dashboard(dsn, db, size, key):
    seed_history(db)
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        dashboard = tui.screen
        screen = await from_the_error_count(pilot)
        # One level at a time: the execution opened from the list, then the list, then the dashboard.
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen), what="the execution")
        await pilot.press(key)
        await wait_for(pilot, lambda: tui.screen is screen, what="back to the list")
        assert screen.filter.status == "error", "the way back must not clear the filter first"
        await pilot.press(key)
        await wait_for(pilot, lambda: tui.screen is dashboard, what="back to the dashboard")
        assert tui.is_running and tui.current_mode == "dashboard"

        # Reached with its number key, the list is a top screen: esc clears its filter, q quits.
        await pilot.press("2")
        await wait_for(pilot, lambda: tui.screen is screen)
        if key == "escape":
            await pilot.press("escape")
            await wait_for(pilot, lambda: screen.filter.empty, what="the filter cleared")
            assert tui.screen is screen
        else:
            await pilot.press("q")
            await wait_for(pilot, lambda: not tui.is_running, what="the console to quit")


async def test_q_asks_before_stopping_the_demo(dsn):
    tui = console(dsn, quit_stops="the demo's workers and its PostgreSQL server")
    async with tui.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the question")
        assert "stops the demo's workers" in tui.screen.question
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(tui.screen, DashboardScreen))
        assert tui.is_running
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the question")
        await pilot.press("q")  # q on the question is "back": no
        await wait_for(pilot, lambda: isinstance(tui.screen, DashboardScreen))
        assert tui.is_running
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: not tui.is_running, what="the console to quit")


async def test_q_asks_while_an_action_runs(dsn):
    tui = console(dsn)
    release = threading.Event()
    async with tui.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        worker = tui.run_worker(lambda: release.wait(30), group="actions", thread=True)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the question")
        assert "1 operator action still running" in tui.screen.question
        await pilot.press("n")
        release.set()
        await tui.workers.wait_for_complete([worker])
        await wait_for(pilot, lambda: isinstance(tui.screen, DashboardScreen))
        await pilot.press("q")  # nothing running now, no demo: quits at once
        await wait_for(pilot, lambda: not tui.is_running, what="the console to quit")
