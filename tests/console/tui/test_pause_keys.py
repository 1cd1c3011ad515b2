"""The console's pause / resume keys (issue 47): `z` pauses the execution under the cursor
after a reason and a confirmation, the list shows it paused, `u` resumes it; each is offered
only where the state allows it."""

from __future__ import annotations

from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.widgets.confirm import ConfirmModal
from tests.seed import seed_history

from .helpers import ACTIONS, footer_text, give_reason, on_screen, rows, statuses, wait_for
from .test_executions import put_cursor


async def test_z_pauses_and_u_resumes_the_execution_under_the_cursor(dsn, db):
    facts = seed_history(db)
    eid = facts.id("enqueued")
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        await put_cursor(pilot, screen, eid)
        await wait_for(pilot, lambda: "z Pause" in footer_text(tui) and "u Resume" not in footer_text(tui))
        await pilot.press("z")
        await give_reason(pilot)
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal))
        assert tui.screen.question.startswith(f"Pause execution {eid} (")
        assert "its sleeps and gates keep their deadlines" in tui.screen.question
        await pilot.press("y")
        await wait_for(pilot, lambda: statuses(db)[eid] == "paused", what="the pause")
        await wait_for(pilot, lambda: "u Resume" in footer_text(tui) and "z Pause" not in footer_text(tui))
        await pilot.press("u")
        await give_reason(pilot)
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: statuses(db)[eid] == "enqueued", what="the resume")
    assert [r[1:3] for r in rows(db, ACTIONS)] == [("pause", eid), ("resume", eid)]
