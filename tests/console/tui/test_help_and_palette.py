"""`?` lists every key of the current screen; ctrl+p holds screens, reports and actions;
--read-only leaves the actions (and the other writes: bulk, send event) out of both."""

from __future__ import annotations

from textual.binding import Binding
from textual.command import CommandPalette

from kestrel_console.tui.commands import KestrelCommands
from kestrel_console.tui.operator import ACTIONS, WRITES
from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.help import HelpScreen, key_label
from tests.seed import seed_history

from .helpers import SIZE, console, fresh, palette_pick, wait_for

SCREEN_KEYS = {
    "1": "DashboardScreen",
    "2": "ExecutionsScreen",
    "3": "ApprovalsScreen",
    "4": "SqlScreen",
    "5": "ReportsScreen",
}


def declared_keys(node, *, read_only: bool) -> set[str]:
    keys = set()
    for binding in Binding.make_bindings(node.BINDINGS):
        if binding.system or (read_only and (binding.action in ACTIONS or binding.action in WRITES)):
            continue
        keys.add(key_label(binding))  # as the help writes it (esc, /, ^r)
    return keys


async def check_help(pilot, *, read_only: bool) -> None:
    tui = pilot.app
    for key, name in SCREEN_KEYS.items():
        await pilot.press(key)
        if name == "SqlScreen":
            await pilot.press("escape")  # out of the editor, so `?` is not typed into it
        screen = tui.screen
        assert type(screen).__name__ == name
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(tui.screen, HelpScreen))
        shown = set(tui.screen.keys)
        expected = declared_keys(screen, read_only=read_only) | declared_keys(tui, read_only=read_only)
        assert expected <= shown, (name, expected - shown)
        action_keys = {"a", "x", "e", "c", "b", "v"} & declared_keys(screen, read_only=False)
        if read_only:
            assert not (action_keys & shown), name
        else:
            assert action_keys <= shown
        for extra_key, _ in screen.HELP_EXTRA:
            assert extra_key in shown
        await pilot.press("escape")
        assert tui.screen is screen


async def test_help_lists_every_key_of_each_screen(dsn):
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        await check_help(pilot, read_only=False)


async def test_help_in_read_only_mode_leaves_actions_out(dsn):
    tui = console(dsn, read_only=True)
    async with tui.run_test(size=SIZE) as pilot:
        await check_help(pilot, read_only=True)


async def test_command_palette(dsn, db):
    seed_history(db)
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: tui.report_index, what="the report index")
        titles = [t for t, _, _ in KestrelCommands(tui.screen).commands()]
        for screen in ("Dashboard", "Executions", "Approvals", "SQL", "Reports"):
            assert f"Go to {screen}" in titles
        assert "Report: stuck-leases" in titles and "Pause / resume refresh" in titles
        await pilot.press("3")
        await fresh(pilot, tui.screen)
        titles = [t for t, _, _ in KestrelCommands(tui.screen).commands()]
        gate = tui.screen.action_rows()[0]
        named = f"gate {gate['pending_gate']!r} of execution {gate['id']}"
        assert f"Approve {named}" in titles and f"Reject {named}" in titles

        # Through the keys: ctrl+p, type, enter.
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(tui.screen, CommandPalette))
        await palette_pick(pilot, "Go to Executions", typed="go to executions")
        await wait_for(pilot, lambda: type(tui.screen).__name__ == "ExecutionsScreen", what="the palette's command")

        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(tui.screen, CommandPalette))
        await palette_pick(pilot, "Report: queue-depth", typed="report: queue-depth")
        await wait_for(
            pilot,
            lambda: (
                type(tui.screen).__name__ == "ReportsScreen"
                and tui.screen.report is not None
                and tui.screen.report.name == "queue-depth"
            ),
        )


async def test_command_palette_in_read_only_mode_has_no_actions(dsn):
    tui = console(dsn, read_only=True)
    async with tui.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        assert isinstance(tui.screen, ApprovalsScreen)
        titles = [t for t, _, _ in KestrelCommands(tui.screen).commands()]
        assert "Go to Dashboard" in titles
        assert not any(t.startswith(("Approve", "Reject", "Cancel", "Re-enqueue")) for t in titles)
