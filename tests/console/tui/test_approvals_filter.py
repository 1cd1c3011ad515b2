"""Approvals has a filter (issue 20): ``/`` then ``risk:high`` keeps the gates whose details
carry that risk; ``workflow:`` and ``gate:`` and free text too; typed text is never taken as
``a`` or ``x``; esc closes the line, then clears the filter."""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal

from .helpers import acting_on, actions_settled, fresh, pending_gates, text_of

GATES = [
    ("remediate", "approve-fix", {"risk": "high", "severity": "sev1", "patch": "failover db-1"}),
    ("remediate", "approve-fix", {"risk": "low", "severity": "sev3", "patch": "restart api-2"}),
    ("rollout", "approve-deploy", {"risk": "high", "severity": "sev2", "service": "payments"}),
]


async def filtered(pilot, screen: ApprovalsScreen, text: str) -> list[int]:
    await pilot.press("slash", "ctrl+u", *text, "enter")
    await fresh(pilot, screen)
    return [int(k.split(":")[0]) for k in screen.table.keys()]


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_approvals_filter_by_details_workflow_gate_and_text(dsn, db, size):
    first, second, third = pending_gates(db, GATES)
    async with acting_on(dsn, "3", ApprovalsScreen, size=size) as (tui, pilot, screen, asked):
        assert await filtered(pilot, screen, "risk:high") == [first, third]
        assert "matching risk:high (of 3" in text_of(screen.query_one("#appr-summary"))
        assert await filtered(pilot, screen, "risk:high workflow:remediate") == [first]
        assert await filtered(pilot, screen, "gate:deploy") == [third]
        assert await filtered(pilot, screen, "api-2") == [second]
        assert await filtered(pilot, screen, "sev axa") == []  # a and x typed: text, no action
        assert not isinstance(tui.screen, (CommentModal, ConfirmModal))
        await pilot.press("escape")  # nothing marked: clears the filter
        await fresh(pilot, screen)
        assert len(screen.table.keys()) == 3
        await actions_settled(pilot, screen)
        assert asked == []
