"""Screen 7, Schedules: next tick, last run and its status, paused or not; `p` pauses or
resumes the schedule under the cursor after a confirmation, audited under the operator."""

from __future__ import annotations

import re

import pytest

from kestrel_console.tui.screens.schedules import SchedulesScreen
from kestrel_console.tui.widgets.confirm import ConfirmModal

from .helpers import (
    OPERATOR,
    SIZE,
    actions_settled,
    answer_h,
    confirmation,
    console,
    fresh,
    give_reason,
    on_screen,
    open_screen,
    record_pauses,
    rows,
    summary_at,
    text_of,
    wait_for,
)

PAUSED = "SELECT name, paused, paused_by FROM schedules ORDER BY name"
AUDIT = "SELECT actor, action, details->>'schedule' FROM operator_actions WHERE action LIKE '%%_schedule' ORDER BY id"


def seed(db) -> int:
    eid = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, input) VALUES ('report', 'success', '{}') RETURNING id"
    ).fetchone()[0]
    db.execute(
        "INSERT INTO schedules (name, cron, timezone, workflow_name, next_tick, last_tick,"
        " last_execution_id, source) VALUES ('hourly', '0 * * * *', 'Europe/Paris', 'report',"
        " now() + interval '10 minutes', now() - interval '50 minutes', %s, 'code')",
        (eid,),
    )
    db.execute(
        "INSERT INTO schedules (name, cron, workflow_name, next_tick, paused, paused_by, source)"
        " VALUES ('nightly', '0 2 * * *', 'digest', now() + interval '1 hour', true, 'alice', 'cli')"
    )
    return eid


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_hidden_columns_are_announced(dsn, db, size):
    # At 80 columns the last ones (status, state) are cut: the summary says so, as the
    # executions list and the queues do.
    seed(db)
    async with summary_at(dsn, "7", SchedulesScreen, "#sched-summary", size) as at:
        assert text_of(at.summary).startswith("2 schedules · 1 paused") and ("paused by alice" in at.shown) != at.narrow


async def test_schedules_screen_shows_and_p_pauses_then_resumes(dsn, db):
    eid = seed(db)
    async with on_screen(dsn, "7", SchedulesScreen) as (tui, pilot, screen):
        table = screen.table
        assert table.keys() == ["hourly", "nightly"]
        assert table.shown("hourly", "timezone") == "Europe/Paris"
        assert table.shown("hourly", "last").endswith(f"#{eid}")
        assert table.shown("hourly", "status") == "success"
        assert re.search(r"\(in (?:[5-9]m\d\ds|10m00s)\)$", table.shown("hourly", "next"))  # due in 10 minutes
        assert table.shown("nightly", "state") == "paused by alice"
        assert table.shown("nightly", "last") == "never"
        assert text_of(screen.query_one("#sched-summary")) == "2 schedules · 1 paused"

        # `n`: nothing changes, once the dialog is gone and any action the console started is done.
        asked = record_pauses(tui)
        question = await answer_h(pilot, "n")
        assert question.startswith("Pause schedule 'hourly' (report, '0 * * * *' Europe/Paris)?")
        assert f"Recorded as {OPERATOR!r}" in question
        await actions_settled(pilot, screen)
        assert asked == []
        assert rows(db, PAUSED) == [("hourly", False, None), ("nightly", True, "alice")]

        await answer_h(pilot, "y")
        await wait_for(pilot, lambda: rows(db, PAUSED)[0] == ("hourly", True, OPERATOR), what="the pause")
        await wait_for(pilot, lambda: table.shown("hourly", "state") == f"paused by {OPERATOR}")
        assert f"hourly: paused by {OPERATOR}" in text_of(screen.query_one("#sched-why"))

        question = await answer_h(pilot, "y")
        assert question.startswith("Resume schedule 'hourly'") and "ticks missed" in question
        await wait_for(pilot, lambda: rows(db, PAUSED)[0] == ("hourly", False, None), what="the resume")
        assert db.execute("SELECT next_tick > now() FROM schedules WHERE name = 'hourly'").fetchone() == (True,)
        assert rows(db, AUDIT) == [(OPERATOR, "pause_schedule", "hourly"), (OPERATOR, "resume_schedule", "hourly")]
        await fresh(pilot, screen)
        assert table.shown("hourly", "state") == "stalled"  # resumed, but no worker is running
        assert "no live worker" in text_of(screen.query_one("#sched-why"))


async def test_read_only_refuses_p(dsn, db):
    seed(db)
    tui = console(dsn, read_only=True)
    async with tui.run_test(size=SIZE) as pilot:
        await open_screen(pilot, "7", SchedulesScreen)
        await pilot.press("h")
        await wait_for(pilot, lambda: any("read-only" in m for _, m in tui.notices), what="the refusal")
        assert not isinstance(tui.screen, ConfirmModal)
        assert rows(db, PAUSED) == [("hourly", False, None), ("nightly", True, "alice")]
        assert rows(db, AUDIT) == []


async def test_t_runs_the_schedule_under_the_cursor_once_now(dsn, db):
    seed(db)
    async with on_screen(dsn, "7", SchedulesScreen) as (tui, pilot, screen):
        screen.table.move_cursor(row=screen.table.get_row_index("nightly"))
        await pilot.pause()
        await pilot.press("t")
        await give_reason(pilot, "backfill")
        question = await confirmation(pilot)
        assert question.startswith("Run schedule 'nightly' once now?\nWorkflow 'digest' is enqueued")
        assert "It stays paused" in question and "Comment: 'backfill'" in question
        await pilot.press("y")
        await actions_settled(pilot, screen)
        await wait_for(pilot, lambda: any(m.startswith("triggered schedule 'nightly'") for _, m in tui.notices))
    [(eid, workflow, schedule)] = rows(
        db, "SELECT id, workflow_name, input->>'schedule' FROM workflow_executions WHERE workflow_name = 'digest'"
    )
    assert (workflow, schedule) == ("digest", "nightly")
    assert rows(db, "SELECT actor, action, execution_id, comment FROM operator_actions") == [
        (OPERATOR, "trigger_schedule", eid, "backfill")
    ]
    assert rows(db, PAUSED)[1] == ("nightly", True, "alice")  # still paused
