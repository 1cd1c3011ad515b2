"""Queues screen (key 6): every queue with depth, running against its limit, rate window and
pause state; `p` asks for a confirmation, then pauses or resumes through kestrel_core,
audited under the operator's name."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kestrel_console.tui.screens.queues import QueuesScreen
from kestrel_console.tui.widgets.confirm import ConfirmModal
from kestrel_core import Kestrel
from kestrel_core.dispatch.queues import declare

from .helpers import (
    MORE_COLUMNS,
    OPERATOR,
    SIZE,
    actions_settled,
    answer_h,
    console,
    fresh,
    on_screen,
    open_screen,
    record_pauses,
    rows,
    screen_lines,
    summary_at,
    text_of,
    wait_for,
)

PAUSED = "SELECT name, paused, paused_by FROM queues ORDER BY name"
AUDIT = "SELECT actor, action, details->>'queue' FROM operator_actions ORDER BY id"


def seed_queues(dsn: str) -> None:
    with Kestrel(dsn) as app:
        app.queue("emails", concurrency=3, rate=(10, timedelta(seconds=30)), priority=2)
        app.queue("bulk", per_worker=2)
        app.workflow("send", queue="emails")(lambda ctx, _: None)
        with app.connection() as conn:
            declare(conn, app.schema, list(app.queues.values()), {"emails": ["send"]})
        app.enqueue_many("send", [1, 2, 3, 4])


async def test_queues_screen_shows_limits_and_pauses_with_confirmation(dsn, db):
    seed_queues(dsn)
    async with on_screen(dsn, "6", QueuesScreen) as (tui, pilot, screen):
        assert screen.table.keys() == ["emails", "bulk"]  # higher priority first
        assert screen.table.shown("emails", "enqueued") == "4"
        assert screen.table.shown("emails", "running") == "0/3"
        assert screen.table.shown("emails", "rate") == "0/10 per 30 s"
        assert screen.table.shown("emails", "state") == "active"
        assert screen.table.shown("bulk", "per_worker") == "2"
        assert text_of(screen.query_one("#queues-summary")).startswith("2 queues")

        # `n`: nothing changes, once the dialog is gone and any action the console started is done.
        asked = record_pauses(tui)
        question = await answer_h(pilot, "n")
        assert question.startswith("Pause queue 'emails'?") and f"Recorded as {OPERATOR!r}" in question
        await actions_settled(pilot, screen)
        assert asked == []
        assert rows(db, PAUSED) == [("bulk", False, None), ("emails", False, None)]

        await answer_h(pilot, "y")
        await wait_for(pilot, lambda: rows(db, PAUSED)[1] == ("emails", True, OPERATOR), what="the pause")
        await fresh(pilot, screen)
        assert screen.table.shown("emails", "state") == f"paused by {OPERATOR}"
        assert "1 paused" in text_of(screen.query_one("#queues-summary"))

        question = await answer_h(pilot, "y")
        assert question.startswith("Resume queue 'emails'?")
        await wait_for(pilot, lambda: rows(db, PAUSED)[1] == ("emails", False, None), what="the resume")
        assert rows(db, AUDIT) == [(OPERATOR, "pause_queue", "emails"), (OPERATOR, "resume_queue", "emails")]


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_hidden_columns_are_announced(dsn, db, size):
    # At 80 columns the last ones (workers, workflows) are cut: the summary says so, like the
    # executions list does, and stops saying it once the table is scrolled to its right end.
    seed_queues(dsn)
    async with summary_at(dsn, "6", QueuesScreen, "#queues-summary", size) as at:
        assert text_of(at.summary).startswith("2 queues") and ("workflows" in at.shown) != at.narrow
        if at.narrow:
            at.screen.table.scroll_x = at.screen.table.max_scroll_x
            await wait_for(
                at.pilot,
                lambda: MORE_COLUMNS not in text_of(at.summary),
                what="the sign to go once the last column is in sight",
            )
            assert "workflows" in "\n".join(screen_lines(at.tui))
            await fresh(at.pilot, at.screen)  # a refresh keeps the sign in step with the scroll
            assert MORE_COLUMNS not in text_of(at.summary)


async def test_read_only_refuses_pausing(dsn, db):
    seed_queues(dsn)
    tui = console(dsn, read_only=True)
    async with tui.run_test(size=SIZE) as pilot:
        await open_screen(pilot, "6", QueuesScreen)
        asked = record_pauses(tui)
        await pilot.press("h")
        await wait_for(
            pilot, lambda: any("read-only" in message for _, message in tui.notices), what="the read-only notice"
        )
        await actions_settled(pilot, tui.screen)
        assert not isinstance(tui.screen, ConfirmModal) and asked == []
        assert rows(db, PAUSED) == [("bulk", False, None), ("emails", False, None)]


async def test_dashboard_names_executions_no_live_worker_can_run(dsn, db):
    from kestrel_console.tui.screens.dashboard import DashboardScreen

    db.execute("INSERT INTO workers (worker_id, workflows, versions, concurrency) VALUES ('w2', '{export}', '{2}', 4)")
    db.execute("INSERT INTO workflow_executions (workflow_name, version) VALUES ('export', '1'), ('export', '1')")
    async with on_screen(dsn, "1", DashboardScreen) as (tui, pilot, screen):
        assert text_of(screen.query_one("#dash-unserved")) == (
            "⚠ 2 enqueued 'export' cannot run: needs version 1, live workers have 2"
        )
