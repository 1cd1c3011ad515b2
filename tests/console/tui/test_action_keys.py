"""Keys are offered only where the row's state allows them (issue 11, item 10), and the
comment prompt names the gate (item 11)."""

from __future__ import annotations

from kestrel_console.tui.commands import KestrelCommands
from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal
from tests.seed import seed_history

from .helpers import (
    ACTIONS,
    SIZE,
    actions_settled,
    console,
    footer_text,
    fresh,
    on_screen,
    open_screen,
    record_actions,
    rows,
    statuses,
    wait_for,
)

HINTS = {"requeue": "e Re-enqueue", "cancel": "c Cancel", "approve": "a Approve", "reject": "x Reject"}


def offered(tui) -> set[str]:
    """The operator actions the rendered footer shows."""
    footer = footer_text(tui)
    return {action for action, hint in HINTS.items() if hint in footer}


async def test_the_list_offers_only_what_the_row_allows(dsn, db):
    facts = seed_history(db)
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        expected = {
            "quick": set(),
            "failed_recent": {"requeue"},
            "running": {"cancel"},
            "stuck": {"requeue", "cancel"},
            "enqueued": {"cancel"},
        }
        for label, actions in expected.items():
            screen.table.move_cursor(row=screen.table.get_row_index(str(facts.id(label))))
            await wait_for(pilot, lambda: offered(tui) == actions, what=f"the footer of {label}")

        # The palette offers the same as the footer.
        screen.table.move_cursor(row=screen.table.get_row_index(str(facts.id("quick"))))
        await pilot.pause()
        titles = [t for t, _, _ in KestrelCommands(screen).commands()]
        assert not any(t.startswith(("Cancel", "Re-enqueue")) for t in titles)

        # c on a finished execution: said at once, no confirmation, nothing written.
        done = facts.id("quick")
        screen.table.move_cursor(row=screen.table.get_row_index(str(done)))
        await pilot.pause()
        await pilot.press("c")
        await wait_for(
            pilot, lambda: any(f"execution {done} is success" in m for _, m in tui.notices), what="the refusal"
        )
        assert tui.screen is screen
        assert statuses(db)[done] == "success" and rows(db, ACTIONS) == []


async def test_an_errored_runs_detail_offers_requeue_only(dsn, db):
    facts = seed_history(db)
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen = DetailScreen(facts.id("failed_recent"))
        await tui.push_screen(screen)
        await fresh(pilot, screen)
        await wait_for(pilot, lambda: offered(tui) == {"requeue"}, what="the footer")
        asked = record_actions(tui)
        for key in "axc":
            await pilot.press(key)
            assert not isinstance(tui.screen, (ConfirmModal, CommentModal))
        await actions_settled(pilot, screen)
        assert asked == [] and rows(db, ACTIONS) == []

        waiting = DetailScreen(facts.id("pending_approval"))
        await tui.push_screen(waiting)
        await fresh(pilot, waiting)
        await wait_for(pilot, lambda: offered(tui) == {"approve", "reject", "cancel"}, what="the footer")


async def test_the_comment_prompt_names_the_gate(dsn, db):
    facts = seed_history(db)
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        await open_screen(pilot, "3", ApprovalsScreen)
        first = facts.pending_approvals()[0]
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal))
        assert tui.screen.prompt == (
            f"Comment for the decision on gate {first.step_id!r} of execution {first.execution_id} (optional):"
        )
        await pilot.press("escape")
        assert not isinstance(tui.screen, (CommentModal, ConfirmModal))
