"""The Audit screen (key 8, issue 47): every operator action newest first, filtered with ``/``
(the audit filter language), an unreadable filter refused in one line with the box left open,
and enter on a row opening the execution acted on."""

from __future__ import annotations

from textual.widgets import Input

from kestrel_console.tui.screens.audit import AuditScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_core import Kestrel

from .helpers import fresh, on_screen, screen_lines, wait_for


async def test_the_audit_screen_filters_and_opens_the_execution(dsn, app: Kestrel):
    first, second = app.enqueue("audited"), app.enqueue("audited")
    app.cancel(first, by="alice", comment="wrong region")
    app.pause(second, by="bob", comment="hold for the freeze")
    async with on_screen(dsn, "8", AuditScreen) as (tui, pilot, screen):
        await wait_for(pilot, lambda: len(screen.rows) == 2, what="both actions")
        assert [(r["action"], r["actor"]) for r in screen.rows] == [("pause", "bob"), ("cancel", "alice")]
        shown = "\n".join(screen_lines(tui))
        assert "2 operator actions, newest first" in shown and "hold for the freeze" in shown

        await pilot.press("slash", *"by:", "enter")  # by: without a name: refused, the box stays
        box = screen.query_one("#audit-filter", Input)
        assert box.display and box.value == "by:"
        await pilot.press("backspace", "backspace", "backspace", *"action:cancel", "enter")
        await wait_for(pilot, lambda: [r["action"] for r in screen.rows] == ["cancel"], what="the filter")
        assert not box.display and "matching action:cancel" in "\n".join(screen_lines(tui))

        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen), what="the execution")
        assert tui.screen.execution_id == first
        await pilot.press("escape")
        await wait_for(pilot, lambda: tui.screen is screen)
        await pilot.press("escape")  # clears the filter
        await fresh(pilot, screen)
        await wait_for(pilot, lambda: len(screen.rows) == 2, what="the filter cleared")
