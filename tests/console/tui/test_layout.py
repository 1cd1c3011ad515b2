"""Every screen at 80x24 (a supported size) and at 200x50 (issue 11, items 4 and 5): no key
hint cut off in the footer, the title whole, columns that do not fit announced, the dashboard's
panels keeping their essential columns, the timeline's bars wider than its notes, and no
partial-block characters (chart bars or scrollbar ends) left on other screens."""

from __future__ import annotations

import pytest

from kestrel_console.tui.registry import SCREENS
from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.screens.queues import QueuesScreen
from kestrel_console.tui.screens.reports import ReportsScreen
from kestrel_console.tui.screens.schedules import SchedulesScreen
from kestrel_console.tui.screens.sql import SqlScreen
from tests.seed import seed_history

from .helpers import console, fresh, open_screen, screen_lines, settled, text_of, wait_for

BLOCKS = set("▁▂▃▄▅▆▇▉▊▋▌▍▎▏")


def hints(tui) -> list[str]:
    """Every key hint the footer should show now: "key description"."""
    out = []
    for active in tui.screen.active_bindings.values():
        if active.binding.show and active.enabled:
            out.append(f"{tui.get_key_display(active.binding)} {active.binding.description}")
    return out


async def check_screen(pilot, name: str, *, chart: bool = False) -> list[str]:
    tui = pilot.app
    await wait_for(pilot, lambda: "Screens" in screen_lines(tui)[-1], what=f"the footer of {name}")
    lines = screen_lines(tui)
    width = tui.size.width
    footer = lines[-1]
    wanted = hints(tui)
    for hint in [f"{SCREENS[0].key}-{SCREENS[-1].key} Screens", "? Help", "q Back/quit", *wanted]:
        assert hint in footer, (name, tui.size, hint, footer)
    assert "…" not in lines[0], (name, lines[0])  # the title is whole
    for row in lines[:-1]:  # the footer draws "▏" before the palette hint on purpose
        assert not (set(row[width - 2 :]) & BLOCKS), (name, row)  # nothing stray at the right edge
        if not chart:
            assert not (set(row) & BLOCKS), (name, row)
    return lines


async def open_and_check_list(pilot, key: str, kind: type, summary: str, narrow: bool, name: str) -> None:
    """Open list ``key``: its summary says "more columns" exactly when the terminal is narrow,
    and the screen fits (check_screen)."""
    screen = await open_screen(pilot, key, kind)
    await wait_for(
        pilot,
        lambda: ("→ more columns" in text_of(screen.query_one(summary))) == narrow,
        what=f"the more-columns sign of the {name}",
    )
    await check_screen(pilot, name)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_every_screen_fits(dsn, db, size):
    facts = seed_history(db)
    tui = console(dsn)
    narrow = size[0] == 80
    async with tui.run_test(size=size) as pilot:
        dashboard = tui.screen
        assert isinstance(dashboard, DashboardScreen)
        await fresh(pilot, dashboard)
        await settled(pilot)
        lines = await check_screen(pilot, "dashboard", chart=True)
        text = "\n".join(lines)
        for column in ("worker", "held/slots", "state", "id", "owner", "lease expired"):
            assert column in text, column
        assert "worker-dead" in text and "silent" in text
        assert dashboard.max_scroll_y == 0  # the whole dashboard is in sight, nothing scrolls

        await open_and_check_list(pilot, "2", ExecutionsScreen, "#exec-where", narrow, "executions")
        await open_and_check_list(pilot, "3", ApprovalsScreen, "#appr-summary", narrow, "approvals")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen))
        detail = tui.screen
        await fresh(pilot, detail)
        await settled(pilot)
        lines = await check_screen(pilot, "detail")
        lane = next(row for row in lines if "│ execution" in row)
        bars, info = lane.split("│")[2], lane.split("│")[3]
        assert len(bars) > len(info), lane

        await open_screen(pilot, "4", SqlScreen)
        await pilot.press("escape")
        await settled(pilot)
        await check_screen(pilot, "sql")

        reports = await open_screen(pilot, "5", ReportsScreen)
        await wait_for(pilot, lambda: reports.report is not None)
        await settled(pilot)
        await check_screen(pilot, "reports")

        await open_screen(pilot, "6", QueuesScreen)
        await settled(pilot)
        await check_screen(pilot, "queues")
        await open_screen(pilot, "7", SchedulesScreen)
        await settled(pilot)
        await check_screen(pilot, "schedules")
        assert facts  # seeded data was on every screen

        # A terminal resized while the console runs gets the same layout.
        await pilot.press("1")
        await pilot.resize_terminal(*((200, 50) if narrow else (80, 24)))
        await wait_for(
            pilot, lambda: dashboard.has_class("-narrow") != narrow, what="the dashboard to follow the resize"
        )
        await settled(pilot)
        await check_screen(pilot, "dashboard after a resize", chart=True)
