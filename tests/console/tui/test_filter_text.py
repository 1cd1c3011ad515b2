"""The executions filter's free text matches step, gate and sleep ids and the input too (issue
20): ``/`` then ``approve-fix`` or ``api-1`` found nothing, though both are on the detail."""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.executions import ExecutionsScreen
from tests.seed import seed_history

from .helpers import fresh, on_screen


async def filtered(pilot, screen: ExecutionsScreen, text: str) -> set[int]:
    await pilot.press("slash", "ctrl+u", *text, "enter")
    await fresh(pilot, screen)
    return {int(k) for k in screen.table.keys()}


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_free_text_finds_step_ids_gate_ids_and_input(dsn, db, size):
    facts = seed_history(db)
    with_gate = {r[0] for r in db.execute("SELECT execution_id FROM workflow_waits WHERE step_id = 'approve-fix'")}
    with_step = {r[0] for r in db.execute("SELECT DISTINCT execution_id FROM step_attempts WHERE step_id = 'post'")}
    with_pod = {r[0] for r in db.execute("SELECT id FROM workflow_executions WHERE input->>'pod' = 'db-1'")}
    assert with_gate and with_step and with_pod
    async with on_screen(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, screen):
        assert await filtered(pilot, screen, "approve-fix") == with_gate
        assert await filtered(pilot, screen, "post") >= with_step
        assert await filtered(pilot, screen, "db-1") == with_pod
        assert await filtered(pilot, screen, str(facts.id("quick"))) >= {facts.id("quick")}


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_since_keeps_the_executions_created_in_that_span(dsn, db, size):
    seed_history(db)
    recent = {
        r[0] for r in db.execute("SELECT id FROM workflow_executions WHERE created_at > now() - interval '1 hour'")
    }
    older = {
        r[0] for r in db.execute("SELECT id FROM workflow_executions WHERE created_at < now() - interval '70 minutes'")
    }
    assert recent and older
    async with on_screen(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, screen):
        shown = await filtered(pilot, screen, "since:1h")
        assert recent - shown == set() and shown & older == set()
        assert str(screen.filter) == "since:1h"
        assert await filtered(pilot, screen, "since:1h status:bogus") == shown  # refused: the filter is kept
        assert any("unknown status" in m for _, m in tui.notices)
        await pilot.press("escape")
        assert await filtered(pilot, screen, "since:soon") == shown
        assert any("write the span as 90s, 30m, 2h or 7d" in m for _, m in tui.notices)
