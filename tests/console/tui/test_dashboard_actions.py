"""``e`` and ``c`` work on the dashboard's stuck-leases panel (issue 20): a stuck lease seen on
the dashboard is re-enqueued there, named by its id, without going to the list first."""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.widgets.confirm import ConfirmModal
from tests.seed import seed_history

from .helpers import (
    ACTIONS,
    OPERATOR,
    acting_on,
    actions_settled,
    reason_then_confirmation,
    rows,
    statuses,
    wait_for,
)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_requeue_a_stuck_lease_from_the_dashboard(dsn, db, size):
    facts = seed_history(db)
    stuck = facts.id("stuck")
    async with acting_on(dsn, "1", DashboardScreen, size=size) as (tui, pilot, screen, asked):
        await pilot.press("e")  # the stuck-leases panel does not have the focus: nothing is asked
        assert not isinstance(tui.screen, ConfirmModal)
        await actions_settled(pilot, screen)
        assert asked == []

        screen.stuck.focus()
        await wait_for(pilot, lambda: screen.stuck.cursor_key() == str(stuck), what="the stuck lease")
        await pilot.press("e")
        await reason_then_confirmation(pilot, "worker gone")
        assert f"Re-enqueue execution {stuck} (" in tui.screen.question
        await pilot.press("y")
        await wait_for(pilot, lambda: statuses(db)[stuck] == "enqueued", what="the requeue")
        assert rows(db, ACTIONS) == [(OPERATOR, "requeue", stuck, None, "worker gone", "running")]
